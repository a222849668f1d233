"""Node, Pod and PriorityClass objects (API-server shapes) as the light records the model uses.

Objects arrive unvalidated: every field may be missing or of the wrong type, and such objects
are read as far as they make sense (an unnamed object is skipped), never raising.

Effective requests follow the scheduler (pending-gpus.md §2.2; k8s.io/component-helpers
resource.PodRequests [K-res]): max(app containers + sidecars, each plain init container plus the
sidecars started before it), plus ``spec.overhead``.  Pod-level ``spec.resources`` covers cpu,
memory and hugepages only, so it replaces the container sum for those and never changes GPUs.
GPUs are requested through limits; a missing request defaults to the limit [W-gpu].
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from policies.facts import NodeFacts, node_from_object
from policies.podresources import pod_requests
from policies.podspec import CONTAINER_LISTS, ContainerRef, PodTemplate
from policies.quantity import scheduler_units, try_parse, whole
from policies.resources import GpuResourceNames, is_gpu_share_resource
from policies.shapes import as_dict, as_list

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# Resources NodeResourcesFit checks besides extended ones [K-fit]; "pods" is a count, one per pod.
CORE_RESOURCES = ("cpu", "memory", "ephemeral-storage")
# Pod-level resources apply to these only (resource.IsSupportedPodLevelResource [K-res]).
POD_LEVEL_RESOURCES = ("cpu", "memory")
PREEMPT_NEVER = "Never"
PREEMPT_LOWER = "PreemptLowerPriority"
# GFD labels [N-gfd]: "<fully-qualified-resource-name>.count" (NVIDIA/k8s-device-plugin
# internal/lm/resource.go resourceLabeler.key); full GPUs always under nvidia.com/gpu.
LABEL_GPU_COUNT_SUFFIX = ".count"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"  # kubernetes.io well-known label


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _quantities(raw: Any) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, qty in as_dict(raw).items():
        parsed = try_parse(qty)
        if parsed is not None:
            out[str(name)] = parsed
    return out


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition: str = ""


def _pod_scheduled(raw: Any) -> Condition | None:
    for c in as_list(raw):
        if isinstance(c, Mapping) and c.get("type") == "PodScheduled":
            return Condition("PodScheduled", _str(c.get("status")), _str(c.get("reason")), _str(c.get("message")),
                             _str(c.get("lastTransitionTime")))
    return None


def _conditions(raw: Any) -> tuple[Condition, ...]:
    out = []
    for c in as_list(raw):
        if isinstance(c, Mapping) and isinstance(c.get("type"), str):
            out.append(Condition(c["type"], _str(c.get("status")), _str(c.get("reason")), _str(c.get("message")),
                                 _str(c.get("lastTransitionTime"))))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node's GPU-relevant status.  ``capacity``/``allocatable`` keep only keys that are present,
    so a missing key (never registered) and 0 (registered before) stay apart (§4, [K-ns])."""

    name: str
    labels: Mapping[str, str]
    capacity: Mapping[str, Fraction]
    allocatable: Mapping[str, Fraction]
    unschedulable: bool
    ready: str  # the Ready condition's status: "True", "False", "Unknown", or "" when absent
    ready_reason: str
    facts: NodeFacts  # labels, taints and allocatable for the scheduling filters

    @property
    def cordoned(self) -> bool:
        return self.unschedulable

    @property
    def not_ready(self) -> bool:
        return self.ready in ("False", "Unknown")

    def gfd_count(self, resource: str) -> int | None:
        """Devices GPU Feature Discovery counted for ``resource`` (``<resource>.count`` label)."""
        raw = self.labels.get(resource + LABEL_GPU_COUNT_SUFFIX)
        if raw is None:
            return None
        try:
            return int(raw)
        except ValueError:
            return None

    @property
    def mig_strategy(self) -> str:
        return self.labels.get(LABEL_MIG_STRATEGY, "")


def node_info(obj: Mapping[str, Any]) -> NodeInfo | None:
    meta = as_dict(obj.get("metadata"))
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        return None
    facts = node_from_object(obj)
    if facts is None:
        return None
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    ready = next((c for c in _conditions(status.get("conditions")) if c.type == "Ready"), None)
    return NodeInfo(
        name=name,
        labels=facts.labels,
        capacity=_quantities(status.get("capacity")),
        allocatable=_quantities(status.get("allocatable")),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready.status if ready else "",
        ready_reason=ready.reason if ready else "",
        facts=facts,
    )


@dataclass(frozen=True, slots=True)
class PriorityClassInfo:
    name: str
    value: int
    global_default: bool
    preemption_policy: str


def priority_class_info(obj: Mapping[str, Any]) -> PriorityClassInfo | None:
    name = as_dict(obj.get("metadata")).get("name")
    if not isinstance(name, str) or not name:
        return None
    return PriorityClassInfo(name, _int(obj.get("value")), obj.get("globalDefault") is True,
                             _str(obj.get("preemptionPolicy")) or PREEMPT_LOWER)


@dataclass(frozen=True, slots=True)
class PriorityClasses:
    """Resolves a pod's priority when admission has not filled ``spec.priority`` (a hand-made
    dump): its class's value, else the global default class's, else 0 [W-prio]."""

    by_name: Mapping[str, PriorityClassInfo] = field(default_factory=dict)
    global_default: PriorityClassInfo | None = None

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]]) -> PriorityClasses:
        found = {}
        for obj in objects:
            pc = priority_class_info(obj)
            if pc is not None:
                found[pc.name] = pc
        return cls(found, next((pc for pc in found.values() if pc.global_default), None))

    def resolve(self, spec: Mapping[str, Any]) -> tuple[int, str]:
        """(priority, preemptionPolicy) as the Priority admission plugin would set them."""
        cls_name = spec.get("priorityClassName")
        pc = self.by_name.get(cls_name) if isinstance(cls_name, str) and cls_name else self.global_default
        priority = spec.get("priority")
        value = priority if isinstance(priority, int) and not isinstance(priority, bool) else (pc.value if pc else 0)
        policy = _str(spec.get("preemptionPolicy")) or (pc.preemption_policy if pc else PREEMPT_LOWER)
        return value, policy


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    node_name: str  # "" when not bound
    phase: str
    priority: int
    preemption_policy: str
    nominated_node: str
    gpus: Mapping[str, int]  # effective GPU requests (whole devices)
    other: Mapping[str, int]  # effective requests: cpu in milli-CPU, memory / ephemeral-storage in bytes
    scheduling_gates: tuple[str, ...]
    deleting: bool
    created: str
    started: str
    owner: str  # "Kind/name" of the controller owner, or ""
    scheduled: Condition | None  # the PodScheduled condition
    obj: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def bound(self) -> bool:
        return bool(self.node_name)

    @property
    def gpu_total(self) -> int:
        return sum(self.gpus.values())

    @property
    def spec(self) -> Mapping[str, Any]:
        return as_dict(self.obj.get("spec"))

    def template(self) -> PodTemplate:
        return pod_template(self.obj)

    @property
    def gated(self) -> bool:
        return bool(self.scheduling_gates)

    @property
    def unschedulable(self) -> bool:
        """PodScheduled=False: the scheduler tried and failed (reason Unschedulable or SchedulerError)."""
        return self.scheduled is not None and self.scheduled.status == "False"


def pod_template(obj: Mapping[str, Any]) -> PodTemplate:
    """The Pod's spec as the engine's PodTemplate (for pod_requests and scheduling constraints)."""
    spec = as_dict(obj.get("spec"))
    refs: list[ContainerRef] = []
    for key, kind in CONTAINER_LISTS:
        for i, c in enumerate(as_list(spec.get(key))):
            if isinstance(c, dict):
                refs.append(ContainerRef((key, i), c, kind))
    return PodTemplate(spec=spec, spec_pointer="/spec", metadata=as_dict(obj.get("metadata")),
                       metadata_pointer="/metadata", containers=tuple(refs))


def _owner(meta: Mapping[str, Any]) -> str:
    refs = [r for r in as_list(meta.get("ownerReferences")) if isinstance(r, Mapping)]
    ref = next((r for r in refs if r.get("controller") is True), refs[0] if refs else None)
    return f"{_str(ref.get('kind'))}/{_str(ref.get('name'))}" if ref else ""


class PodReader:
    """Turns Pod objects into PodInfo, given which resources are GPUs and the PriorityClasses."""

    def __init__(self, gpu_names: Callable[[str], bool] | None = None,
                 priority_classes: PriorityClasses | None = None) -> None:
        self._gpu_names = gpu_names or GpuResourceNames()
        self._classes = priority_classes or PriorityClasses()
        # Replicas share their resource stanzas: effective requests are computed once per shape.
        self._requests_memo: dict[str, tuple[dict[str, int], dict[str, int]]] = {}

    def is_gpu(self, name: str) -> bool:
        # Quota-like GPU-share resources (HAMi memory/cores) are not device counts.
        return self._gpu_names(name) and not is_gpu_share_resource(name)

    def _wanted(self, name: str) -> bool:
        return name in CORE_RESOURCES or self.is_gpu(name)

    def effective_requests(self, obj: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
        """(GPU devices, other resources in scheduler units) the pod requests, as the scheduler sums them."""
        spec = as_dict(obj.get("spec"))
        shape = repr((
            [(c.get("resources"), c.get("restartPolicy")) if isinstance(c, dict) else None
             for c in as_list(spec.get("initContainers"))],
            [c.get("resources") if isinstance(c, dict) else None for c in as_list(spec.get("containers"))],
            spec.get("overhead"),
            spec.get("resources"),
        ))
        found = self._requests_memo.get(shape)
        if found is None:
            found = self._requests(obj, spec)
            if len(self._requests_memo) < 65536:
                self._requests_memo[shape] = found
        return found

    def _requests(self, obj: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
        requests = pod_requests(pod_template(obj), self._wanted, overhead=False)  # added after pod-level
        pod_level = _quantities(as_dict(spec.get("resources")).get("requests"))
        for res in POD_LEVEL_RESOURCES:
            if res in pod_level:
                requests[res] = pod_level[res]
        for res, q in _quantities(spec.get("overhead")).items():
            if self._wanted(res):
                requests[res] = requests.get(res, Fraction(0)) + q
        gpus = {k: whole(v) for k, v in requests.items() if self.is_gpu(k) and v > 0}
        other = {k: scheduler_units(k, v) for k, v in requests.items() if k in CORE_RESOURCES and v > 0}
        return gpus, other

    def read(self, obj: Mapping[str, Any]) -> PodInfo | None:
        meta = as_dict(obj.get("metadata"))
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            return None
        spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
        gpus, other = self.effective_requests(obj)
        priority, policy = self._classes.resolve(spec)
        gates = tuple(_str(as_dict(g).get("name")) for g in as_list(spec.get("schedulingGates")))
        scheduled = _pod_scheduled(status.get("conditions"))
        return PodInfo(
            namespace=_str(meta.get("namespace")) or "default",
            name=name,
            uid=_str(meta.get("uid")),
            node_name=_str(spec.get("nodeName")),
            phase=_str(status.get("phase")),
            priority=priority,
            preemption_policy=policy,
            nominated_node=_str(status.get("nominatedNodeName")),
            gpus=gpus,
            other=other,
            scheduling_gates=gates,
            deleting=bool(meta.get("deletionTimestamp")),
            created=_str(meta.get("creationTimestamp")),
            started=_str(status.get("startTime")),
            owner=_owner(meta),
            scheduled=scheduled,
            obj=obj,
        )

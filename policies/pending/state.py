"""One snapshot of the cluster as the pending-pod analysis sees it.

Built from plain API objects (``kubectl get nodes,pods,events,priorityclasses -A -o yaml``, as
``List``s or single objects; list items from the API server without ``kind`` can be passed per
kind to :meth:`ClusterState.build`).  ``resource.k8s.io`` objects (DeviceClasses, ResourceSlices,
ResourceClaims, ResourceClaimTemplates) become ``facts.dra``, so the engine's findings and the
device-plugin counts know what DRA serves (policies/pending/dra.py).  For workloads without pods
(policies/pending/workloads.py): ResourceQuotas, Kueue objects (Workloads, LocalQueues,
ClusterQueues, ResourceFlavors, Cohorts), controllers (batch Jobs and ReplicaSets: a Job Kueue holds
suspended, a ReplicaSet's ``ReplicaFailure`` condition) and FailedCreate events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.dra.facts import dra_facts_from_objects
from policies.dra.objects import GROUP as DRA_GROUP
from policies.facts import ClusterFacts, RuntimeClassFacts, runtime_class_from_object
from policies.karpenter import is_nodepool
from policies.pending.allocation import DEFAULT_POOL_LABELS, ClusterAllocation, build_allocation
from policies.pending.dra import mark_dra_gpus
from policies.pending.events import (
    ControllerEvent,
    EventIndex,
    SchedulingEvent,
    controller_event_from_object,
    event_from_object,
)
from policies.pending.objects import NodeInfo, PodInfo, PodReader, PriorityClasses, node_info
from policies.queue_facts import QueueFacts, is_kueue, queue_facts_from_objects
from policies.quota_facts import QuotaFacts, is_resource_quota, quota_facts_from_objects
from policies.resources import GpuResourceNames

EVENT_KINDS = ("Event",)
DRA_KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
CONTROLLER_KINDS = (("batch", "Job"), ("apps", "ReplicaSet"), ("", "ReplicationController"))


def flatten(objects: Iterable[Any]) -> Iterable[Mapping[str, Any]]:
    """Objects with ``*List`` wrappers opened; non-mappings dropped."""
    for obj in objects:
        if not isinstance(obj, Mapping):
            continue
        kind = obj.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(obj.get("items"), list):
            yield from flatten(obj["items"])
            continue
        yield obj


def _controller(obj: Mapping[str, Any]) -> bool:
    api_version = obj.get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else None
    kind = obj.get("kind")
    # an API list's items carry no apiVersion (gpuguard.kube.live sets the kind only)
    return any(kind == k and group in (g, None) for g, k in CONTROLLER_KINDS)


@dataclass(slots=True)
class ClusterObjects:
    """Raw objects sorted by kind."""

    nodes: list[Mapping[str, Any]] = field(default_factory=list)
    pods: list[Mapping[str, Any]] = field(default_factory=list)
    events: list[Mapping[str, Any]] = field(default_factory=list)
    priority_classes: list[Mapping[str, Any]] = field(default_factory=list)
    runtime_classes: list[Mapping[str, Any]] = field(default_factory=list)
    nodepools: list[Mapping[str, Any]] = field(default_factory=list)  # Karpenter: for the engine's facts
    dra: list[Mapping[str, Any]] = field(default_factory=list)  # resource.k8s.io objects (DRA_KINDS)
    quotas: list[Mapping[str, Any]] = field(default_factory=list)  # ResourceQuotas
    kueue: list[Mapping[str, Any]] = field(default_factory=list)  # kueue.x-k8s.io objects
    controllers: list[Mapping[str, Any]] = field(default_factory=list)  # CONTROLLER_KINDS
    other: int = 0  # objects of other kinds, ignored

    def add(self, obj: Mapping[str, Any]) -> None:
        kind = obj.get("kind")
        if kind == "Node":
            self.nodes.append(obj)
        elif kind == "Pod":
            self.pods.append(obj)
        elif kind in EVENT_KINDS:
            self.events.append(obj)
        elif kind == "PriorityClass":
            self.priority_classes.append(obj)
        elif kind == "RuntimeClass":
            self.runtime_classes.append(obj)
        elif is_nodepool(obj):
            self.nodepools.append(obj)
        elif kind in DRA_KINDS and str(obj.get("apiVersion") or "").startswith(DRA_GROUP + "/"):
            self.dra.append(obj)
        elif is_resource_quota(obj):
            self.quotas.append(obj)
        elif is_kueue(obj):
            self.kueue.append(obj)
        elif _controller(obj):
            self.controllers.append(obj)
        else:
            self.other += 1

    @classmethod
    def sort(cls, objects: Iterable[Any]) -> ClusterObjects:
        out = cls()
        for obj in flatten(objects):
            out.add(obj)
        return out


@dataclass(slots=True)
class ClusterState:
    nodes: tuple[NodeInfo, ...]
    pods: tuple[PodInfo, ...]
    priority_classes: PriorityClasses
    allocation: ClusterAllocation
    facts: ClusterFacts  # nodes and RuntimeClasses for the scheduling filters
    events: EventIndex
    is_gpu: Callable[[str], bool]
    _by_key: dict[str, PodInfo] = field(default_factory=dict, repr=False)
    # GPU resources DRA serves through a DeviceClass's extendedResourceName -> those classes
    dra_served: dict[str, tuple[str, ...]] = field(default_factory=dict)
    quotas: QuotaFacts | None = None  # the namespaces' ResourceQuotas (None: none in the input)
    queues: QueueFacts | None = None  # Kueue's objects, Workloads included (None: none in the input)
    controllers: tuple[Mapping[str, Any], ...] = ()  # batch Jobs, ReplicaSets, ReplicationControllers
    failed_creates: tuple[ControllerEvent, ...] = ()  # FailedCreate events of controllers

    @classmethod
    def build(
        cls,
        objects: ClusterObjects,
        gpu_names: Callable[[str], bool] | None = None,
        pool_labels: tuple[str, ...] = DEFAULT_POOL_LABELS,
    ) -> ClusterState:
        classes = PriorityClasses.from_objects(objects.priority_classes)
        reader = PodReader(gpu_names or GpuResourceNames(), classes)
        nodes = tuple(n for n in map(node_info, objects.nodes) if n is not None)
        pods = tuple(p for p in map(reader.read, objects.pods) if p is not None)
        runtime: dict[str, RuntimeClassFacts] = {}
        for obj in objects.runtime_classes:
            rc = runtime_class_from_object(obj)
            if rc is not None:
                runtime[rc.name] = rc
        dra = dra_facts_from_objects(objects.dra) if objects.dra else None
        facts = ClusterFacts(nodes=tuple(n.facts for n in nodes), runtime_classes=runtime, source="pending", dra=dra)
        events: list[SchedulingEvent] = [e for e in map(event_from_object, objects.events) if e is not None]
        allocation = build_allocation(nodes, pods, reader.is_gpu, pool_labels)
        served = mark_dra_gpus(facts, allocation)
        failed = tuple(e for e in map(controller_event_from_object, objects.events) if e is not None)
        return cls(nodes, pods, classes, allocation, facts, EventIndex(events), reader.is_gpu,
                   {p.key: p for p in pods}, served, quota_facts_from_objects(objects.quotas),
                   queue_facts_from_objects(objects.kueue), tuple(objects.controllers), failed)

    @classmethod
    def from_objects(cls, objects: Iterable[Any], gpu_names: Callable[[str], bool] | None = None) -> ClusterState:
        return cls.build(ClusterObjects.sort(objects), gpu_names)

    def pod(self, namespace: str, name: str) -> PodInfo | None:
        return self._by_key.get(f"{namespace}/{name}")

    def pending_gpu_pods(self) -> list[PodInfo]:
        """Pods that ask for GPUs, are not bound and not finished (gated ones included)."""
        return [p for p in self.pods if p.gpus and not p.bound and not p.terminal]

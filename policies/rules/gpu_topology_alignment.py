"""gpu-topology-alignment: a multi-GPU container cannot get its CPUs on its GPUs' NUMA node.

The kubelet's Topology Manager aligns devices, CPUs and memory on one NUMA node, but CPUs take part
only under the static CPU Manager policy, which "allows containers in Guaranteed pods with integer
CPU requests access to exclusive CPUs on the node" (kubernetes.io, "Control CPU Management Policies
on the Node"; OpenShift "Using Topology Manager": "To align CPU resources with other requested
resources in a Pod spec, the CPU Manager must be enabled with the static CPU Manager policy").  A
container with two or more GPUs in a pod that is not Guaranteed QoS, or whose own CPU request is
not a whole number, runs on the shared CPU pool, possibly across the socket from its GPUs, which
slows host-to-device copies and NCCL.  Guaranteed QoS follows ``ComputePodQOS``
(kubernetes/kubernetes pkg/apis/core/helper/qos/qos.go): every init and app container needs cpu and
memory limits equal to non-zero requests (a missing request defaults to the limit on Pods); GPUs
do not count; pod-level ``spec.resources``, when set, decide instead.  Reported as a warning — but
only when the options say the GPU nodes align anything: the kubelet's CPU Manager policy is
``none`` and its Topology Manager policy ``none`` by default (kubernetes.io, "Control CPU Management
Policies on the Node", "Control Topology Management Policies on a node"), and then no pod gets
exclusive or aligned CPUs whatever its QoS.  So the check runs when ``cpuManagerPolicy: static`` or
a ``topologyManagerPolicy`` other than ``none``/``unknown`` is set.

With ``topologyManagerPolicy: single-numa-node`` and ``gpusPerNumaNode: N``, a container that
needs more than N whole GPUs (MIG instances and shared replicas are not counted) can never
fit one NUMA node: the kubelet rejects the pod on every node with
``TopologyAffinityError`` ("Resources cannot be allocated with Topology locality",
pkg/kubelet/cm/topologymanager/scope.go).  That is reported as an **error**, whatever the QoS,
since the Topology Manager gathers device hints for pods of all QoS classes.  The check uses the
kubelet's default ``container`` scope.  With ``topologyManagerPolicy: none`` no alignment is ever
attempted and the rule reports nothing.

Options:

``cpuManagerPolicy``
    The kubelet ``--cpu-manager-policy`` of the GPU nodes: ``unknown`` (default), ``none`` or
    ``static``.
``topologyManagerPolicy``
    The kubelet ``--topology-manager-policy`` of the GPU nodes: ``unknown`` (default), ``none``,
    ``best-effort``, ``restricted`` or ``single-numa-node``.
``gpusPerNumaNode``
    GPUs attached to one NUMA node of the GPU nodes (e.g. 4 on an 8-GPU, two-socket server);
    0 (default) means unknown.

Failing (``cpuManagerPolicy: static``)::

    containers:
    - name: trainer
      resources:
        limits: {nvidia.com/gpu: 4, cpu: 7500m, memory: 200Gi}

Passing::

    containers:
    - name: trainer
      resources:
        limits: {nvidia.com/gpu: 4, cpu: "8", memory: 200Gi}   # Guaranteed, integer CPUs
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from policies.applicability import Applies
from policies.podspec import ContainerRef, runnable_containers
from policies.quantity import try_parse
from policies.rule import NeedsFacts, Option, RuleContext
from policies.rulekit import gpu_devices
from policies.shapes import as_dict, text
from policies.types import RelPath, Severity, Violation
from policies.wording import plural

ID = "gpu-topology-alignment"
DEFAULT_SEVERITY = Severity.WARNING
NEEDS_FACTS: NeedsFacts = "no"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = None
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "A multi-GPU container cannot get CPU/GPU NUMA alignment, or cannot fit one NUMA node under single-numa-node."
REMEDIATION = (
    "Make the pod Guaranteed QoS (cpu and memory limits equal to requests in every container) with an integer "
    "CPU request in each multi-GPU container; under single-numa-node, request at most one NUMA node's GPUs per "
    "container."
)
POLICIES = ("unknown", "none", "best-effort", "restricted", "single-numa-node")
CPU_POLICIES = ("unknown", "none", "static")
ALIGNING_POLICIES = ("best-effort", "restricted", "single-numa-node")
OPTIONS: tuple[Option, ...] = (
    Option(
        "cpuManagerPolicy",
        (str,),
        "unknown",
        "The kubelet CPU manager policy of the GPU nodes; 'static' turns on the Guaranteed-QoS and integer-CPU "
        "checks (the kubelet default is 'none', under which no pod gets exclusive CPUs).",
        CPU_POLICIES,
    ),
    Option(
        "topologyManagerPolicy",
        (str,),
        "unknown",
        "The kubelet topology manager policy of the GPU nodes; 'single-numa-node' turns GPUs beyond a NUMA "
        "node's share into an error, 'none' disables the rule.",
        POLICIES,
    ),
    Option(
        "gpusPerNumaNode",
        (int,),
        0,
        "GPUs attached to one NUMA node of the GPU nodes; 0 means unknown.",
    ),
)

_QOS_RESOURCES = ("cpu", "memory")

def _whole_gpus(gpus: dict[str, Fraction]) -> int:
    """Physical GPUs: MIG instances and shared replicas may sit several to one GPU."""
    return int(sum(q for name, q in gpus.items() if "/mig-" not in name and not name.endswith(".shared")))


def _not_guaranteed(resources: dict[str, Any]) -> str | None:
    """Why these requirements are not Guaranteed (cpu and memory: request == limit > 0), or None."""
    limits, requests = as_dict(resources.get("limits")), as_dict(resources.get("requests"))
    for r in _QOS_RESOURCES:
        if r not in limits:
            return f"has no {r} limit"
        limit = try_parse(limits[r])
        request = try_parse(requests[r]) if r in requests else limit  # Pods default requests to limits
        if limit is None or request is None:
            return f"has an invalid {r} quantity"
        if limit <= 0:
            return f"has a zero {r} limit"
        if request != limit:
            return f"requests {r} {text(requests[r], 40)} but its limit is {text(limits[r], 40)}"
    return None


def _qos_problem(ctx: RuleContext) -> str | None:
    """Why the pod is not Guaranteed QoS, or None when it is."""
    pod_resources = ctx.pod.spec.get("resources") if ctx.pod.shape != "component" else None
    if isinstance(pod_resources, dict) and pod_resources:
        reason = _not_guaranteed(pod_resources)
        return None if reason is None else f"the pod is not Guaranteed QoS: pod-level spec.resources {reason}"
    for c in runnable_containers(ctx.pod):
        reason = _not_guaranteed(c.resources)
        if reason is not None:
            who = f"{'init ' if c.kind == 'initContainer' else ''}container {c.name!r}"
            return f"the pod is not Guaranteed QoS: {who} {reason}"
    return None


def _cpu_problem(c: ContainerRef) -> tuple[str, RelPath] | None:
    """Why this container's CPU request is not a positive integer, and where, or None."""
    for which in ("requests", "limits"):
        amounts = c.resource_map(which)
        if "cpu" in amounts:
            q = try_parse(amounts["cpu"])
            if q is not None and q > 0 and q.denominator == 1:
                return None
            problem = f"its CPU request {text(amounts['cpu'], 40)} is not a whole number of CPUs"
            return problem, (*c.resources_path, which, "cpu")
    return "it requests no CPU", c.resources_path


def _gpu_key_path(c: ContainerRef, names: list[str]) -> RelPath:
    for which in ("limits", "requests"):
        for name in names:
            if name in c.resource_map(which):
                return (*c.resources_path, which, name)
    return c.resources_path


def check(ctx: RuleContext) -> Iterator[Violation]:
    policy = ctx.options.get("topologyManagerPolicy", "unknown")
    per_numa = ctx.options.get("gpusPerNumaNode", 0)
    if policy == "none":
        return
    # CPU alignment exists only where the nodes run the static CPU manager or a topology policy.
    aligning = ctx.options.get("cpuManagerPolicy") == "static" or policy in ALIGNING_POLICIES
    qos_problem: str | None = None
    qos_checked = False
    for c in runnable_containers(ctx.pod):
        gpus = gpu_devices(ctx, c)
        count = int(sum(gpus.values()))
        if count < 2:
            continue
        whole = _whole_gpus(gpus)
        if policy == "single-numa-node" and isinstance(per_numa, int) and 0 < per_numa < whole:
            yield Violation(
                message=(
                    f"container {c.name!r} needs {whole} GPUs but a NUMA node has {per_numa}; under the "
                    f"single-numa-node topology policy the kubelet rejects the pod with TopologyAffinityError: "
                    f"request at most {plural(per_numa, 'GPU')} per container (split the work across pods or "
                    "containers)"
                ),
                path=_gpu_key_path(c, sorted(gpus, key=lambda n: -gpus[n])),
                severity=Severity.ERROR,
            )
            continue
        if not aligning:
            continue
        if not qos_checked:
            qos_problem, qos_checked = _qos_problem(ctx), True
        # A pod that is not Guaranteed gets no exclusive CPUs at all, so its reason comes first.
        found = (qos_problem, c.resources_path) if qos_problem is not None else _cpu_problem(c)
        if found is None:
            continue
        reason, path = found
        yield Violation(
            message=(
                f"container {c.name!r} uses {count} GPUs but {reason}, so the kubelet cannot give it exclusive CPUs "
                f"on its GPUs' NUMA node: make the pod Guaranteed (cpu and memory limits equal to requests in every "
                f"container) with an integer cpu request"
            ),
            path=path,
        )

"""gpu-memory-limit-missing: a container that uses GPUs has no memory limit.

A container without a memory limit may use all of the node's memory (kubernetes.io, "Assign Memory
Resources to Containers and Pods": without a memory limit "The Container could use all of the
memory available on the Node where it is running which in turn could invoke the OOM Killer").  GPU jobs pin
large host buffers (CUDA pinned memory, NCCL, DataLoader workers, memory-backed /dev/shm), so one
of them can push its node into memory pressure and get other GPU pods, which hold scarce and
expensive devices, evicted or OOM-killed.  Without a memory limit the pod also cannot be
Guaranteed QoS (kubernetes/kubernetes pkg/apis/core/helper/qos/qos.go), which CPU/GPU NUMA
alignment needs (see ``gpu-topology-alignment``).

A pod-level memory limit (``spec.resources.limits.memory``, PodLevelResources) bounds every
container of the pod and therefore satisfies this rule.

Reported as **info** by default: it is resource hygiene, not a reason the pod will not get a
working GPU, and most public GPU manifests omit memory limits (71 of the findings on the 144 real
manifests of the shared corpus).  Raise it with ``rules: {gpu-memory-limit-missing: {severity:
warning}}`` where a policy requires memory limits.

Failing::

    resources:
      limits: {nvidia.com/gpu: 1, cpu: "8"}

Passing::

    resources:
      limits: {nvidia.com/gpu: 1, cpu: "8", memory: 64Gi}
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.applicability import Applies
from policies.podspec import runnable_containers
from policies.quantity import format_quantity
from policies.rule import NeedsFacts, Option, RuleContext
from policies.rulekit import gpu_resources
from policies.types import Severity, Violation

ID = "gpu-memory-limit-missing"
DEFAULT_SEVERITY = Severity.INFO
NEEDS_FACTS: NeedsFacts = "no"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = None
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "A container that uses GPUs has no memory limit."
REMEDIATION = (
    "Set resources.limits.memory on every GPU container (equal to requests.memory for Guaranteed QoS); "
    "size it for pinned host buffers, DataLoader workers and a memory-backed /dev/shm."
)
OPTIONS: tuple[Option, ...] = ()


def _pod_level_memory_limit(ctx: RuleContext) -> bool:
    if ctx.pod.shape == "component":
        return False
    pod_resources = ctx.pod.spec.get("resources")
    limits = pod_resources.get("limits") if isinstance(pod_resources, dict) else None
    return isinstance(limits, dict) and "memory" in limits


def check(ctx: RuleContext) -> Iterator[Violation]:
    if _pod_level_memory_limit(ctx):
        return
    for c in runnable_containers(ctx.pod):
        gpus = gpu_resources(ctx, c)
        if not gpus:
            continue
        limits = c.resources.get("limits")
        if isinstance(limits, dict) and "memory" in limits:
            continue
        uses = ", ".join(f"{format_quantity(q)} {name}" for name, q in sorted(gpus.items()))
        path = (*c.resources_path, "limits") if isinstance(limits, dict) else c.resources_path
        yield Violation(
            message=(
                f"container {c.name!r} uses {uses} but has no memory limit; it can exhaust the node's memory "
                f"and get other GPU pods evicted: set resources.limits.memory"
            ),
            path=path,
        )

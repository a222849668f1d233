"""GPUs allocatable, allocated, reserved and free, per node and per pool.

The scheduler's fit test is ``podRequest > Allocatable − Requested`` per node [K-fit], where
Requested sums the effective requests of every pod assigned to the node; its informer lists only
pods that are not Succeeded/Failed (pending-gpus.md §2.1).  So a pod counts against node X iff
``spec.nodeName == X`` and its phase is not terminal — a bound pod still pulling images holds its
GPUs, and so does a terminating one until it ends.

Pods nominated to a node (``status.nominatedNodeName``, set by preemption) are filtered in as if
they were there, but only those of equal or higher priority than the pod being scheduled
(pkg/scheduler/framework/runtime/framework.go ``addGENominatedPods``: "adds pods with equal or
greater priority which are nominated to run on the node"; code index id 323256729, commit not
reported).  :meth:`NodeAllocation.free` therefore takes the priority of the pod asking.

Free GPUs come from ``status.allocatable`` (healthy devices), not ``capacity`` (§2.3, §4).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from policies.pending.objects import CORE_RESOURCES, LABEL_INSTANCE_TYPE, NodeInfo, PodInfo
from policies.quantity import scheduler_units, whole

LABEL_PRODUCT = "nvidia.com/gpu.product"  # GPU Feature Discovery [N-gfd]
UNLABELLED = "unlabelled"
# Pools group nodes by what a GPU job cares about: the GPU model, then the machine type.
DEFAULT_POOL_LABELS: tuple[str, ...] = (LABEL_PRODUCT, LABEL_INSTANCE_TYPE)


@dataclass(slots=True)
class GpuCount:
    """One GPU resource on one node.  ``capacity``/``allocatable`` are None when the key is absent."""

    capacity: int | None
    allocatable: int | None
    gfd_count: int | None = None
    allocated: int = 0
    nominated: int = 0  # requests of all pods nominated here (any priority)

    @property
    def usable(self) -> int:
        return self.allocatable or 0

    @property
    def free(self) -> int:
        """Allocatable − allocated − every nominated reservation, never below 0."""
        return max(0, self.usable - self.allocated - self.nominated)

    @property
    def overcommitted(self) -> int:
        """GPUs bound pods hold beyond allocatable (allocatable dropped under running pods)."""
        return max(0, self.allocated - self.usable)

    @property
    def unhealthy(self) -> int:
        """capacity − allocatable: devices the plugin reports Unhealthy ([K-dm] GetCapacity)."""
        if self.capacity is None:
            return 0
        return max(0, self.capacity - self.usable)


@dataclass(slots=True)
class NodeAllocation:
    node: NodeInfo
    pool: str
    gpus: dict[str, GpuCount]
    allocatable_other: dict[str, int]  # cpu in milli-CPU, memory / ephemeral-storage in bytes
    max_pods: int | None
    requested_other: dict[str, int] = field(default_factory=dict)
    pod_count: int = 0
    pods: list[PodInfo] = field(default_factory=list)  # bound, not terminal
    nominated: list[PodInfo] = field(default_factory=list)  # pending pods nominated here
    dra_gpus: frozenset[str] = frozenset()  # GPU resources DRA serves here (policies/pending/dra.py)

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def holders(self) -> list[PodInfo]:
        return [p for p in self.pods if p.gpus]

    def reserved_for(self, resource: str, priority: int | None = None, exclude_uid: str = "") -> int:
        """GPUs of ``resource`` that nominated pods reserve against a pod of ``priority``."""
        return sum(
            p.gpus.get(resource, 0)
            for p in self.nominated
            if (priority is None or p.priority >= priority) and not (exclude_uid and p.uid == exclude_uid)
        )

    def balance(self, resource: str, priority: int | None = None, exclude_uid: str = "") -> int:
        """Allocatable − allocated − reserved, possibly negative (over-committed)."""
        count = self.gpus.get(resource)
        if count is None:
            return 0
        return count.usable - count.allocated - self.reserved_for(resource, priority, exclude_uid)

    def free(self, resource: str, priority: int | None = None, exclude_uid: str = "") -> int:
        return max(0, self.balance(resource, priority, exclude_uid))

    def free_other(self, resource: str) -> int | None:
        """Free cpu (milli) / memory / ephemeral-storage; None when the node does not report it."""
        have = self.allocatable_other.get(resource)
        if have is None:
            return None
        return have - self.requested_other.get(resource, 0)

    @property
    def free_pod_slots(self) -> int | None:
        return None if self.max_pods is None else self.max_pods - self.pod_count


@dataclass(slots=True)
class PoolSummary:
    """Totals of one GPU resource over one pool's nodes."""

    name: str
    resource: str
    nodes: int = 0
    capacity: int = 0
    allocatable: int = 0
    allocated: int = 0
    reserved: int = 0  # by nominated pods
    free: int = 0
    unhealthy: int = 0
    unavailable_nodes: int = 0  # cordoned or NotReady
    free_on_unavailable: int = 0  # free GPUs on cordoned/NotReady nodes (counted in ``free``)
    node_names: list[str] = field(default_factory=list, repr=False)


def pool_name(node: NodeInfo, labels: tuple[str, ...] = DEFAULT_POOL_LABELS) -> str:
    parts = [node.labels[k] for k in labels if node.labels.get(k)]
    if not parts:
        return UNLABELLED
    return parts[0] + "".join(f" ({p})" for p in parts[1:])


def gpu_resources_of(node: NodeInfo, is_gpu: Callable[[str], bool]) -> list[str]:
    """GPU resources the node has, had (key present at 0) or should have (GFD ``<r>.count``)."""
    names = {r for r in (*node.capacity, *node.allocatable) if is_gpu(r)}
    for label in node.labels:
        resource = label[: -len(".count")]
        if label.endswith(".count") and is_gpu(resource) and (node.gfd_count(resource) or 0) > 0:
            names.add(resource)
    return sorted(names)


@dataclass(slots=True)
class ClusterAllocation:
    nodes: dict[str, NodeAllocation]
    pools: list[PoolSummary]
    unknown_node_pods: list[PodInfo]  # bound to a node the input does not have
    gpu_resources: tuple[str, ...]
    lowest_holder_priority: int | None = None  # lowest priority of a pod holding GPUs on a GPU node

    def pool(self, name: str, resource: str) -> PoolSummary | None:
        return next((p for p in self.pools if p.name == name and p.resource == resource), None)


def build_allocation(
    nodes: Iterable[NodeInfo],
    pods: Iterable[PodInfo],
    is_gpu: Callable[[str], bool],
    pool_labels: tuple[str, ...] = DEFAULT_POOL_LABELS,
) -> ClusterAllocation:
    """Allocation of every GPU node (nodes without GPU resources or GFD GPU labels are left out)."""
    table: dict[str, NodeAllocation] = {}
    all_names: set[str] = set()
    for node in nodes:
        all_names.add(node.name)
        resources = gpu_resources_of(node, is_gpu)
        if not resources:
            continue
        gpus = {
            r: GpuCount(
                capacity=whole(node.capacity[r]) if r in node.capacity else None,
                allocatable=whole(node.allocatable[r]) if r in node.allocatable else None,
                gfd_count=node.gfd_count(r),
            )
            for r in resources
        }
        max_pods = node.allocatable.get("pods", node.capacity.get("pods"))
        table[node.name] = NodeAllocation(
            node=node,
            pool=pool_name(node, pool_labels),
            gpus=gpus,
            allocatable_other={r: scheduler_units(r, node.allocatable[r]) for r in CORE_RESOURCES
                               if r in node.allocatable},
            max_pods=whole(max_pods) if max_pods is not None else None,
        )
    unknown: list[PodInfo] = []
    for pod in pods:
        if pod.terminal:
            continue
        if pod.node_name:
            alloc = table.get(pod.node_name)
            if alloc is None:
                if pod.gpus and pod.node_name not in all_names:
                    unknown.append(pod)
                continue
            alloc.pods.append(pod)
            alloc.pod_count += 1
            for r, q in pod.other.items():
                alloc.requested_other[r] = alloc.requested_other.get(r, 0) + q
            for r, n in pod.gpus.items():
                count = alloc.gpus.get(r)
                if count is not None:
                    count.allocated += n
        elif pod.nominated_node:
            alloc = table.get(pod.nominated_node)
            if alloc is not None and pod.gpus:
                alloc.nominated.append(pod)
                for r, n in pod.gpus.items():
                    count = alloc.gpus.get(r)
                    if count is not None:
                        count.nominated += n
    lowest = min((p.priority for a in table.values() for p in a.pods if p.gpus), default=None)
    return ClusterAllocation(table, summarise_pools(table.values()), unknown,
                             tuple(sorted({r for a in table.values() for r in a.gpus})), lowest)


def summarise_pools(nodes: Iterable[NodeAllocation]) -> list[PoolSummary]:
    pools: dict[tuple[str, str], PoolSummary] = {}
    for alloc in nodes:
        unavailable = alloc.node.cordoned or alloc.node.not_ready
        for resource, count in alloc.gpus.items():
            key = (alloc.pool, resource)
            pool = pools.get(key)
            if pool is None:
                pool = pools[key] = PoolSummary(alloc.pool, resource)
            pool.nodes += 1
            pool.node_names.append(alloc.name)
            pool.capacity += count.capacity or 0
            pool.allocatable += count.usable
            pool.allocated += count.allocated
            pool.reserved += count.nominated
            pool.free += count.free
            pool.unhealthy += count.unhealthy
            if unavailable:
                pool.unavailable_nodes += 1
                pool.free_on_unavailable += count.free
    return sorted(pools.values(), key=lambda p: (p.resource, p.name))


def totals(pools: Iterable[PoolSummary]) -> Mapping[str, dict[str, int]]:
    """Cluster-wide sums per GPU resource."""
    out: dict[str, dict[str, int]] = {}
    for p in pools:
        t = out.setdefault(p.resource, {"allocatable": 0, "allocated": 0, "reserved": 0, "free": 0, "unhealthy": 0})
        t["allocatable"] += p.allocatable
        t["allocated"] += p.allocated
        t["reserved"] += p.reserved
        t["free"] += p.free
        t["unhealthy"] += p.unhealthy
    return out

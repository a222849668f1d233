"""Cluster facts: an immutable snapshot of nodes and RuntimeClasses.

Nodes that differ only in per-node labels (hostname, GFD timestamp, …) are grouped, so that
rules cost O(groups) rather than O(nodes): a 5,000-node cluster is usually a handful of groups.

GPU Feature Discovery labels (NVIDIA/k8s-device-plugin docs/gpu-feature-discovery/README.md and
internal/lm/nvml.go; older names from docs/gfd_labels.md): both the deprecated
``nvidia.com/cuda.driver.{major,minor,rev}`` / ``nvidia.com/cuda.runtime.{major,minor}`` and the
current ``nvidia.com/cuda.driver-version.{major,minor,revision,full}`` /
``nvidia.com/cuda.runtime-version.{major,minor,full}`` are read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeVar

from policies.labeldomain import LabelDomain
from policies.managed import detect_extended_resource_toleration, pending_gpu_resources
from policies.quantity import try_parse
from policies.resources import is_native
from policies.shapes import as_list, as_mapping

if TYPE_CHECKING:
    from policies.dra.facts import DraFacts
    from policies.queue_facts import QueueFacts
    from policies.quota_facts import QuotaFacts

LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
LABEL_DRIVER_NEW = (
    "nvidia.com/cuda.driver-version.major",
    "nvidia.com/cuda.driver-version.minor",
    "nvidia.com/cuda.driver-version.revision",
)
LABEL_DRIVER_OLD = ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev")
LABEL_CUDA_FULL = "nvidia.com/cuda.runtime-version.full"
LABEL_CUDA_NEW = ("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor")
LABEL_CUDA_OLD = ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor")

# Labels whose value is unique per node; they are kept per member, not in the group key.
VOLATILE_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "nvidia.com/gfd.timestamp",
        "topology.kubernetes.io/zone-id",
        "node.kubernetes.io/instance-id",
        "nvidia.com/gpu.clique",
    }
)

Version = tuple[int, ...]
T = TypeVar("T")
MEMO_LIMIT = 4096  # distinct templates / constraint sets remembered per snapshot
PINNED_LIMIT = 256  # per-snapshot derived data (per config at most), kept when the template memo starts over


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True, slots=True)
class RuntimeClassFacts:
    name: str
    handler: str
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class PoolTraits:
    """What is known of the nodes a pool creates when it scales up (see policies.capacity).

    ``domains``: labels whose value varies over the nodes the pool may create (fixed labels are
    the pool node's ``labels``); ``open_keys``/``open_prefixes``: well-known labels every created
    node carries with a value its instance type decides.  ``startup_taints`` are removed once the
    node is ready, so pods need not tolerate them (Karpenter NodePool ``startupTaints``).
    """

    origin: str  # what declared the pool, e.g. "Karpenter NodePool"
    domains: tuple[tuple[str, LabelDomain], ...] = ()
    open_keys: frozenset[str] = frozenset()
    open_prefixes: tuple[str, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    shape_note: str = ""  # why the GPU shape is (partly) unknown, for messages
    # How large the pool may grow (policies.gangfit): Karpenter ``spec.limits`` (totals over every
    # node it has created, ``nodes`` among them), a declared pool's ``maxNodes``.  ``size_known``
    # is False where nothing says (a declared pool without maxNodes); a NodePool without limits is
    # unbounded by Karpenter's definition.
    limits: tuple[tuple[str, Fraction], ...] = ()
    max_nodes: int | None = None
    size_known: bool = True

    def domain(self, key: str) -> LabelDomain:
        for k, d in self.domains:
            if k == key:
                return d
        if key in self.open_keys or key.startswith(self.open_prefixes):
            return LabelDomain.unknown()
        return LabelDomain.absent()


@dataclass(frozen=True, slots=True)
class NodeFacts:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    allocatable: Mapping[str, Fraction]
    unschedulable: bool = False
    # GPU resources the node may offer in a count nobody knows yet: a pool whose instance shape is
    # open, or a GPU node whose device plugin has not registered its resources yet.
    may_offer: frozenset[str] = frozenset()
    pool: PoolTraits | None = None  # set for capacity that can appear, not for existing nodes
    pending_reason: str = ""  # why ``may_offer`` is set on an existing node
    # Extended resources DRA serves on this node, as (resource, DeviceClass): its allocatable then
    # counts the class's devices the node reaches (policies.dra.capacity).
    dra_served: tuple[tuple[str, str], ...] = ()
    # Resources the device plugin advertises here that DRA also serves: (resource, what serves it).
    dra_conflicts: tuple[tuple[str, str], ...] = ()

    @property
    def gpu_product(self) -> str | None:
        return self.labels.get(LABEL_PRODUCT)

    def label_domain(self, key: str) -> LabelDomain:
        """The values ``key`` can have on this node (on any node the pool may create)."""
        value = self.labels.get(key)
        if value is not None:
            return LabelDomain.exactly(value)
        return LabelDomain.absent() if self.pool is None else self.pool.domain(key)

    def describe(self) -> str:
        if self.pool is not None:
            return f"{self.pool.origin} {self.name!r} (scales up on demand)"
        return self.name

    @property
    def driver_version(self) -> Version | None:
        return _parsed_driver(tuple(self.labels.get(k) for k in _DRIVER_KEYS))

    @property
    def cuda_version(self) -> Version | None:
        return _parsed_cuda(tuple(self.labels.get(k) for k in _CUDA_KEYS))


def _version(text: str) -> Version | None:
    parts = text.strip().split(".")
    try:
        return tuple(int(p) for p in parts) if parts and all(parts) else None
    except ValueError:
        return None


def _from_parts(labels: Mapping[str, str], keys: Iterable[str]) -> Version | None:
    values = [labels.get(k) for k in keys]
    if values[0] is None or values[1] is None:
        return None
    present = [v for v in values if v is not None and v != ""]
    return _version(".".join(present))


# Rules ask a node's driver and CUDA version for every group of every evaluation; nodes of a fleet
# share a handful of label values, so the parses are cached on the label values they read.
_DRIVER_KEYS = (LABEL_DRIVER_FULL, *LABEL_DRIVER_NEW, *LABEL_DRIVER_OLD)
_CUDA_KEYS = (LABEL_CUDA_FULL, *LABEL_CUDA_NEW, *LABEL_CUDA_OLD)


@functools.lru_cache(maxsize=1024)
def _parsed_driver(values: tuple[str | None, ...]) -> Version | None:
    return parse_driver_version({k: v for k, v in zip(_DRIVER_KEYS, values, strict=True) if v is not None})


@functools.lru_cache(maxsize=1024)
def _parsed_cuda(values: tuple[str | None, ...]) -> Version | None:
    return parse_cuda_version({k: v for k, v in zip(_CUDA_KEYS, values, strict=True) if v is not None})


def driver_version_of(labels: Mapping[str, str]) -> Version | None:
    """``parse_driver_version``, cached on the label values it reads."""
    values = tuple(labels.get(k) for k in _DRIVER_KEYS)
    try:
        return _parsed_driver(values)
    except TypeError:  # an unhashable value (not from a Node object): parse it uncached
        return parse_driver_version(labels)


def cuda_version_of(labels: Mapping[str, str]) -> Version | None:
    """``parse_cuda_version``, cached on the label values it reads."""
    values = tuple(labels.get(k) for k in _CUDA_KEYS)
    try:
        return _parsed_cuda(values)
    except TypeError:
        return parse_cuda_version(labels)


def parse_driver_version(labels: Mapping[str, str]) -> Version | None:
    full = labels.get(LABEL_DRIVER_FULL)
    if full:
        parsed = _version(full)
        if parsed:
            return parsed
    return _from_parts(labels, LABEL_DRIVER_NEW) or _from_parts(labels, LABEL_DRIVER_OLD)


def parse_cuda_version(labels: Mapping[str, str]) -> Version | None:
    full = labels.get(LABEL_CUDA_FULL)
    if full:
        parsed = _version(full)
        if parsed:
            return parsed
    return _from_parts(labels, LABEL_CUDA_NEW) or _from_parts(labels, LABEL_CUDA_OLD)


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """Nodes identical in everything scheduling looks at except per-node (volatile) labels.

    ``varying_labels`` names the label keys left out of the grouping key on some member (volatile
    keys and labels whose value is the node's own name): a selector reading one of them has to be
    evaluated per member, not on the representative.
    """

    representative: NodeFacts
    members: tuple[NodeFacts, ...]
    varying_labels: frozenset[str] = frozenset()

    @property
    def size(self) -> int:
        return len(self.members)

    def describe(self, limit: int = 3) -> str:
        names = [m.describe() for m in self.members[:limit]]
        more = f" and {self.size - limit} more" if self.size > limit else ""
        rep = self.representative
        details = [d for d in (rep.gpu_product, rep.pending_reason) if d]
        what = f" ({'; '.join(details)})" if details else ""
        return ", ".join(names) + more + what


# A label key whose values differ on more than half the nodes that carry it (and take at least this
# many values) is a per-node label of this cluster (an instance id, a serial number, a cloud
# provider's node id) even when it is not in VOLATILE_LABELS: it is kept per member, not in the
# group key, so a fleet of identical nodes stays a handful of groups.
PER_NODE_MIN_VALUES = 9


def _per_node_keys(nodes: Iterable[NodeFacts]) -> frozenset[str]:
    values: dict[str, set[str]] = {}
    carriers: dict[str, int] = {}
    for node in nodes:
        if node.pool is not None:
            continue
        for key, value in node.labels.items():
            values.setdefault(key, set()).add(value)
            carriers[key] = carriers.get(key, 0) + 1
    return frozenset(
        k for k, seen in values.items() if len(seen) >= PER_NODE_MIN_VALUES and 2 * len(seen) > carriers[k]
    )


def _is_per_node(node: NodeFacts, key: str, value: str, per_node: frozenset[str]) -> bool:
    return key in VOLATILE_LABELS or key in per_node or value == node.name


def _group_key(node: NodeFacts, per_node: frozenset[str]) -> tuple[Any, ...]:
    """What scheduling and the rules read of a node.  Only extended resources of the allocatable
    count (rules compare GPU requests, never cpu or memory): in real fleets allocatable memory and
    ephemeral storage differ by a few KiB between nodes of one type, and must not split a pool
    into one group per node."""
    if node.pool is not None:
        return ("pool", node.name, node.pool)  # a pool is its own group, never merged with nodes
    labels = tuple(sorted((k, v) for k, v in node.labels.items() if not _is_per_node(node, k, v, per_node)))
    extended = tuple(sorted((k, v) for k, v in node.allocatable.items() if not is_native(k)))
    return (labels, node.taints, extended, node.unschedulable, node.may_offer, node.dra_served, node.dra_conflicts)


def _varying_labels(members: Iterable[NodeFacts], per_node: frozenset[str]) -> frozenset[str]:
    # A pool's labels are the same on every node it creates (karpenter.sh/nodepool: <its name> too).
    return frozenset(
        k for m in members if m.pool is None for k, v in m.labels.items() if _is_per_node(m, k, v, per_node)
    )


@dataclass(frozen=True, slots=True)
class BoundNodeKey:
    """Memo key of ``ClusterFacts.bound_to``."""

    node_name: str


@dataclass(frozen=True, slots=True)
class ResourceNamesKey:
    """Memo key of ``ClusterFacts.resource_names`` (reads only the snapshot)."""


@dataclass(frozen=True)
class ClusterFacts:
    """Nodes, RuntimeClasses, capacity that can appear (``pools``) and cluster behaviour.

    ``extended_resource_toleration``: whether the API server runs the ExtendedResourceToleration
    admission plugin; None means "as the nodes tell" (policies.managed detects GKE and AKS).
    """

    nodes: tuple[NodeFacts, ...] = ()
    runtime_classes: Mapping[str, RuntimeClassFacts] = field(default_factory=dict)
    source: str = "none"
    pools: tuple[NodeFacts, ...] = ()
    extended_resource_toleration: bool | None = None
    # DeviceClasses, ResourceSlices, ResourceClaims and templates (policies.dra.facts); None: not known.
    dra: DraFacts | None = None
    # Namespace ResourceQuotas (policies.quota_facts) and Kueue queues (policies.queue_facts);
    # None: not known (not in the snapshot, Kueue not served).
    quotas: QuotaFacts | None = None
    queues: QueueFacts | None = None
    groups: tuple[NodeGroup, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        buckets: dict[tuple[Any, ...], list[NodeFacts]] = {}
        per_node = _per_node_keys(self.nodes)
        for node in (*self.nodes, *self.pools):
            buckets.setdefault(_group_key(node, per_node), []).append(node)
        groups = tuple(
            NodeGroup(members[0], tuple(members), _varying_labels(members, per_node))
            for members in buckets.values()
        )
        object.__setattr__(self, "groups", groups)
        object.__setattr__(self, "_memo", {})
        object.__setattr__(self, "_pinned", {})
        if self.extended_resource_toleration is None:
            reason = detect_extended_resource_toleration(self.nodes)
        else:
            reason = "configured (extendedResourceToleration: true)" if self.extended_resource_toleration else None
        object.__setattr__(self, "_ert_reason", reason)

    @property
    def is_empty(self) -> bool:
        return not self.nodes and not self.runtime_classes and not self.pools

    @property
    def tolerates_extended_resources(self) -> bool:
        """Whether every pod gets a NoSchedule toleration for each extended resource it requests."""
        return self._ert_reason is not None  # type: ignore[attr-defined]

    @property
    def extended_resource_toleration_reason(self) -> str | None:
        """Why the ExtendedResourceToleration behaviour is assumed (None: it is not)."""
        reason: str | None = self._ert_reason  # type: ignore[attr-defined]
        return reason

    @classmethod
    def empty(cls) -> ClusterFacts:
        return cls(source="none")

    def bound_to(self, node_name: str) -> ClusterFacts:
        """These facts with only ``node_name`` (none when the snapshot does not have it), memoised."""

        def compute() -> ClusterFacts:
            nodes = tuple(n for n in self.nodes if n.name == node_name)
            source = f"{self.source}, node {node_name}"
            return ClusterFacts(nodes=nodes, runtime_classes=self.runtime_classes, source=source, dra=self.dra,
                                quotas=self.quotas, queues=self.queues)

        return self.memoised(BoundNodeKey(node_name), compute)

    def resource_names(self) -> frozenset[str]:
        """Resources some node (or pool) is known to offer."""

        def compute() -> frozenset[str]:
            names: set[str] = set()
            for group in self.groups:
                names.update(n for n, q in group.representative.allocatable.items() if q > 0)
            return frozenset(names)

        return self.memoised(ResourceNamesKey(), compute, pinned=True)

    def memoised(self, key: Hashable, compute: Callable[[], T], owner: object = None, *, pinned: bool = False) -> T:
        """``compute()`` once per snapshot for ``key`` (derived data, never part of equality).

        ``owner``: the object the value was computed for when the key holds only its ``id()``
        (a config); a different object that reuses the id gets a fresh value.  The memo is
        bounded: past MEMO_LIMIT entries it starts over.  ``pinned`` values are derived from the
        snapshot as a whole (indexes, DRA capacity, a config's rule plan): a few per snapshot, costly
        on a large fleet, so they live apart and do not start over with the per-template entries
        (else every MEMO_LIMIT distinct templates one review would pay for them again).
        """
        memo: dict[Hashable, tuple[object, Any]] = self._pinned if pinned else self._memo  # type: ignore[attr-defined]
        found = memo.get(key)
        if found is None or found[0] is not owner:
            if len(memo) > (PINNED_LIMIT if pinned else MEMO_LIMIT):
                memo.clear()
            found = memo[key] = (owner, compute())
        value: T = found[1]
        return value

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]], source: str = "snapshot") -> ClusterFacts:
        """Build from Node, RuntimeClass, Karpenter NodePool and ``resource.k8s.io`` objects (DeviceClasses,
        ResourceSlices, ResourceClaims, ResourceClaimTemplates), ResourceQuotas and Kueue objects;
        ``List`` objects are flattened."""
        from policies.dra.facts import dra_facts_from_objects
        from policies.karpenter import is_nodepool, nodepool_from_object
        from policies.queue_facts import queue_facts_from_objects
        from policies.quota_facts import quota_facts_from_objects

        objects = list(flatten(objects))

        nodes: list[NodeFacts] = []
        pools: list[NodeFacts] = []
        classes: dict[str, RuntimeClassFacts] = {}
        for obj in objects:
            kind = obj.get("kind")
            if kind == "Node":
                node = node_from_object(obj)
                if node is not None:
                    nodes.append(node)
            elif kind == "RuntimeClass":
                rc = runtime_class_from_object(obj)
                if rc is not None:
                    classes[rc.name] = rc
            elif is_nodepool(obj):
                pool = nodepool_from_object(obj)
                if pool is not None:
                    pools.append(pool)
        dra = dra_facts_from_objects(objects)
        return cls(nodes=tuple(nodes), runtime_classes=classes, source=source, pools=tuple(pools), dra=dra,
                   quotas=quota_facts_from_objects(objects), queues=queue_facts_from_objects(objects))


def flatten(objects: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
    """The objects, with the items of ``List`` (and ``*List``) objects in place of the lists."""
    for obj in objects:
        if not isinstance(obj, Mapping):
            continue
        kind = str(obj.get("kind", ""))
        if kind.endswith("List"):
            items = obj.get("items")
            if isinstance(items, list):
                # The API server's typed lists (NodeList, ...) hold items without kind or apiVersion.
                item_kind = kind[: -len("List")]
                if item_kind:
                    items = [_with_kind(i, item_kind, obj.get("apiVersion")) for i in items]
                yield from flatten(items)
            continue
        yield obj


def _with_kind(item: Any, kind: str, api_version: Any) -> Any:
    if not isinstance(item, Mapping) or item.get("kind"):
        return item
    return {**item, "kind": kind, "apiVersion": item.get("apiVersion") or api_version}


def str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    # A hand-written snapshot may carry unquoted YAML booleans; the API server would hold "true".
    return {str(k): "" if v is None else str(v).lower() if isinstance(v, bool) else str(v) for k, v in value.items()}


def parse_taints(value: Any) -> tuple[Taint, ...]:
    return tuple(
        Taint(t["key"], str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in as_list(value)
        if isinstance(t, Mapping) and isinstance(t.get("key"), str)
    )


def node_from_object(obj: Mapping[str, Any]) -> NodeFacts | None:
    meta = as_mapping(obj.get("metadata"))
    name = meta.get("name")
    if not isinstance(name, str):
        return None
    spec = as_mapping(obj.get("spec"))
    status = as_mapping(obj.get("status"))
    taints = parse_taints(spec.get("taints"))
    allocatable: dict[str, Fraction] = {}
    source = status.get("allocatable") or status.get("capacity") or {}
    if isinstance(source, Mapping):
        for res, qty in source.items():
            parsed = try_parse(qty)
            if parsed is not None:
                allocatable[str(res)] = parsed
    labels = str_map(meta.get("labels"))
    pending, reason = pending_gpu_resources(labels, allocatable)
    return NodeFacts(
        name=name,
        labels=labels,
        taints=taints,
        allocatable=allocatable,
        unschedulable=bool(spec.get("unschedulable")),
        may_offer=pending,
        pending_reason=reason,
    )


def runtime_class_from_object(obj: Mapping[str, Any]) -> RuntimeClassFacts | None:
    meta = as_mapping(obj.get("metadata"))
    name = meta.get("name")
    if not isinstance(name, str):
        return None
    scheduling = as_mapping(obj.get("scheduling"))
    tolerations = tuple(t for t in as_list(scheduling.get("tolerations")) if isinstance(t, Mapping))
    return RuntimeClassFacts(
        name=name,
        handler=str(obj.get("handler") or ""),
        node_selector=str_map(scheduling.get("nodeSelector")),
        tolerations=tolerations,
    )

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

import dataclasses
import functools
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeVar

from policies.labeldomain import LabelDomain
from policies.managed import Detected, detect_platform, pending_gpu_resources
from policies.quantity import try_parse
from policies.reads import (
    ASPECTS,
    DRA_DEVICES,
    KSERVE,
    NODES,
    POOLS,
    QUEUES,
    QUOTAS,
    RUNTIME_CLASSES,
    note,
    note_all,
    recording,
)
from policies.resources import is_native
from policies.shapes import as_list, as_mapping

if TYPE_CHECKING:
    from policies.dra.facts import DraFacts
    from policies.kserve import KServeObjects
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

# Labels whose value changes while nothing about the node does: GPU Feature Discovery rewrites
# ``nvidia.com/gfd.timestamp`` on every GPU node each ``--sleep-interval`` (default 60s) unless
# ``--no-timestamp`` is set (NVIDIA/k8s-device-plugin@1b826acc6 docs/gpu-feature-discovery/README.md).
# A change of such a value alone does not make a node changed for live facts, and a pod selecting on
# the value is not judged against nodes (policies.engine): whether a label is there still counts.
CHURNING_LABELS = frozenset({"nvidia.com/gfd.timestamp"})

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
    # The scheme of spec.providerID ("aws" for aws:///us-east-1a/i-…): which cloud controller set
    # it (policies.managed tells platforms apart by it where no label does).
    provider: str = ""

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


_NODE_FIELDS = tuple(f.name for f in dataclasses.fields(NodeFacts))


def same_for_scheduling(a: NodeFacts, b: NodeFacts) -> bool:
    """Whether two versions of a node differ at most in the values of ``CHURNING_LABELS``."""
    if a == b:
        return True
    if a.labels.keys() != b.labels.keys():
        return False
    for f in _NODE_FIELDS:
        if f == "labels":
            if any(v != b.labels[k] for k, v in a.labels.items() if k not in CHURNING_LABELS):
                return False
        elif getattr(a, f) != getattr(b, f):
            return False
    return True


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


Tokens = Mapping[str, Hashable]


def group_nodes(nodes: Iterable[NodeFacts]) -> tuple[NodeGroup, ...]:
    """The groups of ``nodes`` (existing nodes, not pools), in the order of their first member."""
    nodes = tuple(nodes)
    buckets: dict[tuple[Any, ...], list[NodeFacts]] = {}
    per_node = _per_node_keys(nodes)
    for node in nodes:
        buckets.setdefault(_group_key(node, per_node), []).append(node)
    return tuple(NodeGroup(m[0], tuple(m), _varying_labels(m, per_node)) for m in buckets.values())


def _group_pools(pools: tuple[NodeFacts, ...], basis: tuple[NodeGroup, ...] = ()) -> tuple[NodeGroup, ...]:
    """A pool is its own group (two with the same name and traits are one), reused from ``basis``."""
    known = {id(g.representative): g for g in basis if g.size == 1}
    buckets: dict[tuple[Any, ...], list[NodeFacts]] = {}
    for pool in pools:
        buckets.setdefault(_group_key(pool, frozenset()), []).append(pool)
    out = []
    for members in buckets.values():
        reused = known.get(id(members[0])) if len(members) == 1 else None
        out.append(reused if reused is not None and reused.representative is members[0]
                   else NodeGroup(members[0], tuple(members), frozenset()))
    return tuple(out)


def _same_token(a: object, b: object) -> bool:
    """Tokens are identities (a changed aspect gets a new object), or tuples of tokens and names."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_token(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, str | int) and isinstance(b, str | int):
        return a == b
    return a is b


class ClusterFacts:
    """Nodes, RuntimeClasses, capacity that can appear (``pools``) and cluster behaviour; immutable.

    ``extended_resource_toleration``: whether the API server runs the ExtendedResourceToleration
    admission plugin; None means "as the nodes tell" (policies.managed detects the platform).

    **Snapshots that follow each other** (live facts): ``tokens`` holds one token per aspect of
    the facts (policies.reads), the same object while that aspect is unchanged; ``basis`` is the
    snapshot this one follows.  Memo entries of ``basis`` whose computation read only unchanged
    aspects are kept (entries holding derived facts are rebuilt, see :meth:`previous_value`);
    ``groups`` passes node groups already built (``NodeGrouper``), and a ``lender`` (default: the
    ``basis``) with the very same ``nodes`` lends its groups.  Without tokens every aspect is new and
    nothing is kept.
    """

    _nodes: tuple[NodeFacts, ...]
    _runtime_classes: Mapping[str, RuntimeClassFacts]
    source: str
    _pools: tuple[NodeFacts, ...]
    _extended_resource_toleration: bool | None
    _dra: DraFacts | None
    _quotas: QuotaFacts | None
    _queues: QueueFacts | None
    _kserve: KServeObjects | None
    _groups: tuple[NodeGroup, ...]
    _node_groups: int
    _ert_reason: str | None
    _platform: Detected | None
    _tokens: dict[str, Hashable]
    _previous: ClusterFacts | None
    _kept: dict[frozenset[str], bool]
    _memo: dict[Hashable, tuple[object, Any, frozenset[str]]]
    _pinned: dict[Hashable, tuple[object, Any, frozenset[str]]]

    def __init__(
        self,
        nodes: Iterable[NodeFacts] = (),
        runtime_classes: Mapping[str, RuntimeClassFacts] | None = None,
        source: str = "none",
        pools: Iterable[NodeFacts] = (),
        extended_resource_toleration: bool | None = None,
        dra: DraFacts | None = None,
        quotas: QuotaFacts | None = None,
        queues: QueueFacts | None = None,
        kserve: KServeObjects | None = None,
        *,
        groups: tuple[NodeGroup, ...] | None = None,
        tokens: Tokens | None = None,
        basis: ClusterFacts | None = None,
        lender: ClusterFacts | None = None,
    ) -> None:
        put = object.__setattr__
        nodes = nodes if isinstance(nodes, tuple) else tuple(nodes)
        pools = pools if isinstance(pools, tuple) else tuple(pools)
        put(self, "_nodes", nodes)
        put(self, "_runtime_classes", {} if runtime_classes is None else runtime_classes)
        put(self, "source", source)
        put(self, "_pools", pools)
        put(self, "_extended_resource_toleration", extended_resource_toleration)
        put(self, "_dra", dra)
        put(self, "_quotas", quotas)
        put(self, "_queues", queues)
        put(self, "_kserve", kserve)
        # What was worked out of the same nodes (groups, what they tell) is taken from ``lender``: the
        # snapshot just before, which need not be the ``basis`` whose memo is kept.
        lender = lender if lender is not None else basis
        same = lender if lender is not None and lender._nodes is nodes else None
        if groups is None:
            groups = same._groups[: same._node_groups] if same is not None else group_nodes(nodes)
        pool_groups = _group_pools(pools, lender._groups[lender._node_groups:] if lender is not None else ())
        put(self, "_groups", (*groups, *pool_groups))
        put(self, "_node_groups", len(groups))
        platform = same._platform if same is not None else detect_platform(nodes)
        if extended_resource_toleration is not None:
            reason = "configured (extendedResourceToleration: true)" if extended_resource_toleration else None
        else:
            reason = platform.ert_reason() if platform is not None else None
        put(self, "_ert_reason", reason)
        put(self, "_platform", platform)
        put(self, "_tokens", {a: (tokens[a] if tokens is not None and a in tokens else object()) for a in ASPECTS})
        put(self, "_memo", {})
        put(self, "_pinned", {})
        put(self, "_previous", basis)
        put(self, "_kept", {})  # read aspects -> whether unchanged since ``basis``
        if basis is not None:
            put(basis, "_previous", None)  # superseded: one step of history is enough

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ClusterFacts is immutable (cannot set {name!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ClusterFacts):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def _fields(self) -> tuple[Any, ...]:
        return (self._nodes, dict(self._runtime_classes), self.source, self._pools,
                self._extended_resource_toleration, self._dra, self._quotas, self._queues, self._kserve)

    def __repr__(self) -> str:
        return (f"ClusterFacts(source={self.source!r}, nodes={len(self._nodes)}, groups={len(self._groups)}, "
                f"runtime_classes={len(self._runtime_classes)}, pools={len(self._pools)})")

    # --- the facts (each read is recorded: policies.reads) ------------------------------------
    @property
    def nodes(self) -> tuple[NodeFacts, ...]:
        note(NODES)
        return self._nodes

    @property
    def groups(self) -> tuple[NodeGroup, ...]:
        note(NODES)
        note(POOLS)
        return self._groups

    @property
    def node_groups(self) -> tuple[NodeGroup, ...]:
        """The groups of ``nodes`` (``groups`` without the pools): for facts derived with the same nodes."""
        note(NODES)
        return self._groups[: self._node_groups]

    @property
    def pools(self) -> tuple[NodeFacts, ...]:
        note(POOLS)
        return self._pools

    @property
    def runtime_classes(self) -> Mapping[str, RuntimeClassFacts]:
        note(RUNTIME_CLASSES)
        return self._runtime_classes

    @property
    def dra(self) -> DraFacts | None:
        """DeviceClasses, ResourceSlices, ResourceClaims and templates (policies.dra.facts); None: not known."""
        note(DRA_DEVICES)  # what the DRA facts hold is recorded by their own accessors
        return self._dra

    @property
    def quotas(self) -> QuotaFacts | None:
        """Namespace ResourceQuotas (policies.quota_facts); None: not known (not in the snapshot)."""
        note(QUOTAS)
        return self._quotas

    @property
    def queues(self) -> QueueFacts | None:
        """Kueue queues (policies.queue_facts); None: not known (not in the snapshot, Kueue not served)."""
        note(QUEUES)
        return self._queues

    @property
    def kserve(self) -> KServeObjects | None:
        """KServe's ServingRuntimes and LLMInferenceServiceConfigs (policies.kserve); None: not known."""
        note(KSERVE)
        return self._kserve

    @property
    def extended_resource_toleration(self) -> bool | None:
        note(NODES)
        return self._extended_resource_toleration

    @property
    def is_empty(self) -> bool:
        note_all(_PRESENCE)
        return self._empty

    @property
    def _empty(self) -> bool:
        return not self._nodes and not self._runtime_classes and not self._pools

    @property
    def tolerates_extended_resources(self) -> bool:
        """Whether every pod gets a NoSchedule toleration for each extended resource it requests."""
        note(NODES)
        return self._ert_reason is not None

    @property
    def extended_resource_toleration_reason(self) -> str | None:
        """Why the ExtendedResourceToleration behaviour is assumed (None: it is not)."""
        note(NODES)
        return self._ert_reason

    @property
    def platform_note(self) -> str | None:
        """What the nodes tell of a platform that is not taken to run ExtendedResourceToleration
        (OpenShift does not; DigitalOcean's is not known), unless the config decided it."""
        note(NODES)
        if self._extended_resource_toleration is not None or self._platform is None:
            return None
        return self._platform.note()

    @property
    def used(self) -> bool:
        """Whether anything was memoised on these facts (a snapshot nobody read has no memo to pass on)."""
        return bool(self._memo or self._pinned)

    @property
    def basis(self) -> ClusterFacts | None:
        """The snapshot these facts follow, until a newer one follows them."""
        return self._previous

    def token(self, aspect: str) -> Hashable:
        """The token of ``aspect`` (policies.reads): the same object while the aspect is unchanged."""
        return self._tokens[aspect]

    def derived_tokens(self, tag: Hashable, changed: Mapping[str, tuple[str, ...]]) -> dict[str, Hashable]:
        """Tokens of facts derived from these: aspect ``a`` in ``changed`` is computed from this snapshot's
        aspects ``changed[a]`` in a way ``tag`` names (hold what the derivation reads, e.g. the config);
        the other aspects are these facts' own."""
        tokens = dict(self._tokens)
        for aspect, inputs in changed.items():
            tokens[aspect] = (tag, *(self._tokens[i] for i in inputs))
        return tokens

    @classmethod
    def empty(cls) -> ClusterFacts:
        return cls(source="none")

    def bound_to(self, node_name: str) -> ClusterFacts:
        """These facts with only ``node_name`` (none when the snapshot does not have it), memoised."""
        key = BoundNodeKey(node_name)

        def compute() -> ClusterFacts:
            nodes = tuple(n for n in self.nodes if n.name == node_name)
            source = f"{self.source}, node {node_name}"
            tokens = self.derived_tokens(("bound", node_name), {NODES: (NODES,), POOLS: ()})
            return ClusterFacts(nodes=nodes, runtime_classes=self.runtime_classes, source=source, dra=self._dra,
                                quotas=self._quotas, queues=self._queues, kserve=self._kserve, tokens=tokens,
                                basis=self.previous_value(key))

        return self.memoised(key, compute)

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
        (else every MEMO_LIMIT distinct templates one review would pay for them again).  What the
        computation read of the facts is kept with the value (policies.reads), so that a following
        snapshot keeps it while those parts are unchanged.
        """
        memo = self._pinned if pinned else self._memo
        found = memo.get(key)
        if found is not None and found[0] is owner:
            note_all(found[2])
        else:
            if len(memo) > (PINNED_LIMIT if pinned else MEMO_LIMIT):
                memo.clear()
            found = self._inherited(key, owner, pinned)
            if found is None:
                with recording() as reads:
                    value = compute()
                found = (owner, value, frozenset(reads))
            else:
                note_all(found[2])
            memo[key] = found
        result: T = found[1]
        return result

    def _inherited(self, key: Hashable, owner: object, pinned: bool) -> tuple[object, Any, frozenset[str]] | None:
        """The entry the snapshot these facts follow has for ``key``, if nothing it read has changed
        since (taken when first asked for: most entries of a large memo are never asked again)."""
        previous = self._previous
        if previous is None:
            return None
        entry = (previous._pinned if pinned else previous._memo).get(key)
        if entry is None or entry[0] is not owner or isinstance(entry[1], ClusterFacts):
            return None  # derived facts hold the old snapshot's parts: rebuilt on demand, as their own basis
        kept = self._kept.get(entry[2])
        if kept is None:
            kept = self._kept[entry[2]] = (
                previous._empty == self._empty and previous.source == self.source  # rules judge differently
                and all(_same_token(previous._tokens[a], self._tokens[a]) for a in entry[2])
            )
        return entry if kept else None

    def previous_value(self, key: Hashable, owner: object = None, *, pinned: bool = False) -> Any:
        """What the snapshot these facts follow computed for ``key`` (None if nothing, or for another
        owner): derived facts are rebuilt for each snapshot, as their own ``basis``."""
        previous = self._previous
        if previous is None:
            return None
        found = (previous._pinned if pinned else previous._memo).get(key)
        return found[1] if found is not None and found[0] is owner else None

    def same_as_previous(self, *aspects: str) -> bool:
        """Whether ``aspects`` are unchanged since the snapshot these facts follow."""
        previous = self._previous
        return previous is not None and all(_same_token(previous._tokens[a], self._tokens[a]) for a in aspects)


_PRESENCE = frozenset({NODES, POOLS, RUNTIME_CLASSES})


class NodeGrouper:
    """Node groups kept up to date one node at a time (live facts), as :func:`group_nodes` builds them.

    ``put``/``remove`` change one node; :meth:`build` returns the nodes in name order and their groups,
    rebuilding only the groups whose members changed (the others are the very same objects).  Which
    label keys are per-node (``_per_node_keys``) is kept by counting values; when that set changes,
    every node is regrouped.
    """

    def __init__(self) -> None:
        self._nodes: dict[str, NodeFacts] = {}
        self._values: dict[str, dict[str, int]] = {}  # label key -> value -> nodes carrying it
        self._carriers: dict[str, int] = {}
        self._per_node: frozenset[str] = frozenset()
        self._bucket_of: dict[str, tuple[Any, ...]] = {}
        self._buckets: dict[tuple[Any, ...], dict[str, NodeFacts]] = {}
        self._groups: dict[tuple[Any, ...], NodeGroup] = {}
        self._dirty: set[tuple[Any, ...]] = set()
        self._order: tuple[str, ...] | None = ()
        self._built: tuple[tuple[NodeFacts, ...], tuple[NodeGroup, ...]] | None = ((), ())
        self.regroups = 0  # full regroupings (the per-node label keys changed)

    def __len__(self) -> int:
        return len(self._nodes)

    def get(self, name: str) -> NodeFacts | None:
        return self._nodes.get(name)

    def put(self, node: NodeFacts) -> None:
        old = self._nodes.get(node.name)
        if old is node:
            return
        if old is None:
            self._order = None
        else:
            self._count(old, -1)
            self._leave(old.name)
        self._nodes[node.name] = node
        self._count(node, 1)
        self._join(node)
        self._built = None

    def remove(self, name: str) -> None:
        old = self._nodes.pop(name, None)
        if old is None:
            return
        self._count(old, -1)
        self._leave(name)
        self._order = None
        self._built = None

    def _count(self, node: NodeFacts, step: int) -> None:
        if node.pool is not None:
            return
        for key, value in node.labels.items():
            values = self._values.setdefault(key, {})
            left = values.get(value, 0) + step
            if left:
                values[value] = left
            else:
                del values[value]
            carriers = self._carriers.get(key, 0) + step
            if carriers:
                self._carriers[key] = carriers
            else:
                del self._carriers[key]
                del self._values[key]

    def _join(self, node: NodeFacts) -> None:
        key = _group_key(node, self._per_node)
        self._bucket_of[node.name] = key
        self._buckets.setdefault(key, {})[node.name] = node
        self._dirty.add(key)

    def _leave(self, name: str) -> None:
        key = self._bucket_of.pop(name)
        members = self._buckets[key]
        del members[name]
        if not members:
            del self._buckets[key]
            self._groups.pop(key, None)
        self._dirty.add(key)

    def _current_per_node(self) -> frozenset[str]:
        return frozenset(
            k for k, seen in self._values.items()
            if len(seen) >= PER_NODE_MIN_VALUES and 2 * len(seen) > self._carriers[k]
        )

    def build(self) -> tuple[tuple[NodeFacts, ...], tuple[NodeGroup, ...]]:
        """The nodes (in name order) and their groups (in the order of each group's first member)."""
        if self._built is not None:
            return self._built
        per_node = self._current_per_node()
        if per_node != self._per_node:
            self._per_node = per_node
            self.regroups += 1
            self._bucket_of.clear()
            self._buckets.clear()
            self._groups.clear()
            self._dirty.clear()
            for node in self._nodes.values():
                self._join(node)
        if self._order is None:
            self._order = tuple(sorted(self._nodes))
        nodes = tuple(self._nodes[name] for name in self._order)
        for key in self._dirty:
            members = self._buckets.get(key)
            if members:
                ordered = tuple(members[name] for name in sorted(members))
                self._groups[key] = NodeGroup(ordered[0], ordered, _varying_labels(ordered, per_node))
        self._dirty.clear()
        groups = tuple(sorted(self._groups.values(), key=lambda g: g.representative.name))
        self._built = (nodes, groups)
        return self._built


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
    provider_id = spec.get("providerID")
    scheme, sep, _ = provider_id.partition("://") if isinstance(provider_id, str) else ("", "", "")
    return NodeFacts(
        name=name,
        labels=labels,
        taints=taints,
        allocatable=allocatable,
        unschedulable=bool(spec.get("unschedulable")),
        may_offer=pending,
        pending_reason=reason,
        provider=scheme if sep else "",
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

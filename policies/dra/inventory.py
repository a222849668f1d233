"""What the cluster's DRA drivers offer: pools, the devices a node can reach, and what is in use.

Pools follow the scheduler's ``GatherPools`` (k8s.io/dynamic-resource-allocation
structured/internal/stable/pools_stable.go @ 3d036712): slices are grouped by driver and pool
name, only the newest generation counts, a pool whose newest generation has fewer slices than
``resourceSliceCount`` is incomplete and none of its devices are allocated, and duplicate
device names make a pool invalid.  A slice reaches a node through ``nodeName``, ``allNodes``,
its ``nodeSelector`` or, with ``perDeviceNodeSelection``, each device's own fields
(``NodeMatches``).

In-use devices are the results of allocated claims, except admin-access results, which are not
considered allocated (the scheduler plugin's ``foreachAllocatedDevice``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from policies.dra.objects import Device, DeviceClass, DeviceID, ResourceClaim, ResourceSlice, attribute_kind
from policies.facts import NodeFacts
from policies.reads import DRA_CLAIMS, DRA_DEVICES, note
from policies.scheduling import term_matches
from policies.shapes import as_dict, as_list

IMPLICIT_EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"  # resourceapi.ResourceDeviceClassPrefix


@dataclass(frozen=True, slots=True)
class PoolID:
    driver: str
    name: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.name}"


@dataclass(frozen=True, slots=True)
class Pool:
    """The newest generation of one pool."""

    id: PoolID
    generation: int
    slices: tuple[ResourceSlice, ...]
    expected_slices: int
    invalid_reason: str | None = None

    @property
    def complete(self) -> bool:
        return len(self.slices) == self.expected_slices

    @property
    def usable(self) -> bool:
        return self.complete and self.invalid_reason is None


def gather_pools(slices: Iterable[ResourceSlice]) -> dict[PoolID, Pool]:
    grouped: dict[PoolID, list[ResourceSlice]] = {}
    for item in slices:
        pool_id = PoolID(item.driver, item.pool.name)
        current = grouped.get(pool_id)
        if current is None or item.pool.generation > current[0].pool.generation:
            grouped[pool_id] = [item]
        elif item.pool.generation == current[0].pool.generation:
            current.append(item)
    pools: dict[PoolID, Pool] = {}
    for pool_id in sorted(grouped, key=lambda p: (p.driver, p.name)):
        members = grouped[pool_id]
        seen: set[str] = set()
        invalid = None
        for member in members:
            for device in member.devices:
                if device.name in seen:
                    invalid = f"duplicate device name {device.name}"
                seen.add(device.name)
        first = members[0].pool
        pools[pool_id] = Pool(pool_id, first.generation, tuple(members), first.resource_slice_count, invalid)
    return pools


def selector_matches(selector: Mapping[str, Any] | None, node: NodeFacts) -> bool:
    """A ``v1.NodeSelector``: its terms are ORed."""
    terms = as_list(as_dict(selector).get("nodeSelectorTerms"))
    return any(term_matches(as_dict(t), node) for t in terms)


def _access(
    node_name: str | None, all_nodes: bool, selector: Mapping[str, Any] | None, node: NodeFacts | None
) -> bool:
    """``NodeMatches``; with no node only devices every node reaches (``allNodes``) count."""
    if node_name:
        return node is not None and node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return node is not None and selector_matches(selector, node)
    return False


@dataclass(frozen=True, slots=True)
class Candidate:
    """A device the node can reach, in the order the allocator visits it."""

    id: DeviceID
    device: Device
    pool: Pool
    slice: ResourceSlice


@dataclass(frozen=True, slots=True)
class Reach:
    """Everything one node can reach."""

    candidates: tuple[Candidate, ...]
    pools: tuple[Pool, ...]  # pools with a slice for the node, usable or not

    @property
    def unusable_pools(self) -> tuple[Pool, ...]:
        return tuple(p for p in self.pools if not p.usable)


def _timestamp(text: str | None) -> datetime:
    if not text:
        return datetime.min
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)
    except ValueError:
        return datetime.min


def _in_use(claims: Iterable[ResourceClaim]) -> tuple[frozenset[DeviceID], frozenset[DeviceID]]:
    allocated: set[DeviceID] = set()
    shared: set[DeviceID] = set()
    for claim in claims:
        for result in claim.allocation or ():
            if result.admin_access:
                continue
            (shared if result.share_id is not None else allocated).add(result.id)
    return frozenset(allocated), frozenset(shared)


@dataclass(frozen=True)
class Inventory:
    """DeviceClasses, complete pools and allocations: the facts the DRA checks share.

    Build it with :meth:`build` from parsed objects.  It is immutable; per-node reach is
    memoised.
    """

    # Read through the properties below, which record what a computation read (policies.reads):
    # classes and pools are the devices, allocated and shared what claims hold.
    _classes: Mapping[str, DeviceClass]
    _pools: Mapping[PoolID, Pool]
    _allocated: frozenset[DeviceID]  # exclusively allocated (admin access excluded)
    _shared: frozenset[DeviceID]  # consumable-capacity shares (results with a shareID)
    _reach: dict[object, Reach] = field(default_factory=dict, repr=False, compare=False)

    @property
    def classes(self) -> Mapping[str, DeviceClass]:
        note(DRA_DEVICES)
        return self._classes

    @property
    def pools(self) -> Mapping[PoolID, Pool]:
        note(DRA_DEVICES)
        return self._pools

    @property
    def allocated(self) -> frozenset[DeviceID]:
        note(DRA_CLAIMS)
        return self._allocated

    @property
    def shared(self) -> frozenset[DeviceID]:
        note(DRA_CLAIMS)
        return self._shared

    @classmethod
    def build(
        cls,
        classes: Iterable[DeviceClass],
        slices: Iterable[ResourceSlice],
        claims: Iterable[ResourceClaim] = (),
    ) -> Inventory:
        allocated, shared = _in_use(claims)
        return cls({c.name: c for c in classes}, gather_pools(slices), allocated, shared)

    def with_claims(self, claims: Iterable[ResourceClaim]) -> Inventory:
        """The same devices (and the reach already worked out) with the allocations of ``claims``."""
        allocated, shared = _in_use(claims)
        return Inventory(self._classes, self._pools, allocated, shared, self._reach)

    def with_classes(self, classes: Mapping[str, DeviceClass]) -> Inventory:
        """The same devices and allocations with other DeviceClasses (reach does not depend on them)."""
        return Inventory(classes, self._pools, self._allocated, self._shared, self._reach)

    def reach(self, node: NodeFacts | None) -> Reach:
        """Devices ``node`` can reach; ``None`` means only network-attached (``allNodes``) ones."""
        note(DRA_DEVICES)
        key = None if node is None else (node.name, tuple(sorted(node.labels.items())))
        cached = self._reach.get(key)
        if cached is not None:
            return cached
        candidates: list[Candidate] = []
        pools: list[Pool] = []
        for pool in self._pools_near(node):
            touched = False
            for item in pool.slices:
                if item.per_device_node_selection:
                    reachable = [d for d in item.devices if _access(d.node_name, d.all_nodes, d.node_selector, node)]
                elif _access(item.node_name, item.all_nodes, item.node_selector, node):
                    reachable = list(item.devices)
                else:
                    continue
                touched = touched or bool(reachable) or not item.per_device_node_selection
                candidates.extend(
                    Candidate(DeviceID(pool.id.driver, pool.id.name, d.name), d, pool, item) for d in reachable
                )
            if touched:
                pools.append(pool)
        result = Reach(tuple(c for c in candidates if c.pool.usable), tuple(pools))
        if len(self._reach) < 4096:
            self._reach[key] = result
        return result

    @functools.cached_property
    def _pools_by_node(self) -> tuple[tuple[Pool, ...], dict[str, list[int]], list[int]]:
        """The pools in order, the positions of node-local pools by their node, and the others'."""
        ordered = tuple(self._pools.values())
        by_node: dict[str, list[int]] = {}
        elsewhere: list[int] = []
        for i, pool in enumerate(ordered):
            names = {s.node_name for s in pool.slices}
            if all(s.node_name and not s.per_device_node_selection for s in pool.slices):
                for name in names:
                    by_node.setdefault(str(name), []).append(i)
            else:
                elsewhere.append(i)
        return ordered, by_node, elsewhere

    def _pools_near(self, node: NodeFacts | None) -> list[Pool]:
        """The pools that may have a slice for ``node``, in pool order (a node-local pool only for its node)."""
        ordered, by_node, elsewhere = self._pools_by_node
        local = by_node.get(node.name, []) if node is not None else []
        return [ordered[i] for i in sorted({*elsewhere, *local})]

    def devices(self, driver: str | None = None) -> Iterator[tuple[Pool, ResourceSlice, Device]]:
        note(DRA_DEVICES)
        for pool in self._pools.values():
            if driver is not None and pool.id.driver != driver:
                continue
            for item in pool.slices:
                for device in item.devices:
                    yield pool, item, device

    def published_attributes(self, driver: str) -> dict[str, set[str]]:
        """Qualified attribute names the driver's devices publish, with their value kinds.

        Unqualified names are reported in the driver's domain (``gpu.nvidia.com/productName``),
        as CEL sees them.
        """
        out: dict[str, set[str]] = {}
        shapes: set[tuple[tuple[str, tuple[str, ...]], ...]] = set()
        for _, _, device in self.devices(driver):  # devices of one model share a shape: judge each once
            shape = tuple(
                (name, tuple(k for k, v in raw.items() if v is not None)) for name, raw in device.attributes.items()
            )
            if shape in shapes:
                continue
            shapes.add(shape)
            for name, raw in device.attributes.items():
                qualified = name if "/" in name else f"{driver}/{name}"
                kind = attribute_kind(raw)
                out.setdefault(qualified, set()).update([kind] if kind else [])
        return out

    def published_capacities(self, driver: str) -> set[str]:
        out: set[str] = set()
        for _, _, device in self.devices(driver):
            out.update(n if "/" in n else f"{driver}/{n}" for n in device.capacity)
        return out

    def class_for_extended_resource(self, resource: str) -> DeviceClass | None:
        """The DeviceClass serving an extended resource name (DRAExtendedResource).

        ``deviceclass.resource.kubernetes.io/<class>`` always maps to that class; for an
        explicit ``extendedResourceName`` shared by several classes the newest wins and equal
        timestamps prefer the lower name (k8s.io/dynamic-resource-allocation
        deviceclass/extendedresourcecache/extendedresourcecache.go).
        """
        if resource.startswith(IMPLICIT_EXTENDED_PREFIX):
            return self.classes.get(resource[len(IMPLICIT_EXTENDED_PREFIX) :])
        matching = [c for c in self.classes.values() if c.extended_resource_name == resource]
        if not matching:
            return None
        newest = max(_timestamp(c.creation_timestamp) for c in matching)
        return min((c for c in matching if _timestamp(c.creation_timestamp) == newest), key=lambda c: c.name)

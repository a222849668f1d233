"""Can a gang be placed at once? An upper bound on how many of its pods the cluster can hold together.

Pods are placed whole, one node each, so the room a node has for pods of one shape is
``min over requested resources r of allocatable_r // request_r`` — every resource the pod asks for
(cpu in milli-CPU, memory, ephemeral-storage, hugepages, GPUs and other extended resources, and one
of the node's ``pods`` slots), not a sum of GPUs.  For the gang's pod sets ``S`` (a pod set, several
of them, all of them) the pods ``S`` needs must fit on the nodes and pools where its pods can run
(the scheduler model's verdicts: resources offered, selectors, taints, cordons).  Mixed shapes are
bounded by the smallest request of each resource among them, which can only over-estimate the
room: every condition is necessary, so a failing one proves the gang can never run as a whole.

Capacity that can appear counts up to its limits: a Karpenter NodePool's ``spec.limits`` minus what
its existing nodes (label ``karpenter.sh/nodepool``) already hold, ``limits.nodes`` and static
``replicas`` as node counts, a declared pool's ``maxNodes``; a NodePool without limits is unbounded
(Karpenter's definition), a declared pool without ``maxNodes`` of unknown size.  Where only capacity
of unknown size (or a pool of unknown GPU shape) could make room, the verdict is ``warning``.

Cost: node groups are identical in what the rules read, but their native allocatable (cpu, memory,
ephemeral-storage, pods) may differ by a few KiB per node; the room per group is computed from the
members' smallest and largest allocatable, and only where those two disagree node by node, and it is
remembered per (group, pod shape) for the snapshot.  Without usage data (static facts) the room is
that of empty nodes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from policies.facts import ClusterFacts, NodeFacts, NodeGroup
from policies.gangs import Gang, PodSet
from policies.karpenter import NODEPOOL_LABEL
from policies.memo import TemplateAnalysis
from policies.podresources import pod_requests
from policies.quantity import format_quantity, scheduler_units, try_parse
from policies.scheduling import GroupVerdict
from policies.shapes import as_dict
from policies.wording import plural

UNBOUNDED = 1 << 40
MAX_SUBSET_SETS = 6  # every combination of up to this many pod sets is checked; beyond, singletons and all
GROUP_MEMO_LIMIT = 65536
NATIVE = ("cpu", "memory", "ephemeral-storage", "pods")
POD_LEVEL = ("cpu", "memory")

Shape = tuple[tuple[str, int], ...]  # sorted (resource, units) with units > 0


def _everything(name: str) -> bool:
    return True


def pod_quantities(pod: Any) -> dict[str, Fraction]:
    """What one pod of the template requests: effective requests as the scheduler sums them
    (policies.podresources), pod-level ``spec.resources`` replacing the containers' cpu and memory,
    plus ``spec.overhead``."""
    requests = pod_requests(pod, _everything, overhead=False)
    spec = as_dict(pod.spec)
    for res, raw in as_dict(as_dict(spec.get("resources")).get("requests")).items():
        q = try_parse(raw)
        if res in POD_LEVEL and q is not None:
            requests[res] = q
    for res, raw in as_dict(spec.get("overhead")).items():
        q = try_parse(raw)
        if isinstance(res, str) and q is not None and q > 0:
            requests[res] = requests.get(res, Fraction(0)) + q
    return {r: q for r, q in requests.items() if isinstance(r, str) and q > 0}


def pod_shape(pod: Any) -> Shape:
    """What one pod of the template requests, in scheduler units, with its ``pods`` slot."""
    units = {r: scheduler_units(r, q) for r, q in pod_quantities(pod).items()}
    units["pods"] = 1
    return tuple(sorted((r, u) for r, u in units.items() if u > 0))


def per_node(allocatable: Mapping[str, int], shape: Shape) -> int:
    """Pods of ``shape`` one node with ``allocatable`` holds (resources it does not list are not
    known, so they do not bound it)."""
    room = UNBOUNDED
    for resource, want in shape:
        have = allocatable.get(resource)
        if have is not None:
            room = min(room, max(have, 0) // want)
    return room


def limiting(allocatable: Mapping[str, int], shape: Shape) -> str:
    """The resource that bounds ``per_node`` (the GPU first among equals)."""
    best: tuple[int, int, str] | None = None
    for resource, want in shape:
        have = allocatable.get(resource)
        if have is None:
            continue
        room = max(have, 0) // want
        rank = (room, 0 if "/" in resource else 1, resource)
        if best is None or rank < best:
            best = rank
    return best[2] if best is not None else ""


def units_of(node: NodeFacts) -> dict[str, int]:
    return {r: scheduler_units(r, q) for r, q in node.allocatable.items()}


@dataclass
class _GroupRoom:
    """Per node group: its members' allocatable in units, and the smallest and largest of each."""

    members: list[dict[str, int]]
    low: dict[str, int]
    high: dict[str, int]
    ragged: bool = False  # members list different resources: judged one by one
    memo: dict[Shape, int] = field(default_factory=dict)

    @classmethod
    def of(cls, group: NodeGroup) -> _GroupRoom:
        members = [units_of(m) for m in group.members]
        keys = set(members[0])
        for m in members[1:]:
            keys &= set(m)
        ragged = any(set(m) != keys for m in members)
        low = {k: min(m[k] for m in members) for k in keys}
        high = {k: max(m[k] for m in members) for k in keys}
        return cls(members, low, high, ragged)

    def pods(self, shape: Shape) -> int:
        found = self.memo.get(shape)
        if found is None:
            low, high = per_node(self.low, shape), per_node(self.high, shape)
            if low == high and not self.ragged:
                found = min(low * len(self.members), UNBOUNDED)
            else:
                found = min(sum(per_node(m, shape) for m in self.members), UNBOUNDED)
            if len(self.memo) < GROUP_MEMO_LIMIT:
                self.memo[shape] = found
        return found


class _Snapshot:
    """What the packing reads of one facts snapshot, derived once (pinned on the facts)."""

    def __init__(self, facts: ClusterFacts) -> None:
        self.facts = facts
        self.rooms: dict[int, _GroupRoom] = {}
        self.pool_nodes: dict[str, tuple[int, dict[str, int]]] = {}
        for node in facts.nodes:
            pool = node.labels.get(NODEPOOL_LABEL)
            if pool is None:
                continue
            count, used = self.pool_nodes.get(pool, (0, {}))
            for r, u in units_of(node).items():
                used[r] = used.get(r, 0) + u
            self.pool_nodes[pool] = (count + 1, used)

    def room(self, group: NodeGroup) -> _GroupRoom:
        found = self.rooms.get(id(group))
        if found is None:
            found = self.rooms[id(group)] = _GroupRoom.of(group)
        return found


@dataclass(frozen=True, slots=True)
class _SnapshotKey:
    """The packing's per-snapshot data (reads only the snapshot)."""


def _snapshot(facts: ClusterFacts) -> _Snapshot:
    return facts.memoised(_SnapshotKey(), lambda: _Snapshot(facts), pinned=True)


@dataclass(frozen=True, slots=True)
class Room:
    """Where some of the gang's pods can go: a node group (or some of its nodes) or a pool."""

    verdict: GroupVerdict
    pods: int
    known: bool  # False: the count holds only if capacity of unknown size or shape turns out large
    per_node: int  # pods per node (UNBOUNDED when no requested resource bounds it)
    bound_by: str  # the resource that bounds per_node, or the pool limit that bounds pods
    note: str = ""  # why a pool's count is what it is

    @property
    def is_pool(self) -> bool:
        return self.verdict.group.representative.pool is not None

    def describe(self) -> str:
        v = self.verdict
        where = v.describe()
        if self.is_pool:
            more = "any number" if self.pods >= UNBOUNDED else f"at most {self.pods}"
            return f"{where}: {more} of them{f' ({self.note})' if self.note else ''}"
        each = "" if self.per_node >= UNBOUNDED else f"{self.per_node} per node"
        by = f" by {self.bound_by}" if self.bound_by and each else ""
        return f"{len(v.nodes)} × {where}: {each}{by}".rstrip(": ")


def _pool_room(snap: _Snapshot, verdict: GroupVerdict, shape: Shape) -> tuple[int, bool, str]:
    node = verdict.group.representative
    traits = node.pool
    assert traits is not None
    alloc = units_of(node)
    requested = {r for r, _ in shape}
    shape_known = not (verdict.hedged or (requested & node.may_offer))
    k = per_node(alloc, shape)
    existing_count, used = snap.pool_nodes.get(node.name, (0, {})) if traits.origin == "Karpenter NodePool" else (0, {})
    bounds: list[tuple[int, str]] = []
    for resource, limit in traits.limits:
        if resource == "nodes":
            left = max(int(limit) - existing_count, 0)
            bounds.append((min(left * k, UNBOUNDED), f"limits.nodes {format_quantity(limit)}"))
            continue
        want = dict(shape).get(resource)
        if want is None:
            continue
        remaining = max(scheduler_units(resource, limit) - used.get(resource, 0), 0)
        shown = f"limits {resource}: {format_quantity(limit)}"
        if used.get(resource):
            shown += f", {_show(resource, used[resource])} on its {plural(existing_count, 'node')}"
        bounds.append((remaining // want, shown))
    if traits.max_nodes is not None:
        left = max(traits.max_nodes - existing_count, 0)
        label = "replicas" if traits.origin == "Karpenter NodePool" else "maxNodes"
        bounds.append((min(left * k, UNBOUNDED), f"{label} {traits.max_nodes}"))
    if bounds:
        pods, why = min(bounds)
        return pods, shape_known, why
    if not traits.size_known:
        return UNBOUNDED, False, "its maximum size is unknown: declare maxNodes"
    return UNBOUNDED, shape_known, "no limits"


def _show(resource: str, units: int) -> str:
    if resource == "cpu":
        return format_quantity(Fraction(units, 1000))
    return str(units)


def rooms_for(snap: _Snapshot, verdicts: Sequence[GroupVerdict], shape: Shape) -> list[Room]:
    out = []
    for v in verdicts:
        rep = v.group.representative
        if rep.pool is not None:
            pods, known, note = _pool_room(snap, v, shape)
            out.append(Room(v, pods, known, per_node(units_of(rep), shape), note or "", note))
            continue
        if len(v.nodes) == v.group.size:
            pods = snap.room(v.group).pods(shape)
        else:
            pods = min(sum(per_node(units_of(n), shape) for n in v.nodes), UNBOUNDED)
        alloc = units_of(rep)
        out.append(Room(v, pods, not v.hedged, per_node(alloc, shape), limiting(alloc, shape)))
    return out


@dataclass(frozen=True, slots=True)
class SetRooms:
    pod_set: PodSet
    shape: Shape
    eligible: tuple[GroupVerdict, ...]


@dataclass(frozen=True, slots=True)
class Shortfall:
    """A set of pod sets whose pods cannot all run at once."""

    sets: tuple[SetRooms, ...]
    need: int
    room: int  # the most of them the cluster holds at once (counting only capacity of known size)
    rooms: tuple[Room, ...]
    certain: bool  # False: capacity of unknown size or shape could still make room
    whole: bool  # the condition is about the whole gang

    @property
    def missing(self) -> int:
        return self.need - self.room


def _eligible(verdicts: Sequence[GroupVerdict], scheduling_known: bool) -> tuple[GroupVerdict, ...]:
    if scheduling_known:
        return tuple(v for v in verdicts if v.passes)
    # Operator-built pods (TrainJob): selectors and tolerations are not known, so only what the
    # pod asks for rules nodes out (which can only over-estimate the room).
    return tuple(v for v in verdicts if v.offers and v.fits and v.schedulable)


def _min_shape(shapes: Sequence[Shape]) -> Shape:
    if len(shapes) == 1:
        return shapes[0]
    maps = [dict(s) for s in shapes]
    common = set(maps[0])
    for m in maps[1:]:
        common &= set(m)
    return tuple(sorted((r, min(m[r] for m in maps)) for r in common))


def _subsets(n: int) -> list[tuple[int, ...]]:
    if n <= MAX_SUBSET_SETS:
        return [c for k in range(1, n + 1) for c in itertools.combinations(range(n), k)]
    return [(i,) for i in range(n)] + [tuple(range(n))]


def _key(v: GroupVerdict) -> tuple[int, int, int]:
    return (id(v.group), len(v.nodes), id(v.nodes[0]) if v.nodes else 0)


def check_gang(gang: Gang, facts: ClusterFacts, is_gpu: Callable[[str], bool]) -> Shortfall | None:
    """The most telling condition the gang fails (an error when certain, else a warning), or None.

    None also when some pod set fits no node at all: the pod rules report that, one pod at a time.
    """
    snap = _snapshot(facts)
    sets: list[SetRooms] = []
    for ps in gang.pod_sets:
        verdicts = TemplateAnalysis(ps.pod, facts, is_gpu).verdicts()
        eligible = _eligible(verdicts, ps.pod.scheduling_known)
        if not eligible and ps.count:
            return None
        sets.append(SetRooms(ps, pod_shape(ps.pod), eligible))
    found: list[Shortfall] = []
    everything = tuple(range(len(sets)))
    for subset in _subsets(len(sets)):
        chosen = [sets[i] for i in subset]
        whole = subset == everything
        need = gang.need if whole else sum(s.pod_set.need for s in chosen)
        if need <= 0:
            continue
        by_place: dict[tuple[int, int, int], tuple[GroupVerdict, list[Shape]]] = {}
        for s in chosen:
            for v in s.eligible:
                by_place.setdefault(_key(v), (v, []))[1].append(s.shape)
        rooms = rooms_for(snap, [v for v, _ in by_place.values()], _min_shape([s.shape for s in chosen])) if (
            len({s.shape for s in chosen}) == 1) else [
            r for v, shapes in by_place.values() for r in rooms_for(snap, [v], _min_shape(shapes))]
        known = sum(r.pods for r in rooms if r.known)
        if known >= need:
            continue
        certain = all(r.known for r in rooms)
        found.append(Shortfall(tuple(chosen), need, min(known, UNBOUNDED), tuple(rooms), certain, whole))
    if not found:
        return None
    return max(found, key=lambda f: (f.certain, f.missing, len(f.sets)))

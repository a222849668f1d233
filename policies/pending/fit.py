"""Where a pending GPU pod could go right now: free GPUs per node, fragmentation, stranded GPUs.

For each GPU node that offers every GPU resource the pod asks for, the node is judged the way the
scheduler's filters would (pending-gpus.md §2, §3):

* **blockers** — cordon (NodeUnschedulable), nodeSelector / required node affinity (with the
  RuntimeClass merge), untolerated NoSchedule/NoExecute taints: ``UnschedulableAndUnresolvable``,
  which preemption cannot fix [K-pre ``findCandidates``];
* **short** — cpu, memory, ephemeral-storage or pod slots below the pod's requests
  (NodeResourcesFit, plain ``Unschedulable``) [K-fit];
* **GPU room** — ``allocatable − allocated − reserved ≥ request`` for every GPU resource, where
  reserved counts pods nominated to the node with priority ≥ the pod's (see allocation.py).

Verdicts: ``fits`` (some node has room now), ``fragmented`` (Σ free over the nodes that fit the pod
otherwise reaches the request, but no single node has it), ``insufficient`` (Σ free is short),
``no-eligible-node`` (every GPU node is blocked or short of other resources), ``no-gpu-node`` (no
node offers the resource), ``dra-served`` (Dynamic Resource Allocation serves a requested resource
through a DeviceClass's ``extendedResourceName``: its free devices are not device-plugin counts, so
the pod is not judged by them; policies/pending/dra.py).  The fit test is per node, so a pod needing
N GPUs needs one node with N free [K-fit].
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from policies.facts import NodeFacts
from policies.pending.allocation import NodeAllocation
from policies.pending.objects import CORE_RESOURCES, PodInfo
from policies.pending.state import ClusterState
from policies.quantity import format_quantity
from policies.scheduling import NodeConstraints, constraints_for
from policies.wording import noun, plural

FITS = "fits"
FRAGMENTED = "fragmented"
INSUFFICIENT = "insufficient"
NO_ELIGIBLE = "no-eligible-node"
NO_GPU_NODE = "no-gpu-node"
DRA_SERVED = "dra-served"

BLOCK_CORDON = "cordoned"
BLOCK_SELECTOR = "node selector/affinity"
BLOCK_TAINT = "untolerated taint"
MEMO_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class NodeFit:
    node: str
    pool: str
    free: Mapping[str, int]  # per requested GPU resource, after reservations against this pod
    reserved: int  # GPUs pods nominated here reserve against this pod
    allocatable: Mapping[str, int]
    blockers: tuple[str, ...]
    short: tuple[str, ...]
    gpu_room: bool

    @property
    def eligible(self) -> bool:
        """Passes every filter except possibly the GPU count."""
        return not self.blockers and not self.short

    @property
    def fits(self) -> bool:
        return self.eligible and self.gpu_room

    @property
    def free_total(self) -> int:
        return sum(self.free.values())

    def describe(self) -> str:
        free = ", ".join(f"{n} {r} free" for r, n in self.free.items())
        extra = f", {self.reserved} reserved by nominated pods" if self.reserved else ""
        why = "; ".join((*self.blockers, *self.short))
        return f"{self.node} ({self.pool}): {free}{extra}" + (f" — {why}" if why else "")


@dataclass(frozen=True, slots=True)
class ResourceFit:
    resource: str
    want: int
    total_free: int  # over eligible nodes
    max_free: int  # on one eligible node
    nodes_with_room: int  # eligible nodes with free ≥ want
    free_elsewhere: int  # free on nodes that are blocked or short of other resources


class NodeSource:
    """Every candidate node's NodeFit for one analysis, computed on first use and kept."""

    __slots__ = ("_build", "_nodes", "_rows")

    def __init__(self, rows: list[Any], build: Callable[[Any], NodeFit]) -> None:
        self._rows = rows
        self._build = build
        self._nodes: tuple[NodeFit, ...] | None = None

    def all(self) -> tuple[NodeFit, ...]:
        if self._nodes is None:
            self._nodes = tuple(map(self._build, self._rows))
        return self._nodes

    def iterate(self, keep: Callable[[NodeAllocation], bool] | None = None) -> Iterator[NodeFit]:
        """Nodes (only those whose allocation passes ``keep``), without keeping them: for early exits."""
        if self._nodes is not None:
            return (n for n, row in zip(self._nodes, self._rows, strict=True) if keep is None or keep(row[0]))
        return (self._build(row) for row in self._rows if keep is None or keep(row[0]))


@dataclass(slots=True)
class FitReport:
    pod: PodInfo
    wants: Mapping[str, int]
    verdict: str
    resources: tuple[ResourceFit, ...]
    open_nodes: tuple[NodeFit, ...] = field(repr=False)  # nodes with GPUs free (or reserved) for the pod
    blocked: Mapping[str, int]  # blocker or shortage kind -> GPU node count
    missing: tuple[str, ...] = ()  # requested GPU resources no node offers
    eligible_count: int = 0  # nodes that fit the pod apart from GPUs
    source: NodeSource | None = field(default=None, repr=False)
    unresolvable_count: int = 0  # nodes excluded by cordon, node affinity or taints
    node_count: int = 0  # GPU nodes offering every requested resource
    dra_classes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # DRA_SERVED: resource -> classes

    @property
    def nodes(self) -> tuple[NodeFit, ...]:
        """Every GPU node offering the requested resources (computed on first use)."""
        return self.source.all() if self.source is not None else self.open_nodes

    def iter_nodes(self, keep: Callable[[NodeAllocation], bool] | None = None) -> Iterator[NodeFit]:
        # without a source there are no candidate nodes at all (no-gpu-node)
        return self.source.iterate(keep) if self.source is not None else iter(self.open_nodes)

    @property
    def eligible(self) -> list[NodeFit]:
        return [n for n in self.nodes if n.eligible]

    def best(self, limit: int = 5) -> list[NodeFit]:
        """Nodes that fit the pod apart from GPUs and have GPUs free, most free first."""
        found = (n for n in self.open_nodes if n.eligible and n.free_total)
        return heapq.nsmallest(limit, found, key=lambda n: (-n.free_total, n.node))

    def stranded(self, limit: int = 5) -> list[NodeFit]:
        """Nodes with enough free GPUs that the pod cannot use (blocked or short of cpu/memory/pods)."""
        found = (n for n in self.open_nodes if n.gpu_room and not n.eligible)
        return heapq.nsmallest(limit, found, key=lambda n: (-n.free_total, n.node))

    def message(self) -> str:
        want = ", ".join(f"{n} {r}" for r, n in self.wants.items())
        if self.verdict == NO_GPU_NODE:
            return f"no node offers {', '.join(self.missing)} (the pod asks {want})"
        if self.verdict == DRA_SERVED:
            served = ", ".join(f"{r} by DeviceClass {' or '.join(self.dra_classes[r])}" for r in self.missing)
            return (f"served by Dynamic Resource Allocation (extendedResourceName): {served}; the scheduler "
                    f"allocates it from ResourceSlices, which this analysis does not count, so it does not judge "
                    f"whether the pod fits (the pod asks {want})")
        if self.verdict == FITS:
            n = sum(1 for x in self.open_nodes if x.fits)
            return (f"{plural(n, 'node')} {noun(n, 'has', 'have')} room for {want} now; the scheduler has not "
                    "placed the pod yet")
        parts = []
        for r in self.resources:
            parts.append(
                f"{r.resource}: {r.total_free} free on the {plural(self.eligible_count, 'node')} that "
                f"{noun(self.eligible_count, 'fits', 'fit')} the pod otherwise, "
                f"at most {r.max_free} on one; the pod needs {r.want} on one node"
            )
            if r.free_elsewhere:
                parts.append(f"{r.free_elsewhere} more free on nodes the pod cannot use")
        head = {
            FRAGMENTED: "fragmented: enough GPUs are free in total, but not on any single node that fits the pod",
            INSUFFICIENT: "insufficient: not enough GPUs are free on the nodes that fit the pod",
            NO_ELIGIBLE: "no GPU node fits the pod apart from GPUs",
        }[self.verdict]
        return head + " (" + "; ".join(parts) + ")"

    def for_pod(self, pod: PodInfo) -> FitReport:
        """The same analysis for another pod with the same demands."""
        return FitReport(pod, self.wants, self.verdict, self.resources, self.open_nodes, self.blocked,
                         self.missing, self.eligible_count, self.source, self.unresolvable_count, self.node_count,
                         self.dra_classes)


def _constraints_only(pod: PodInfo) -> tuple[str, ...]:
    spec = pod.spec
    return (
        repr(spec.get("nodeSelector")),
        repr(spec.get("affinity")),
        repr(spec.get("tolerations")),
        repr(spec.get("runtimeClassName")),
    )


def _constraints_key(pod: PodInfo) -> tuple[Any, ...]:
    return (
        *_constraints_only(pod),
        tuple(sorted(pod.gpus.items())),
        tuple(sorted(pod.other.items())),
        pod.priority,
        pod.uid if pod.nominated_node else "",
    )


class FitAnalyser:
    """Fit reports for pods of one :class:`ClusterState`; pods with the same demands share one."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._memo: dict[tuple[Any, ...], FitReport] = {}
        self._filter_memo: dict[tuple[str, ...], dict[str, tuple[str, ...]]] = {}
        nodes = state.allocation.nodes.values()
        # Per node, once: GPUs left after bound pods, allocatable, free cpu/memory/storage, pod slots.
        self._rows = [
            (
                a,
                {r: c.usable - c.allocated for r, c in a.gpus.items()},
                {r: c.usable for r, c in a.gpus.items()},
                {r: a.free_other(r) for r in CORE_RESOURCES},
                a.free_pod_slots,
                a.name,
                a.pool,
            )
            for a in nodes
        ]
        self._offered = {r for a in nodes for r, c in a.gpus.items() if c.usable > 0 or c.capacity}
        self._rows_by_resource: dict[str, list[Any]] = {}
        for row in self._rows:
            for r in row[1]:
                self._rows_by_resource.setdefault(r, []).append(row)
        self._smalls: dict[tuple[tuple[str, ...], tuple[int, ...]], Mapping[str, int]] = {}

    def analyse(self, pod: PodInfo) -> FitReport:
        key = _constraints_key(pod)
        found = self._memo.get(key)
        if found is not None:
            return found if found.pod is pod else found.for_pod(pod)
        report = self._analyse(pod)
        if len(self._memo) >= MEMO_LIMIT:
            self._memo.clear()
        self._memo[key] = report
        return report

    def _filters(self, cons: NodeConstraints) -> dict[str, tuple[str, ...]]:
        """Blockers per node name, evaluated once per node group unless the constraints read
        per-node labels."""
        out: dict[str, tuple[str, ...]] = {}
        for group in self.state.facts.groups:
            members = group.members if cons.per_node_in(group) else (group.representative,)
            verdicts = {m.name: self._blockers(cons, m) for m in members}
            if len(members) == 1 and group.size > 1:
                only = verdicts[group.representative.name]
                for m in group.members:
                    out[m.name] = only
            else:
                out.update(verdicts)
        return out

    @staticmethod
    def _blockers(cons: NodeConstraints, node: NodeFacts) -> tuple[str, ...]:
        found = []
        if node.unschedulable:
            found.append(BLOCK_CORDON)
        if not cons.selector_ok(node):
            found.append(BLOCK_SELECTOR)
        bad = cons.untolerated(node)
        if bad:
            found.append(f"{BLOCK_TAINT} {', '.join(str(t) for t in bad)}")
        return tuple(found)

    def _blockers_for(self, pod: PodInfo) -> dict[str, tuple[str, ...]]:
        key = _constraints_only(pod)
        found = self._filter_memo.get(key)
        if found is None:
            if len(self._filter_memo) >= MEMO_LIMIT:
                self._filter_memo.clear()
            found = self._filter_memo[key] = self._filters(constraints_for(pod.template(), self.state.facts))
        return found

    def _analyse(self, pod: PodInfo) -> FitReport:
        wants = dict(sorted(pod.gpus.items()))
        served = {r: self.state.dra_served[r] for r in wants if r in self.state.dra_served}
        if served:
            return FitReport(pod, wants, DRA_SERVED, (), (), {}, tuple(served), dra_classes=served)
        missing = tuple(r for r in wants if r not in self._offered)
        if missing or not wants:
            return FitReport(pod, wants, NO_GPU_NODE, (), (), {}, missing)
        blockers = self._blockers_for(pod)
        names = tuple(wants)
        counts = tuple(wants.values())
        rows = self._rows_by_resource.get(names[0], [])
        if len(names) > 1:
            rows = [row for row in rows if all(r in row[1] for r in names[1:])]
        judge = _Judge(self, pod, names, counts, blockers)
        blocked: Counter[tuple[str, ...]] = Counter()
        total = [0] * len(names)
        most = [0] * len(names)
        room = [0] * len(names)
        elsewhere = [0] * len(names)
        eligible_count = unresolvable = 0
        any_fits = False
        open_nodes: list[NodeFit] = []
        for row in rows:
            alloc, base = row[0], row[1]
            node_blockers = blockers.get(row[5], ())
            short = judge.short(row)
            if node_blockers or short:
                blocked[node_blockers + short] += 1
                unresolvable += bool(node_blockers)
            eligible = not node_blockers and not short
            eligible_count += eligible
            if not alloc.nominated and all(base[r] <= 0 for r in names):
                continue  # nothing free here: adds nothing to totals, cannot be best or stranded
            nf = judge.node_fit(row, node_blockers, short)
            open_nodes.append(nf)
            for i, r in enumerate(names):
                v = nf.free[r]
                if eligible:
                    total[i] += v
                    most[i] = max(most[i], v)
                    room[i] += v >= counts[i]
                else:
                    elsewhere[i] += v
            any_fits = any_fits or nf.fits
        resources = tuple(
            ResourceFit(r, counts[i], total[i], most[i], room[i], elsewhere[i]) for i, r in enumerate(names)
        )
        if any_fits:
            verdict = FITS
        elif not eligible_count:
            verdict = NO_ELIGIBLE
        elif all(rf.total_free >= rf.want for rf in resources):
            verdict = FRAGMENTED
        else:
            verdict = INSUFFICIENT
        kinds: Counter[str] = Counter()
        for reasons, n in blocked.items():
            for b in reasons:
                kinds[BLOCK_TAINT if b.startswith(BLOCK_TAINT) else b.split(" (")[0]] += n
        source = NodeSource(rows, lambda row: judge.node_fit(row, blockers.get(row[5], ()), judge.short(row)))
        return FitReport(pod, wants, verdict, resources, tuple(open_nodes), {k: kinds[k] for k in sorted(kinds)},
                         (), eligible_count, source, unresolvable, len(rows))

    def _small(self, names: tuple[str, ...], values: tuple[int, ...]) -> Mapping[str, int]:
        """Shared read-only {resource: count} maps: most nodes hold the same few values."""
        key = (names, values)
        found = self._smalls.get(key)
        if found is None:
            found = self._smalls[key] = dict(zip(names, values, strict=True))
        return found


class _Judge:
    """One pod's view of one node row: shortages and the NodeFit."""

    __slots__ = ("analyser", "counts", "exclude", "maps", "names", "needs", "priority")

    def __init__(self, analyser: FitAnalyser, pod: PodInfo, names: tuple[str, ...], counts: tuple[int, ...],
                 blockers: Mapping[str, tuple[str, ...]]) -> None:
        self.analyser = analyser
        self.names = names
        self.counts = counts
        self.needs = tuple(pod.other.items())
        self.priority = pod.priority
        self.exclude = pod.uid if pod.nominated_node else ""
        self.maps: dict[int, Mapping[str, int]] = {}  # {resource: n} per n, single-resource pods

    def short(self, row: Any) -> tuple[str, ...]:
        other_free, slots = row[3], row[4]
        found: tuple[str, ...] = ()
        for res, want in self.needs:
            have = other_free.get(res)
            if have is not None and want > have:
                found += (f"Insufficient {res} ({show_units(res, max(have, 0))} free, "
                          f"the pod asks {show_units(res, want)})",)
        if slots is not None and slots < 1:
            found += ("Too many pods",)
        return found

    def node_fit(self, row: Any, node_blockers: tuple[str, ...], short: tuple[str, ...]) -> NodeFit:
        alloc, base, usable = row[0], row[1], row[2]
        small = self.analyser._small
        if len(self.names) == 1:
            r = self.names[0]
            free = base[r]
            reserved = alloc.reserved_for(r, self.priority, self.exclude) if alloc.nominated else 0
            free = free - reserved if free > reserved else 0
            maps = self.maps
            free_map = maps.get(free) or maps.setdefault(free, {r: free})
            have = usable[r]
            usable_map = maps.get(have) or maps.setdefault(have, {r: have})
            return NodeFit(row[5], row[6], free_map, reserved, usable_map, node_blockers, short,
                           free >= self.counts[0])
        if alloc.nominated:
            held = [alloc.reserved_for(r, self.priority, self.exclude) for r in self.names]
            values = tuple(max(0, base[r] - h) for r, h in zip(self.names, held, strict=True))
            reserved = sum(held)
        else:
            values = tuple(max(0, base[r]) for r in self.names)
            reserved = 0
        room = all(v >= n for v, n in zip(values, self.counts, strict=True))
        return NodeFit(row[5], row[6], small(self.names, values), reserved,
                       small(self.names, tuple(usable[r] for r in self.names)), node_blockers, short, room)


def show_units(resource: str, units: int) -> str:
    """cpu milli-units as a quantity ("500m", "8"); bytes in Gi/Mi when exact."""
    if resource == "cpu":
        return format_quantity(Fraction(units, 1000))
    for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if units and units % size == 0:
            return f"{units // size}{suffix}"
    return str(units)

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
node offers the resource).  The fit test is per node, so a pod needing N GPUs needs one node with
N free [K-fit].
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from policies.facts import NodeFacts
from policies.pending.objects import CORE_RESOURCES, PodInfo
from policies.pending.state import ClusterState
from policies.quantity import format_quantity
from policies.scheduling import NodeConstraints, constraints_for

FITS = "fits"
FRAGMENTED = "fragmented"
INSUFFICIENT = "insufficient"
NO_ELIGIBLE = "no-eligible-node"
NO_GPU_NODE = "no-gpu-node"

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


@dataclass(slots=True)
class FitReport:
    pod: PodInfo
    wants: Mapping[str, int]
    verdict: str
    resources: tuple[ResourceFit, ...]
    nodes: tuple[NodeFit, ...] = field(repr=False)
    blocked: Mapping[str, int]  # blocker or shortage kind -> node count
    missing: tuple[str, ...] = ()  # requested GPU resources no node offers

    @property
    def eligible(self) -> list[NodeFit]:
        return [n for n in self.nodes if n.eligible]

    def best(self, limit: int = 5) -> list[NodeFit]:
        """Nodes that fit the pod apart from GPUs and have GPUs free, most free first."""
        return sorted((n for n in self.eligible if n.free_total), key=lambda n: (-n.free_total, n.node))[:limit]

    def stranded(self, limit: int = 5) -> list[NodeFit]:
        """Nodes with enough free GPUs that the pod cannot use (blocked or short of cpu/memory/pods)."""
        found = [n for n in self.nodes if n.gpu_room and not n.eligible]
        return sorted(found, key=lambda n: (-n.free_total, n.node))[:limit]

    def message(self) -> str:
        want = ", ".join(f"{n} {r}" for r, n in self.wants.items())
        if self.verdict == NO_GPU_NODE:
            return f"no node offers {', '.join(self.missing)} (the pod asks {want})"
        if self.verdict == FITS:
            n = sum(1 for x in self.nodes if x.fits)
            return f"{n} node(s) have room for {want} now; the scheduler has not placed the pod yet"
        parts = []
        for r in self.resources:
            parts.append(
                f"{r.resource}: {r.total_free} free on the {len(self.eligible)} node(s) that fit the pod otherwise, "
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
            )
            for a in nodes
        ]
        self._offered = {r for a in nodes for r, c in a.gpus.items() if c.usable > 0 or c.capacity}

    def analyse(self, pod: PodInfo) -> FitReport:
        key = _constraints_key(pod)
        found = self._memo.get(key)
        if found is not None:
            if found.pod is pod:
                return found
            return FitReport(pod, found.wants, found.verdict, found.resources, found.nodes, found.blocked,
                             found.missing)
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
        missing = tuple(r for r in wants if r not in self._offered)
        if missing or not wants:
            return FitReport(pod, wants, NO_GPU_NODE, (), (), {}, missing)
        blockers = self._blockers_for(pod)
        exclude = pod.uid if pod.nominated_node else ""
        priority = pod.priority
        needs = pod.other
        fits: list[NodeFit] = []
        blocked: Counter[str] = Counter()
        for alloc, base, usable, other_free, slots in self._rows:
            if any(r not in base for r in wants):
                continue
            if alloc.nominated:
                held = {r: alloc.reserved_for(r, priority, exclude) for r in wants}
                free = {r: max(0, base[r] - held[r]) for r in wants}
                reserved = sum(held.values())
            else:
                free = {r: max(0, base[r]) for r in wants}
                reserved = 0
            short: tuple[str, ...] = ()
            for res, want in needs.items():
                have = other_free.get(res)
                if have is not None and want > have:
                    short += (f"Insufficient {res} ({show_units(res, max(have, 0))} free, "
                              f"the pod asks {show_units(res, want)})",)
            if slots is not None and slots < 1:
                short += ("Too many pods",)
            node_blockers = blockers.get(alloc.name, ())
            for b in node_blockers:
                blocked[BLOCK_TAINT if b.startswith(BLOCK_TAINT) else b] += 1
            for sh in short:
                blocked[sh.split(" (")[0]] += 1
            fits.append(NodeFit(alloc.name, alloc.pool, free, reserved, {r: usable[r] for r in wants},
                                node_blockers, short, all(free[r] >= n for r, n in wants.items())))
        resources = []
        for r, n in wants.items():
            eligible = [f.free[r] for f in fits if f.eligible]
            resources.append(ResourceFit(
                resource=r,
                want=n,
                total_free=sum(eligible),
                max_free=max(eligible, default=0),
                nodes_with_room=sum(1 for x in eligible if x >= n),
                free_elsewhere=sum(f.free[r] for f in fits if not f.eligible),
            ))
        if any(f.fits for f in fits):
            verdict = FITS
        elif not any(f.eligible for f in fits):
            verdict = NO_ELIGIBLE
        elif all(rf.total_free >= rf.want for rf in resources):
            verdict = FRAGMENTED
        else:
            verdict = INSUFFICIENT
        return FitReport(pod, wants, verdict, tuple(resources), tuple(fits), {k: blocked[k] for k in sorted(blocked)})


def show_units(resource: str, units: int) -> str:
    """cpu milli-units as a quantity ("500m", "8"); bytes in Gi/Mi when exact."""
    if resource == "cpu":
        return format_quantity(Fraction(units, 1000))
    for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if units and units % size == 0:
            return f"{units // size}{suffix}"
    return str(units)

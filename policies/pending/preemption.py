"""Lower-priority pods whose eviction would make room, where preemption applies (pending-gpus.md §6).

Follows DefaultPreemption (pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go
[K-dp], pkg/scheduler/framework/preemption/preemption.go [K-pre]):

* a pod with ``preemptionPolicy: Never`` never preempts ("not eligible due to
  preemptionPolicy=Never.");
* a pod nominated to a node where a lower-priority pod is terminating waits for it ("not eligible
  due to a terminating pod on the nominated node.");
* only nodes rejected with plain ``Unschedulable`` are candidates: never nodes blocked by taints,
  node affinity or cordon (``UnschedulableAndUnresolvable``);
* victims have **strictly lower** priority; the scheduler removes them all, checks the pod fits,
  then reprieves as many as it can, most important first (higher priority, then earlier start);
* among candidates it prefers the lowest highest-victim priority, then the smallest priority sum,
  then the fewest victims [K-pre ``pickOneNodeForPreemption``].

PodDisruptionBudgets are not part of the input, so the first criterion (fewest PDB violations) and
PDB-aware reprieving are left out; the result says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from policies.pending.allocation import NodeAllocation
from policies.pending.fit import FitReport, NodeFit
from policies.pending.objects import PREEMPT_NEVER, PodInfo
from policies.pending.state import ClusterState

NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
PDB_NOTE = "PodDisruptionBudgets are not considered (not in the input); the scheduler treats them as best effort"


@dataclass(frozen=True, slots=True)
class Candidate:
    node: str
    pool: str
    victims: tuple[PodInfo, ...]
    gpus_freed: int

    @property
    def rank(self) -> tuple[int, int, int, str]:
        prios = [v.priority for v in self.victims]
        return (max(prios, default=-(2**31)), sum(prios), len(prios), self.node)


@dataclass(slots=True)
class PreemptionReport:
    pod: PodInfo
    eligible: bool
    note: str  # why not eligible, or what is happening
    candidates: list[Candidate] = field(default_factory=list)
    waiting_on: tuple[PodInfo, ...] = ()  # terminating lower-priority pods on the nominated node
    unresolvable_nodes: int = 0  # nodes where preemption cannot help (taint/affinity/cordon)

    @property
    def helps(self) -> bool:
        return bool(self.candidates)

    @property
    def best(self) -> Candidate | None:
        return min(self.candidates, key=lambda c: c.rank) if self.candidates else None


def _more_important_first(p: PodInfo) -> tuple[int, str]:
    # MoreImportantPod: higher priority first, then the earlier start time
    return (-p.priority, p.started or p.created or "~")


def _fits(alloc: NodeAllocation, pod: PodInfo, free_gpu: Mapping[str, int], free_other: Mapping[str, Fraction | None],
          free_slots: int | None) -> bool:
    if any(free_gpu.get(r, 0) < n for r, n in pod.gpus.items()):
        return False
    for res, want in pod.other.items():
        have = free_other.get(res)
        if have is not None and want > have:
            return False
    return free_slots is None or free_slots >= 1


def _simulate(alloc: NodeAllocation, pod: PodInfo, removed: list[PodInfo], exclude: str) -> bool:
    free_gpu = {r: alloc.balance(r, pod.priority, exclude) + sum(v.gpus.get(r, 0) for v in removed) for r in pod.gpus}
    free_other: dict[str, Fraction | None] = {}
    for res in pod.other:
        have = alloc.free_other(res)
        free_other[res] = None if have is None else have + sum((v.other.get(res, Fraction(0)) for v in removed),
                                                                Fraction(0))
    slots = alloc.free_pod_slots
    return _fits(alloc, pod, free_gpu, free_other, None if slots is None else slots + len(removed))


def victims_on(alloc: NodeAllocation, pod: PodInfo) -> tuple[PodInfo, ...] | None:
    """The minimal victim set on one node (SelectVictimsOnNode), or None when even evicting every
    lower-priority pod leaves too little room."""
    exclude = pod.uid if pod.nominated_node else ""
    lower = sorted((p for p in alloc.pods if p.priority < pod.priority), key=_more_important_first)
    if not lower or not _simulate(alloc, pod, lower, exclude):
        return None
    victims = list(lower)
    for candidate in lower:  # reprieve, most important first
        trial = [v for v in victims if v is not candidate]
        if _simulate(alloc, pod, trial, exclude):
            victims = trial
    return tuple(victims)


def analyse_preemption(state: ClusterState, fit: FitReport, limit: int = 5) -> PreemptionReport:
    pod = fit.pod
    if pod.preemption_policy == PREEMPT_NEVER:
        return PreemptionReport(pod, False, NOT_ELIGIBLE_NEVER)
    nodes = state.allocation.nodes
    nominated = nodes.get(pod.nominated_node) if pod.nominated_node else None
    if nominated is not None:
        nominated_fit = next((n for n in fit.nodes if n.node == nominated.name), None)
        # A nominated node that is now blocked (taint/affinity/cordon) lets the pod preempt again.
        if nominated_fit is None or not nominated_fit.blockers:
            terminating = tuple(p for p in nominated.pods if p.deleting and p.priority < pod.priority)
            if terminating:
                return PreemptionReport(pod, False, NOT_ELIGIBLE_TERMINATING, waiting_on=terminating)
    unresolvable = sum(1 for n in fit.nodes if n.blockers)
    candidates: list[Candidate] = []
    for nf in fit.nodes:
        if nf.blockers or nf.fits:
            continue
        alloc = nodes[nf.node]
        victims = victims_on(alloc, pod)
        if victims is None:
            continue
        freed = sum(v.gpus.get(r, 0) for v in victims for r in pod.gpus)
        candidates.append(Candidate(nf.node, nf.pool, victims, freed))
    candidates.sort(key=lambda c: c.rank)
    if candidates:
        note = f"evicting lower-priority pods on {len(candidates)} node(s) would make room; {PDB_NOTE}"
    elif not any(not n.blockers for n in fit.nodes):
        note = "preemption cannot help: every GPU node is excluded by taints, node affinity or cordon"
    else:
        note = f"no node has enough GPUs held by pods of priority below {pod.priority}"
    return PreemptionReport(pod, True, note, candidates[:limit], unresolvable_nodes=unresolvable)


@dataclass(frozen=True, slots=True)
class Holder:
    """A pod holding GPUs on a node where the pending pod would fit without it."""

    pod: PodInfo
    node: str
    gpus: int


def holders_in_the_way(state: ClusterState, fit: FitReport, limit_nodes: int | None = None) -> list[Holder]:
    """Pods holding the requested GPU resources on nodes that fit the pod apart from GPUs and
    whose allocatable could hold it: reclaiming the idle ones among them would make room (any
    priority; the face filters them by measured utilization)."""
    found: list[Holder] = []
    eligible: list[NodeFit] = [n for n in fit.nodes if n.eligible and not n.gpu_room
                               and all(n.allocatable.get(r, 0) >= w for r, w in fit.wants.items())]
    eligible.sort(key=lambda n: (-n.free_total, n.node))
    for nf in eligible if limit_nodes is None else eligible[:limit_nodes]:
        alloc = state.allocation.nodes[nf.node]
        for p in alloc.pods:
            held = sum(p.gpus.get(r, 0) for r in fit.wants)
            if held:
                found.append(Holder(p, nf.node, held))
    return found

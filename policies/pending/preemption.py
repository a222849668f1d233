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

import math
from dataclasses import dataclass, field

from policies.pending.allocation import NodeAllocation
from policies.pending.fit import FitReport, NodeFit
from policies.pending.objects import PREEMPT_NEVER, PodInfo
from policies.pending.state import ClusterState
from policies.wording import plural

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


def _simulate(alloc: NodeAllocation, pod: PodInfo, removed: list[PodInfo], exclude: str) -> bool:
    """Would the pod fit on the node with ``removed`` gone (nominated pods still reserving)?"""
    for r, want in pod.gpus.items():
        if alloc.balance(r, pod.priority, exclude) + sum(v.gpus.get(r, 0) for v in removed) < want:
            return False
    for res, want in pod.other.items():
        have = alloc.free_other(res)
        if have is not None and have + sum(v.other.get(res, 0) for v in removed) < want:
            return False
    slots = alloc.free_pod_slots
    return slots is None or slots + len(removed) >= 1


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


def candidate_budget(potential_nodes: int) -> int:
    """How many viable candidates the scheduler looks for before choosing: max(10 % of the
    potential nodes, 100), at most all of them (DefaultPreemptionArgs defaults
    minCandidateNodesPercentage=10, minCandidateNodesAbsolute=100; pkg/scheduler/apis/config/v1/
    defaults.go SetDefaults_DefaultPreemptionArgs, code index id 18012079)."""
    return min(potential_nodes, max(math.ceil(potential_nodes * 0.10), 100))


def analyse_preemption(state: ClusterState, fit: FitReport, limit: int = 5) -> PreemptionReport:
    pod = fit.pod
    if pod.preemption_policy == PREEMPT_NEVER:
        return PreemptionReport(pod, False, NOT_ELIGIBLE_NEVER)
    nodes = state.allocation.nodes
    nominated = nodes.get(pod.nominated_node) if pod.nominated_node else None
    if nominated is not None:
        nominated_fit = next(fit.iter_nodes(lambda a: a is nominated), None)
        # A nominated node that is now blocked (taint/affinity/cordon) lets the pod preempt again.
        if nominated_fit is None or not nominated_fit.blockers:
            terminating = tuple(p for p in nominated.pods if p.deleting and p.priority < pod.priority)
            if terminating:
                return PreemptionReport(pod, False, NOT_ELIGIBLE_TERMINATING, waiting_on=terminating)
    # potential nodes: those not rejected as UnschedulableAndUnresolvable
    budget = candidate_budget(max(0, fit.node_count - fit.unresolvable_count))
    candidates: list[Candidate] = []
    any_potential = fit.node_count > fit.unresolvable_count
    lowest = state.allocation.lowest_holder_priority
    exclude = pod.uid if pod.nominated_node else ""

    def could_fit(alloc: NodeAllocation) -> bool:
        """Cheap bound: even evicting every lower-priority GPU holder leaves too few GPUs."""
        for r, want in pod.gpus.items():
            lower = sum(p.gpus.get(r, 0) for p in alloc.pods if p.priority < pod.priority)
            if alloc.balance(r, pod.priority, exclude) + lower < want:
                return False
        return True

    nobody_lower = lowest is None or lowest >= pod.priority  # no pod anywhere has a lower priority
    for nf in () if nobody_lower else fit.iter_nodes(could_fit):
        if nf.blockers or nf.fits:
            continue
        victims = victims_on(nodes[nf.node], pod)
        if victims is None:
            continue
        freed = sum(v.gpus.get(r, 0) for v in victims for r in pod.gpus)
        candidates.append(Candidate(nf.node, nf.pool, victims, freed))
        if len(candidates) >= budget:
            break
    candidates.sort(key=lambda c: c.rank)
    if candidates:
        note = f"evicting lower-priority pods on {plural(len(candidates), 'node')} would make room; {PDB_NOTE}"
    elif not any_potential:
        note = "preemption cannot help: every GPU node is excluded by taints, node affinity or cordon"
    else:
        note = f"no node has enough GPUs held by pods of priority below {pod.priority}"
    return PreemptionReport(pod, True, note, candidates[:limit], unresolvable_nodes=fit.unresolvable_count)


class PreemptionAnalyser:
    """Preemption reports for pods of one state; pods with the same demands share one."""

    def __init__(self, state: ClusterState, limit: int = 5) -> None:
        self.state = state
        self.limit = limit
        self._memo: dict[tuple[int, str], tuple[object, PreemptionReport]] = {}

    def analyse(self, fit: FitReport) -> PreemptionReport:
        # FitAnalyser hands pods with the same demands the same node source; it is kept with the
        # entry, so its id cannot be reused by another object while the entry lives.
        shared: object = fit.source if fit.source is not None else fit.open_nodes
        key = (id(shared), fit.pod.preemption_policy)
        entry = self._memo.get(key)
        if entry is None or entry[0] is not shared:
            if len(self._memo) >= 4096:
                self._memo.clear()
            entry = self._memo[key] = (shared, analyse_preemption(self.state, fit, self.limit))
        found = entry[1]
        if found.pod is fit.pod:
            return found
        return PreemptionReport(fit.pod, found.eligible, found.note, found.candidates, found.waiting_on,
                                found.unresolvable_nodes)


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

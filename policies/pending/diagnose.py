"""Why each pending GPU pod waits: reasons in the order of what fixes them (issue 14).

The kinds, in order: ``gated`` (a scheduling gate holds the pod; nothing else applies yet),
``static`` (the engine's findings for the pod, supplied by the caller), ``scheduler`` (the parsed
scheduler message), ``gang`` (the pod's gang: how many of its siblings run, what they hold and where,
another partially placed gang holding what it needs, a deadlock: policies/pending/gangwait.py),
``insufficient`` / ``fragmentation``, ``unhealthy-devices`` /
``device-plugin-down`` (including cordoned and NotReady GPU nodes the pod could otherwise use),
``idle-holders`` (with utilization data) and ``preemptible``.  A pod asking for an extended resource
that Dynamic Resource Allocation serves gets ``dra-served`` instead of the counts, health, idle and
preemption reasons, which all count device-plugin GPUs (policies/pending/dra.py).

Workloads that have no pods to be Pending — held by Kueue, or refused by a ResourceQuota — are
reported apart, in ``Diagnosis.workloads`` with ``queue`` and ``quota`` reasons
(policies/pending/workloads.py).

Pure: the caller passes the state, the static findings per pod and, optionally, GPU utilization
per pod (from DCGM via Prometheus, converted to :class:`GpuUse`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from policies.pending import fit as fitmod
from policies.pending import health
from policies.pending.allocation import PoolSummary
from policies.pending.events import SchedulerVerdict, scheduler_verdict
from policies.pending.fit import FitAnalyser, FitReport
from policies.pending.gangwait import GangAnalyser
from policies.pending.objects import PodInfo
from policies.pending.preemption import PreemptionAnalyser, PreemptionReport, holders_in_the_way
from policies.pending.reasons import Reason
from policies.pending.schedmsg import explain
from policies.pending.state import ClusterState
from policies.pending.workloads import QUEUE, QUOTA, WorkloadDiagnosis, diagnose_workloads
from policies.wording import noun, plural

GATED = "gated"
STATIC = "static"
SCHEDULER = "scheduler"
INSUFFICIENT = "insufficient"
FRAGMENTATION = "fragmentation"
UNHEALTHY = health.UNHEALTHY
PLUGIN_DOWN = health.PLUGIN_DOWN
IDLE_HOLDERS = "idle-holders"
PREEMPTIBLE = "preemptible"
GANG = "gang"
DRA_SERVED = fitmod.DRA_SERVED
KINDS = (GATED, STATIC, SCHEDULER, GANG, DRA_SERVED, INSUFFICIENT, FRAGMENTATION, UNHEALTHY, PLUGIN_DOWN,
         IDLE_HOLDERS, PREEMPTIBLE)
WORKLOAD_KINDS = (QUEUE, QUOTA)
LIST_LIMIT = 5


@dataclass(frozen=True, slots=True)
class GpuUse:
    """Measured utilization of one pod's GPUs over the window (e.g. DCGM_FI_DEV_GPU_UTIL)."""

    max_percent: float
    avg_percent: float
    samples: int = 0


@dataclass(slots=True)
class PodDiagnosis:
    pod: PodInfo
    reasons: list[Reason]
    verdict: SchedulerVerdict | None = None
    fit: FitReport | None = None
    preemption: PreemptionReport | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.pod.name, "namespace": self.pod.namespace, "gpus": dict(self.pod.gpus),
                "reasons": [r.to_dict() for r in self.reasons]}


@dataclass(slots=True)
class PoolView:
    pool: PoolSummary
    idle: int | None = None  # GPUs held by pods whose utilization stayed under the threshold

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.pool.name, "resource": self.pool.resource,
                               "allocatable": self.pool.allocatable, "allocated": self.pool.allocated,
                               "free": self.pool.free}
        if self.idle is not None:
            out["idle"] = self.idle
        return out


@dataclass(slots=True)
class Diagnosis:
    pods: list[PodDiagnosis] = field(default_factory=list)
    pools: list[PoolView] = field(default_factory=list)
    workloads: list[WorkloadDiagnosis] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"pods": [p.to_dict() for p in self.pods], "workloads": [w.to_dict() for w in self.workloads],
                "cluster": {"pools": [p.to_dict() for p in self.pools]}}


def _names(items: Iterable[str], limit: int = LIST_LIMIT) -> tuple[str, ...]:
    return tuple(items)[:limit]


def _fit_reason(report: FitReport) -> Reason | None:
    if report.verdict == fitmod.DRA_SERVED:
        return Reason(DRA_SERVED, report.message())
    if report.verdict == fitmod.FRAGMENTED:
        return Reason(FRAGMENTATION, report.message(), _names(n.node for n in report.best()))
    if report.verdict in (fitmod.INSUFFICIENT, fitmod.NO_ELIGIBLE, fitmod.NO_GPU_NODE):
        nodes = _names(n.node for n in report.best()) or _names(n.node for n in report.stranded())
        return Reason(INSUFFICIENT, report.message(), nodes)
    return None


def node_issues_of(state: ClusterState) -> dict[str, list[health.HealthIssue]]:
    """Health issues of every GPU node that has any (few: the rest are healthy)."""
    out = {}
    for name, alloc in state.allocation.nodes.items():
        issues = health.node_issues(alloc)
        if issues:
            out[name] = issues
    return out


def _health_reasons(report: FitReport, issues_of: Mapping[str, list[health.HealthIssue]]) -> list[Reason]:
    """Health issues on nodes the pod could use but for them: nodes offering its GPUs whose only
    blockers (if any) are cordon or the not-ready/unschedulable taints.  Only nodes with issues are
    judged, so a large healthy fleet costs nothing here."""
    relevant = []
    for nf in report.iter_nodes(lambda alloc: alloc.name in issues_of):
        if nf.node not in issues_of:
            continue
        others = [b for b in nf.blockers if b != fitmod.BLOCK_CORDON and not _node_state_taint(b)]
        if not others:
            relevant.append(nf.node)
    by_kind: dict[str, list[health.HealthIssue]] = {}
    for name in relevant:
        for issue in issues_of[name]:
            if issue.resource and issue.resource not in report.wants:
                continue
            kind = PLUGIN_DOWN if issue.kind == health.PLUGIN_DOWN else UNHEALTHY
            by_kind.setdefault(kind, []).append(issue)
    out = []
    for kind in (UNHEALTHY, PLUGIN_DOWN):
        issues = by_kind.get(kind, [])
        if not issues:
            continue
        gpus = sum(i.gpus for i in issues)
        nodes = plural(len({i.node for i in issues}), "node")
        head = (f"{plural(gpus, 'GPU')} on {nodes} out of service"
                if kind == UNHEALTHY else f"device plugin down on {nodes}, {plural(gpus, 'GPU')} not advertised")
        detail = "; ".join(f"{i.node}: {i.message}" for i in issues[:LIST_LIMIT])
        out.append(Reason(kind, f"{head}: {detail}", _names(dict.fromkeys(i.node for i in issues))))
    return out


def _node_state_taint(blocker: str) -> bool:
    # taints the node lifecycle controller / cordon add (node.kubernetes.io/*), not user taints
    if not blocker.startswith(fitmod.BLOCK_TAINT):
        return False
    taints = blocker[len(fitmod.BLOCK_TAINT):].strip().split(", ")
    return all(t.startswith(("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
                             "node.kubernetes.io/unschedulable")) for t in taints)


def _observed_whole_window(pod: PodInfo, window_start: datetime | None) -> bool:
    """True when the pod started before the window: ``max_over_time`` only sees samples that exist,
    so a pod started ten minutes ago would look idle over an hour (pending-gpus.md §5.3)."""
    if window_start is None:
        return True
    started = _time(pod.started or pod.created)
    return started is not None and started <= window_start


def _time(text: str) -> datetime | None:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _idle_reason(state: ClusterState, report: FitReport, use: Mapping[tuple[str, str], GpuUse],
                 threshold: float, window_start: datetime | None) -> Reason | None:
    if report.verdict == fitmod.FITS:
        return None
    holders = holders_in_the_way(state, report)
    idle = []
    for h in holders:
        if h.pod.deleting:  # already on its way out (often a preemption victim): nothing to reclaim
            continue
        u = use.get((h.pod.namespace, h.pod.name))
        if u is not None and u.max_percent < threshold and _observed_whole_window(h.pod, window_start):
            idle.append((h, u))
    if not idle:
        return None
    idle.sort(key=lambda x: (-x[0].gpus, x[0].pod.priority, x[0].pod.key))
    parts = []
    for h, u in idle[:LIST_LIMIT]:
        owner = f", owner {h.pod.owner}" if h.pod.owner else ""
        since = f", started {h.pod.started or h.pod.created}" if (h.pod.started or h.pod.created) else ""
        parts.append(f"{h.pod.key} holds {plural(h.gpus, 'GPU')} on {h.node} at max {u.max_percent:g}% "
                     f"(priority {h.pod.priority}{owner}{since})")
    total = sum(h.gpus for h, _ in idle)
    return Reason(IDLE_HOLDERS,
                  f"{plural(total, 'GPU')} the pod could use {noun(total, 'is', 'are')} held by pods whose "
                  "utilization stayed below "
                  f"{threshold:g}%: " + "; ".join(parts),
                  _names(dict.fromkeys(h.node for h, _ in idle)), _names(h.pod.key for h, _ in idle))


def _preemption_reason(report: PreemptionReport) -> Reason | None:
    if report.waiting_on:
        return Reason(PREEMPTIBLE, "preemption is under way: waiting for "
                      + ", ".join(p.key for p in report.waiting_on) + f" to terminate on {report.pod.nominated_node}",
                      (report.pod.nominated_node,), _names(p.key for p in report.waiting_on))
    if not report.eligible or not report.helps or report.best is None:
        return None
    best = report.best
    return Reason(PREEMPTIBLE,
                  f"{report.note}; best node {best.node}: evicting "
                  + ", ".join(f"{v.key} (priority {v.priority})" for v in best.victims)
                  + f" frees {plural(best.gpus_freed, 'GPU')}",
                  _names(c.node for c in report.candidates), _names(v.key for v in best.victims))


def diagnose(
    state: ClusterState,
    pods: Iterable[PodInfo] | None = None,
    *,
    static: Mapping[str, list[str]] | None = None,
    use: Mapping[tuple[str, str], GpuUse] | None = None,
    idle_threshold: float = 1.0,
    window_start: datetime | None = None,
    workloads: Callable[[str], bool] | None = None,
) -> Diagnosis:
    """Reasons for ``pods`` (default: every pending GPU pod) and the per-pool summary.

    ``static`` maps ``namespace/name`` to the engine's finding messages for that pod; ``use`` maps
    (namespace, pod) to measured GPU utilization (None: no utilization data, no ``idle`` column);
    with ``window_start``, only pods started before it can be idle holders.  ``workloads`` chooses
    the namespaces whose workloads without pods are diagnosed (None: none).
    """
    fits, preemption = FitAnalyser(state), PreemptionAnalyser(state)
    gangs = GangAnalyser(state, fits)
    issues_of = node_issues_of(state)
    chosen = list(state.pending_gpu_pods() if pods is None else pods)
    out = Diagnosis()
    for pod in sorted(chosen, key=lambda p: p.key):
        if pod.gated:
            out.pods.append(PodDiagnosis(pod, [Reason(GATED, "scheduling gates hold the pod back: "
                                                      + ", ".join(pod.scheduling_gates))]))
            continue
        reasons: list[Reason] = []
        for finding in (static or {}).get(pod.key, []):
            reasons.append(Reason(STATIC, finding))
        verdict = scheduler_verdict(pod, state.events)
        if verdict.message is not None:
            where = "PodScheduled condition" if verdict.source == "condition" else (
                f"FailedScheduling event (x{verdict.event_count})")
            lines = explain(verdict.message)
            truncated = " (the event message was truncated)" if verdict.message.truncated else ""
            reasons.append(Reason(SCHEDULER, f"{where}{truncated}: " + "; ".join(lines)))
        wait = gangs.analyse(pod)
        if wait is not None:
            reasons.append(Reason(GANG, wait.message, wait.nodes[:LIST_LIMIT], wait.pods[:LIST_LIMIT]))
        report = fits.analyse(pod)
        fit_reason = _fit_reason(report)
        if fit_reason:
            reasons.append(fit_reason)
        if report.verdict == fitmod.DRA_SERVED:
            out.pods.append(PodDiagnosis(pod, reasons, verdict, report))
            continue
        if report.verdict != fitmod.FITS:
            reasons.extend(_health_reasons(report, issues_of))
        if use is not None:
            idle = _idle_reason(state, report, use, idle_threshold, window_start)
            if idle:
                reasons.append(idle)
        pre = preemption.analyse(report) if report.verdict != fitmod.FITS else None
        if pre is not None:
            reason = _preemption_reason(pre)
            if reason:
                reasons.append(reason)
        out.pods.append(PodDiagnosis(pod, reasons, verdict, report, pre))
    for pool in state.allocation.pools:
        idle_gpus = None
        if use is not None:
            names = set(pool.node_names)
            idle_gpus = sum(
                p.gpus.get(pool.resource, 0)
                for n in names
                for p in state.allocation.nodes[n].pods
                if (u := use.get((p.namespace, p.name))) is not None and u.max_percent < idle_threshold
                and _observed_whole_window(p, window_start)
            )
        out.pools.append(PoolView(pool, idle_gpus))
    if workloads is not None:
        out.workloads = diagnose_workloads(state, workloads)
    return out

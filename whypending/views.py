"""Each reason as a headline, evidence items and a hint, shared by the text and HTML renderers.

The JSON keeps the diagnosis's one-line messages; people read better with the evidence as a list,
so items come from the same structured analysis the messages were written from.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from policies.pending import diagnose as dg
from policies.pending import health
from policies.pending.diagnose import PodDiagnosis
from policies.pending.fit import BLOCK_SELECTOR, NodeFit
from policies.pending.reasons import Reason
from policies.pending.schedmsg import explain
from policies.pending.state import ClusterState
from policies.pending.workloads import WorkloadDiagnosis
from whypending.hints import hint


@dataclass(frozen=True, slots=True)
class ReasonView:
    kind: str
    head: str
    items: tuple[str, ...]
    hint: str | None


def _split(message: str) -> tuple[str, tuple[str, ...]]:
    """``"head: a; b"`` -> (head, (a, b)); used where items never contain '; ' themselves."""
    head, sep, rest = message.partition(": ")
    if not sep:
        return message, ()
    return head, tuple(part for part in rest.split("; ") if part)


def _health_items(state: ClusterState, pd: PodDiagnosis, reason: Reason) -> tuple[str, ...]:
    wants = pd.fit.wants if pd.fit is not None else {}
    items = []
    for name in reason.nodes:
        alloc = state.allocation.nodes.get(name)
        if alloc is None:
            continue
        for issue in health.node_issues(alloc):
            is_down = issue.kind == health.PLUGIN_DOWN
            if is_down != (reason.kind == dg.PLUGIN_DOWN) or (issue.resource and issue.resource not in wants):
                continue
            items.append(f"{issue.node}: {issue.message}")
    return tuple(items)


def _closest_first(nf: NodeFit) -> tuple[bool, int, int]:
    """Nodes the pod could use but for a shortage first; nodes its own selector excludes last."""
    return (BLOCK_SELECTOR in nf.blockers, len(nf.blockers) + len(nf.short), -nf.free_total)


def reason_view(state: ClusterState, pd: PodDiagnosis, reason: Reason) -> ReasonView:
    kind, message = reason.kind, reason.message
    head = message
    items: tuple[str, ...] = ()
    if kind == dg.SCHEDULER and pd.verdict is not None and pd.verdict.message is not None:
        head = message.partition(": ")[0]
        items = tuple(explain(pd.verdict.message))
    elif kind in (dg.FRAGMENTATION, dg.INSUFFICIENT) and pd.fit is not None:
        by_name = {n.node: n for n in pd.fit.open_nodes}
        listed = sorted((by_name[n] for n in reason.nodes if n in by_name), key=_closest_first)
        items = tuple(n.describe() for n in listed)
    elif kind in (dg.UNHEALTHY, dg.PLUGIN_DOWN):
        found = _health_items(state, pd, reason)
        if found:
            head, items = message.partition(": ")[0], found
    elif kind == dg.IDLE_HOLDERS:
        head, items = _split(message)
    elif kind == dg.GANG:
        head, items = _clauses(message)
    return ReasonView(kind, head, items, hint(kind, message))


def _clauses(message: str) -> tuple[str, tuple[str, ...]]:
    """``"head; a; b"`` -> (head, (a, b)): messages whose parts are joined with '; '."""
    head, *rest = message.split("; ")
    return head, tuple(rest)


def workload_reason_view(reason: Reason) -> ReasonView:
    """A queue or quota reason of a workload without pods: its first clause, then the others."""
    head, items = _clauses(reason.message)
    return ReasonView(reason.kind, head, items, hint(reason.kind, reason.message))


def workload_heading(w: WorkloadDiagnosis) -> str:
    return f"{w.namespace}/{w.kind}/{w.name}"


def fits_now(pd: PodDiagnosis) -> str | None:
    """A line for pods that have room right now (no fit reason is given for them)."""
    if pd.fit is None or pd.fit.verdict != "fits":
        return None
    return pd.fit.message()


def pending_since(pd: PodDiagnosis) -> str:
    cond = pd.pod.scheduled
    if cond is not None and cond.status == "False" and cond.last_transition:
        return cond.last_transition
    return pd.pod.created


def age(since: str, now: datetime) -> str:
    """``"2h05m"``-style age of an RFC 3339 time, or "" when it cannot be read."""
    try:
        then = datetime.fromisoformat(since)
    except ValueError:
        return ""
    if then.tzinfo is None:
        return ""
    seconds = int((now - then).total_seconds())
    if seconds < 0:
        return ""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m"


def pod_facts(pd: PodDiagnosis) -> list[str]:
    """Short facts about the pod for its heading: GPUs, priority, preemption policy, owner."""
    pod = pd.pod
    gpus = ", ".join(f"{n} {r}" for r, n in sorted(pod.gpus.items()))
    facts = [gpus, f"priority {pod.priority}"]
    if pod.preemption_policy == "Never":
        facts.append("preemptionPolicy Never")
    if pod.nominated_node:
        facts.append(f"nominated to {pod.nominated_node}")
    if pod.owner:
        facts.append(f"owner {pod.owner}")
    return facts

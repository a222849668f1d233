"""Workloads that wait without pods: a queue that has not admitted them, a quota that refused them.

No pod exists to be Pending, so these are reported per workload (the top-level ``workloads`` of
why-pending's report: name, namespace, kind, reasons).

``queue`` — a Kueue Workload whose job is held suspended: ``status.conditions`` ``QuotaReserved``
False (reasons ``Pending``, ``Inadmissible`` when the LocalQueue or ClusterQueue does not exist or is
inactive, ``WaitingForQuota``, ``ExceedsMaxQuota``, ``NoMatchingFlavor``) or ``Admitted`` False
while admission checks are pending, or ``spec.active: false`` (kubernetes-sigs/kueue @ ff69552e
apis/kueue/v1beta2/workload_types.go).  The scheduler writes the flavor assigner's message into the
QuotaReserved condition, e.g. "couldn't assign flavors to pod set main: insufficient unused quota for
nvidia.com/gpu in flavor default-flavor, 8 more needed" (pkg/scheduler/scheduler.go
``UnsetQuotaReservationWithCondition``; pkg/scheduler/flavorassigner/flavorassigner.go
``Assignment.Message`` and ``fitsResourceQuota``).  The reason names the LocalQueue, the
ClusterQueue (and its cohort), the flavor, what the workload asks for against what the ClusterQueue
has (nominal, in use from ``status.flavorsReservation``, the most it can reach with borrowing), and
the Workload's own condition message; where other members of the cohort have quota idle that this
ClusterQueue may not borrow (their ``lendingLimit``, its own ``borrowingLimit``), it says so.  A
batch Job that is suspended with the ``kueue.x-k8s.io/queue-name`` label and no Workload in the
input gets the same reason without the condition.  Hierarchical Cohort objects' own quota is left
out of the idle count (the most it can reach does include it: policies.queue_facts).

``quota`` — a controller that could not create its pods because a ResourceQuota refused them: its
``FailedCreate`` events (``FailedCreatePod`` from the Kubeflow training operator) whose message is
the API server's "exceeded quota: <name>, requested: <resources>, used: <resources>, limited:
<resources>" (kubernetes/kubernetes @ 030880a5 staging/src/k8s.io/apiserver/pkg/admission/plugin/
resourcequota/controller.go ``CheckRequest``), or a ReplicaSet's ``ReplicaFailure`` condition
carrying that message.

Pure: everything comes from the :class:`~policies.pending.state.ClusterState`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from policies.gangfit import pod_quantities
from policies.gangs import pod_sets, queue_name
from policies.pending.events import ControllerEvent
from policies.pending.objects import pod_template
from policies.pending.reasons import Reason
from policies.pending.state import ClusterState
from policies.podspec import extract
from policies.quantity import format_quantity
from policies.queue_facts import ClusterQueue, QueueFacts, ResourceQuotaSpec, Workload
from policies.shapes import as_dict, as_list
from policies.wording import plural

QUEUE = "queue"
QUOTA = "quota"
KINDS = (QUEUE, QUOTA)
# "exceeded quota: %s, requested: %s, used: %s, limited: %s" (resourcequota/controller.go)
EXCEEDED = re.compile(r"exceeded quota: (?P<quota>[^,]+), requested: (?P<requested>.*?), used: (?P<used>.*?), "
                      r"limited: (?P<limited>.*?)\s*$")
IN_FLAVOR = re.compile(r"for (?P<resource>\S+) in flavor (?P<flavor>[^,\s]+)")
REPLICA_FAILURE = "ReplicaFailure"
MEMBERS_SHOWN = 3


@dataclass(slots=True)
class WorkloadDiagnosis:
    kind: str
    namespace: str
    name: str
    reasons: list[Reason] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "kind": self.kind,
                "reasons": [r.to_dict() for r in self.reasons]}


def _show(q: Fraction) -> str:
    return format_quantity(q)


# --- queue -------------------------------------------------------------------------------------

def _demand_of_templates(sets: list[tuple[Mapping[str, Any], int]]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for template, count in sets:
        for r, q in pod_quantities(pod_template(template)).items():
            total[r] = total.get(r, Fraction(0)) + q * count
    return total


def _nominal(groups: Any, flavor: str, resource: str) -> ResourceQuotaSpec | None:
    for group in groups:
        for f in group.flavors:
            if f.name == flavor and resource in f.resources:
                found: ResourceQuotaSpec = f.resources[resource]
                return found
    return None


def _flavor_for(cq: ClusterQueue, resource: str, condition: str, assigned: Mapping[str, str]) -> str | None:
    for m in IN_FLAVOR.finditer(condition):
        if m.group("resource") == resource:
            return m.group("flavor")
    if resource in assigned:
        return assigned[resource]
    group = cq.group_of(resource)
    return group.flavors[0].name if group is not None and group.flavors else None


def _cohort_idle(queues: QueueFacts, cq: ClusterQueue, flavor: str, resource: str) -> str:
    """What other members of the cohort leave idle of (flavor, resource), and how much of it this
    ClusterQueue may borrow now; "" when nothing is idle or all of it is borrowable."""
    if not cq.cohort:
        return ""
    idle = Fraction(0)
    lendable = Fraction(0)
    lenders: list[str] = []
    for name in queues.cohort_members(cq.name):
        member = queues.cluster_queues.get(name)
        spec = _nominal(member.resource_groups, flavor, resource) if member is not None else None
        if member is None or spec is None:
            continue
        used = member.usage.get((flavor, resource))
        free = max(Fraction(0), spec.nominal - (used.total if used is not None else Fraction(0)))
        if not free:
            continue
        idle += free
        can = free if spec.lending_limit is None else max(Fraction(0), min(spec.lending_limit, free))
        lendable += can
        if can < free:
            lenders.append(f"{name} (lendingLimit {_show(spec.lending_limit or Fraction(0))})")
    if not idle:
        return ""
    own = _nominal(cq.resource_groups, flavor, resource)
    borrowing = ""
    borrowable = lendable
    if own is not None and own.borrowing_limit is not None:
        used = cq.usage.get((flavor, resource))
        headroom = max(Fraction(0), own.borrowing_limit - (used.borrowed if used is not None else Fraction(0)))
        if headroom < borrowable:
            borrowable = headroom
            borrowing = f"its own borrowingLimit {_show(own.borrowing_limit)}"
    if borrowable >= idle:
        return f"cohort {cq.cohort} has {_show(idle)} {resource} idle in flavor {flavor}, all borrowable"
    why = ", ".join([*lenders[:MEMBERS_SHOWN], *([borrowing] if borrowing else [])])
    return (f"cohort {cq.cohort} has {_show(idle)} {resource} idle in flavor {flavor} but only {_show(borrowable)} "
            f"of it is borrowable by ClusterQueue {cq.name} ({why}): idle quota it cannot use")


def _capacity(queues: QueueFacts, cq: ClusterQueue, flavor: str, resource: str) -> str:
    spec = _nominal(cq.resource_groups, flavor, resource)
    nominal = spec.nominal if spec is not None else Fraction(0)
    used = cq.usage.get((flavor, resource))
    in_use = f", {_show(used.total)} in use" + (f" ({_show(used.borrowed)} borrowed)" if used.borrowed else "") \
        if used is not None else ""
    reach = queues.potential(cq.name, flavor, resource)
    most = f", at most {_show(reach)} with borrowing" if reach != nominal else ""
    return f"flavor {flavor}: {_show(nominal)} {resource} nominal{in_use}{most}"


def queue_reason(queues: QueueFacts | None, namespace: str, queue: str, demand: Mapping[str, Fraction],
                 is_gpu: Callable[[str], bool], *, condition: str = "", cluster_queue: str = "",
                 assigned: Mapping[str, str] | None = None, suspended_job: bool = False) -> Reason:
    """Why Kueue holds the workload: the queue path, the quota it waits for, the cohort, the condition."""
    gpus = {r: q for r, q in sorted(demand.items()) if is_gpu(r)}
    asks = ", ".join(f"{_show(q)} {r}" for r, q in gpus.items()) or "no GPUs"
    parts: list[str] = []
    if queues is None:
        parts.append(f"it asks for {asks}; the input holds no Kueue objects (LocalQueues, ClusterQueues, Workloads), "
                     "so its queue cannot be followed")
        head = f"waits in Kueue queue {namespace}/{queue}"
        return Reason(QUEUE, "; ".join([head, *parts, *([condition] if condition else [])]))
    lq = queues.local_queue(namespace, queue)
    cq_name = cluster_queue or (lq.cluster_queue if lq is not None else "")
    cq = queues.cluster_queues.get(cq_name) if cq_name else None
    if lq is None:
        head = f"waits in Kueue: LocalQueue {namespace}/{queue} does not exist, so it is never admitted"
    elif cq is None:
        head = (f"waits in Kueue: LocalQueue {namespace}/{queue} → ClusterQueue {cq_name or '(none)'}, which does "
                "not exist, so it is never admitted")
    else:
        cohort = f" (cohort {cq.cohort})" if cq.cohort else ""
        head = f"waits in Kueue: LocalQueue {namespace}/{queue} → ClusterQueue {cq.name}{cohort}"
        for what, policy in (("LocalQueue", lq.stop_policy), ("ClusterQueue", cq.stop_policy)):
            if policy not in ("", "None"):
                parts.append(f"the {what} is stopped (stopPolicy {policy})")
    parts.append(f"it asks for {asks}")
    if cq is not None:
        for resource, want in gpus.items():
            flavor = _flavor_for(cq, resource, condition, assigned or {})
            if flavor is None:
                parts.append(f"no resource group of ClusterQueue {cq.name} covers {resource}")
                continue
            parts.append(f"ClusterQueue {cq.name} {_capacity(queues, cq, flavor, resource)}")
            reach = queues.potential(cq.name, flavor, resource)
            if want > reach:
                parts.append(f"more than it can ever reach ({_show(want)} > {_show(reach)}): it is never admitted "
                             "as it is")
            idle = _cohort_idle(queues, cq, flavor, resource)
            if idle:
                parts.append(idle)
    if condition:
        parts.append(condition)
    elif suspended_job:
        parts.append("no Kueue Workload for it is in the input (is Kueue running, and were Workloads listed?)")
    return Reason(QUEUE, "; ".join([head, *parts]))


def _workload_condition(wl: Workload) -> str | None:
    """The Workload's own word on why it is not admitted; None when it is admitted or finished."""
    if wl.finished or wl.admitted:
        return None
    if not wl.active:
        return f"Workload {wl.name} is deactivated (spec.active: false)"
    reserved = wl.condition("QuotaReserved")
    if reserved is not None and reserved.status == "True":
        admitted = wl.condition("Admitted")
        detail = f" ({admitted.reason}): {admitted.message}" if admitted is not None and admitted.message else ""
        return f"Workload {wl.name}: quota reserved, Admitted=False{detail} (admission checks pending)"
    if reserved is None:
        return f"Workload {wl.name}: not evaluated by Kueue yet (no QuotaReserved condition)"
    reason = f" ({reserved.reason})" if reserved.reason else ""
    return f"Workload {wl.name}: QuotaReserved=False{reason}" + (f": {reserved.message}" if reserved.message else "")


def _workload_entries(state: ClusterState, in_scope: Callable[[str], bool]) -> list[WorkloadDiagnosis]:
    queues = state.queues
    out: list[WorkloadDiagnosis] = []
    owned: set[tuple[str, str, str]] = set()
    if queues is not None:
        for wl in sorted(queues.workloads.values(), key=lambda w: (w.namespace, w.name)):
            if wl.owner_kind:
                owned.add((wl.namespace, wl.owner_kind, wl.owner_name))
            if not in_scope(wl.namespace):
                continue
            condition = _workload_condition(wl)
            if condition is None:
                continue
            demand = _demand_of_templates([(ps.template, ps.count) for ps in wl.pod_sets])
            assigned = {r: f for flavors in wl.flavors.values() for r, f in flavors.items()}
            reason = queue_reason(queues, wl.namespace, wl.queue_name, demand, state.is_gpu, condition=condition,
                                  cluster_queue=wl.cluster_queue, assigned=assigned)
            kind, name = (wl.owner_kind, wl.owner_name) if wl.owner_kind else ("Workload", wl.name)
            out.append(WorkloadDiagnosis(kind, wl.namespace, name, [reason]))
    for obj in state.controllers:
        meta = as_dict(obj.get("metadata"))
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        if obj.get("kind") != "Job" or not name or not in_scope(namespace):
            continue
        queue = queue_name(obj)
        if not queue or as_dict(obj.get("spec")).get("suspend") is not True or (namespace, "Job", name) in owned:
            continue
        if _finished(obj):
            continue
        job = {"apiVersion": "batch/v1", **obj}
        sets = pod_sets(job, extract(job)) or ()
        demand = _demand_of_templates([(_template_of(p.pod), p.count) for p in sets])
        reason = queue_reason(queues, namespace, queue, demand, state.is_gpu, suspended_job=True)
        out.append(WorkloadDiagnosis("Job", namespace, name, [reason]))
    return out


def _template_of(pod: Any) -> dict[str, Any]:
    return {"metadata": dict(pod.metadata), "spec": dict(pod.spec)}


def _finished(job: Mapping[str, Any]) -> bool:
    conditions = as_list(as_dict(job.get("status")).get("conditions"))
    return any(as_dict(c).get("type") in ("Complete", "Failed") and as_dict(c).get("status") == "True"
               for c in conditions)


# --- quota -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Refusal:
    quota: str
    requested: str
    used: str
    limited: str


def refusal(message: str) -> Refusal | None:
    """The parts of the API server's "exceeded quota: …" message, or None."""
    m = EXCEEDED.search(message)
    if m is None:
        return None
    return Refusal(m.group("quota").strip(), m.group("requested"), m.group("used"), m.group("limited"))


def _quota_message(state: ClusterState, namespace: str, kind: str, found: Refusal, source: str) -> str:
    hard = ""
    if state.quotas is not None:
        quota = next((q for q in state.quotas.in_namespace(namespace) if q.name == found.quota), None)
        if quota is not None and quota.scopes:
            hard = f" (scopes: {quota.describe_scopes()})"
    return (f"the {kind} controller cannot create its pods: ResourceQuota {namespace}/{found.quota}{hard} refuses them "
            f"(requested {found.requested}, used {found.used}, limited {found.limited}); said by its {source}")


def _quota_entries(state: ClusterState, in_scope: Callable[[str], bool]) -> list[WorkloadDiagnosis]:
    newest: dict[tuple[str, str, str], ControllerEvent] = {}
    for event in state.failed_creates:
        if not in_scope(event.namespace) or refusal(event.message) is None:
            continue
        key = (event.namespace, event.kind, event.name)
        if key not in newest or event.last_seen >= newest[key].last_seen:
            newest[key] = event
    out: list[WorkloadDiagnosis] = []
    for (namespace, kind, name), event in sorted(newest.items()):
        found = refusal(event.message)
        assert found is not None
        times = f" (x{event.count})" if event.count > 1 else ""
        when = f", last {event.last_seen}" if event.last_seen else ""
        source = f"{event.reason} event{times}{when}"
        out.append(WorkloadDiagnosis(kind, namespace, name,
                                     [Reason(QUOTA, _quota_message(state, namespace, kind, found, source))]))
    seen = set(newest)
    for obj in state.controllers:
        meta = as_dict(obj.get("metadata"))
        namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        kind = str(obj.get("kind"))
        if not name or (namespace, kind, name) in seen or not in_scope(namespace):
            continue
        for c in as_list(as_dict(obj.get("status")).get("conditions")):
            c = as_dict(c)
            found = refusal(str(c.get("message") or ""))
            if c.get("type") == REPLICA_FAILURE and c.get("status") == "True" and found is not None:
                source = f"condition {REPLICA_FAILURE} ({c.get('reason') or 'FailedCreate'})"
                out.append(WorkloadDiagnosis(kind, namespace, name,
                                             [Reason(QUOTA, _quota_message(state, namespace, kind, found, source))]))
                break
    return out


def diagnose_workloads(state: ClusterState, in_scope: Callable[[str], bool] | None = None) -> list[WorkloadDiagnosis]:
    """Workloads without pods that a queue holds or a quota refuses, one entry per workload (its
    reasons merged), in namespace, kind, name order; ``in_scope`` chooses namespaces (None: all)."""
    scope = in_scope or (lambda _ns: True)
    merged: dict[str, WorkloadDiagnosis] = {}
    for entry in [*_workload_entries(state, scope), *_quota_entries(state, scope)]:
        found = merged.setdefault(entry.key, WorkloadDiagnosis(entry.kind, entry.namespace, entry.name))
        found.reasons += entry.reasons
    return [merged[k] for k in sorted(merged, key=lambda k: (merged[k].namespace, merged[k].kind, merged[k].name))]


def summary(workloads: list[WorkloadDiagnosis]) -> str:
    queued = sum(1 for w in workloads if any(r.kind == QUEUE for r in w.reasons))
    refused = sum(1 for w in workloads if any(r.kind == QUOTA for r in w.reasons))
    parts = []
    if queued:
        parts.append(f"{plural(queued, 'workload')} held by Kueue")
    if refused:
        parts.append(f"{plural(refused, 'workload')} whose pods a quota refuses")
    return ", ".join(parts)

"""gpu-queue-unadmittable: Kueue can never admit the workload, or admits it to flavors with no GPU nodes.

A job labelled ``kueue.x-k8s.io/queue-name: <LocalQueue>`` is created suspended; Kueue admits it
when its ClusterQueue can reserve quota for all its pod sets at once (policies.gangs counts them as
Kueue does).  From LocalQueue → ClusterQueue → ResourceFlavors (policies.queue_facts, read from
kubernetes-sigs/kueue; v1beta1 ``cohort`` and v1beta2 ``cohortName`` alike) this rule finds:

* **error** — the workload's demand per flavor exceeds what the ClusterQueue can ever reach: its
  nominal quota plus what it may borrow within its cohort tree, respecting ``borrowingLimit`` and
  the other members' ``lendingLimit`` (Kueue's ``potentialAvailable``).  Flavors are tried per pod
  set as Kueue's flavor assigner does (a flavor must tolerate and match the pod set: its
  ``nodeTaints`` against the pod's and the flavor's tolerations, its ``nodeLabels`` against the
  pod's node selector and required affinity on those keys); no assignment of flavors to pod sets
  holds the demand.  Kueue reports "insufficient quota for … > maximum capacity";
* **error** — a requested GPU resource is in none of the ClusterQueue's resource groups
  ("resource … unavailable in ClusterQueue"), or the ClusterQueue's ``namespaceSelector`` is absent
  (a nothing selector) or excludes the namespace by its ``kubernetes.io/metadata.name`` label;
* **error** — no flavor the pod set can use leads to nodes offering the GPU: Kueue adds the
  flavor's ``nodeLabels`` to the pods' node selector and its ``tolerations`` to theirs, and on
  those nodes no node (or pool) offers the GPU and passes the scheduler's filters — admitted, the
  pods stay Pending;
* **warning** — the queue name names no LocalQueue in the namespace, the LocalQueue names no
  ClusterQueue, a queue is stopped (``stopPolicy``), or a non-GPU resource the ClusterQueue does not
  cover is requested (Kueue's ``resources.excludeResourcePrefixes`` or ``quotaCheckStrategy:
  IgnoreUndeclared`` may drop it).

Kueue facts come from the snapshot (``kubectl get localqueues -A,clusterqueues,resourceflavors,
cohorts -o yaml``) or the live watch; without them, or for an object without a namespace or one a
controller owns (its owner is the Kueue workload), the rule stays silent.  Labels other than
``kubernetes.io/metadata.name`` in a namespaceSelector are not judged (namespaces are not read).

Failing (the ClusterQueue reaches 16 nominal + 8 borrowable GPUs; the job asks for 32)::

    kind: Job
    metadata: {namespace: team-a, labels: {kueue.x-k8s.io/queue-name: team-a}}
    spec:
      parallelism: 4
      completions: 4
      template:
        spec:
          containers:
          - name: train
            resources: {limits: {nvidia.com/gpu: 8}}

Passing::

      parallelism: 3
      completions: 3
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from policies import budget, pointer
from policies.applicability import Applies, never
from policies.facts import NodeFacts
from policies.gangfit import pod_quantities
from policies.gangs import PodSet, pod_sets, queue_name
from policies.memo import TemplateAnalysis
from policies.podspec import PodTemplate
from policies.quantity import format_quantity
from policies.queue_facts import (
    QUEUE_LABEL,
    ClusterQueue,
    QueueFacts,
    ResourceFlavor,
    ResourceGroup,
    namespace_selected,
)
from policies.rule import NeedsFacts, Option, RuleContext, WorkloadContext
from policies.scheduling import pod_node_selector, pod_tolerations, required_terms, term_matches, untolerated
from policies.shapes import as_dict, as_list
from policies.types import Severity, Violation
from policies.wording import plural

ID = "gpu-queue-unadmittable"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = never  # judges whole workloads (check_workload) only
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = (
    "Kueue can never admit the workload (its demand exceeds what the ClusterQueue can reach with borrowing), "
    "its flavors lead to no GPU node, or its queue-name names no LocalQueue."
)
REMEDIATION = (
    "Ask for at most what the ClusterQueue can reach (nominal quota plus borrowable quota in its cohort), raise "
    "its nominalQuota or borrowingLimit, give its flavors nodeLabels of nodes that have the GPUs, or name an "
    "existing LocalQueue in kueue.x-k8s.io/queue-name."
)
OPTIONS: tuple[Option, ...] = ()
MAX_STEPS = 20_000  # assignment search nodes before giving up (no finding)
LABEL_PATH = ("metadata", "labels", QUEUE_LABEL)


def check(ctx: RuleContext) -> Iterator[Violation]:
    """Pod templates are judged by the other rules; this rule judges whole workloads."""
    return iter(())


def relevant(ctx: WorkloadContext) -> bool:
    return bool(queue_name(ctx.obj)) and bool(ctx.namespace)


def _owned(obj: Mapping[str, Any]) -> bool:
    refs = as_list(as_dict(obj.get("metadata")).get("ownerReferences"))
    return any(as_dict(r).get("controller") is True for r in refs)


def _finding(
    message: str, path: tuple[Any, ...] = LABEL_PATH, severity: Severity | None = Severity.WARNING,
    scale_up: str = "",
) -> Violation:
    return Violation(message=message, path=path, anchor="object", severity=severity, scale_up=scale_up)


def _quota_bound(cq: ClusterQueue) -> str:
    return (f"more nodes do not help: Kueue admits by ClusterQueue {cq.name}'s quota (nominal plus what it may "
            "borrow), not by free nodes")


@dataclass(frozen=True, slots=True)
class _Demand:
    pod_set: PodSet
    count: int
    requests: Mapping[str, Fraction]  # the whole pod set's, by resource


def _demands(obj: Mapping[str, Any], sets: Sequence[PodSet], cq: ClusterQueue) -> list[_Demand]:
    is_job = obj.get("kind") == "Job" and str(obj.get("apiVersion")).startswith("batch/")
    out = []
    for p in sets:
        count = p.need if is_job else p.count  # a Job's kueue.x-k8s.io/job-min-parallelism allows fewer
        if count <= 0:
            continue
        total = {r: q * count for r, q in pod_quantities(p.pod).items()}
        if cq.group_of("pods") is not None:
            total["pods"] = Fraction(count)
        out.append(_Demand(p, count, total))
    return out


def _flavor_selector_ok(pod: PodTemplate, flavor: ResourceFlavor) -> bool:
    """kueue flavorassigner ``flavorSelector``: the pod's nodeSelector and required affinity, kept only
    for keys the flavor's nodeLabels set (a term left empty matches any flavor), against those labels."""
    keys = set(flavor.node_labels)
    node = NodeFacts(name=flavor.name, labels=dict(flavor.node_labels), taints=(), allocatable={})
    for k, v in pod_node_selector(pod.spec).items():
        if k in keys and flavor.node_labels.get(k) != v:
            return False
    terms = required_terms(pod.spec)
    if not terms:
        return True
    kept = []
    for term in terms:
        exprs = [e for e in as_list(term.get("matchExpressions")) if isinstance(e, Mapping) and e.get("key") in keys]
        if not exprs:
            return True  # an emptied term: affinity reduces to the nodeSelector
        kept.append({"matchExpressions": exprs})
    return any(term_matches(t, node) for t in kept)


def _flavored(pod: PodTemplate, flavor: ResourceFlavor) -> PodTemplate:
    """The pod as Kueue starts it on ``flavor``: nodeLabels in its nodeSelector, tolerations added."""
    spec = dict(pod.spec)
    if flavor.node_labels:
        spec["nodeSelector"] = {**pod_node_selector(pod.spec), **flavor.node_labels}
    if flavor.tolerations:
        spec["tolerations"] = [*pod_tolerations(pod.spec), *flavor.tolerations]
    return dataclasses.replace(pod, spec=spec)


class _Judge:
    def __init__(self, ctx: WorkloadContext, queues: QueueFacts, cq: ClusterQueue) -> None:
        self.ctx = ctx
        self.queues = queues
        self.cq = cq
        self._usable: dict[tuple[int, str, int], str] = {}

    def flavor_problem(self, demand: _Demand, flavor_name: str, group: ResourceGroup) -> str:
        """Why ``demand``'s pod set cannot use the flavor (taints, affinity, no GPU nodes), or ""."""
        key = (id(demand.pod_set), flavor_name, id(group))
        found = self._usable.get(key)
        if found is None:
            found = self._usable[key] = self._problem(demand, flavor_name, group)
        return found

    def _problem(self, demand: _Demand, flavor_name: str, group: ResourceGroup) -> str:
        flavor = self.queues.flavors.get(flavor_name)
        if flavor is None:
            return f"flavor {flavor_name} not found (no ResourceFlavor of that name)"
        pod = demand.pod_set.pod
        bad = untolerated([*pod_tolerations(pod.spec), *flavor.tolerations], flavor.node_taints)
        if bad:
            return f"untolerated taint {bad[0]} in flavor {flavor_name}"
        if not _flavor_selector_ok(pod, flavor):
            return f"flavor {flavor_name} doesn't match node affinity"
        gpus = [r for r in group.covered if r in demand.requests and self.ctx.is_gpu(r)]
        if gpus and self.ctx.facts.groups and pod.scheduling_known:
            verdicts = TemplateAnalysis(_flavored(pod, flavor), self.ctx.facts, self.ctx.is_gpu).verdicts()
            # Whether the GPU count fits a node is the pod rules' to say; here: offered and reachable.
            if not any((v.offers and v.selector_ok and v.taints_ok) or v.hedged for v in verdicts):
                labels = ", ".join(f"{k}={v}" for k, v in sorted(flavor.node_labels.items())) or "none"
                return (f"flavor {flavor_name} (nodeLabels {labels}) leads to no node that offers "
                        f"{', '.join(gpus)} to the pod (node labels, taints)")
        return ""

    def capacity(self, flavor: str, resource: str) -> Fraction:
        return self.queues.potential(self.cq.name, flavor, resource)

    def describe_capacity(self, flavor: str, resource: str) -> str:
        cap = self.capacity(flavor, resource)
        group = self.cq.group_of(resource)
        nominal = Fraction(0)
        for f in group.flavors if group is not None else ():
            if f.name == flavor and resource in f.resources:
                nominal = f.resources[resource].nominal
        own = f"{_show(resource, nominal)} nominal"
        if cap > nominal and self.cq.cohort:
            borrowable = _show(resource, cap - nominal)
            return f"{_show(resource, cap)} ({own} + {borrowable} borrowable in cohort {self.cq.cohort})"
        if self.cq.cohort:
            return f"{_show(resource, cap)} ({own}, nothing borrowable in cohort {self.cq.cohort})"
        return f"{_show(resource, cap)} ({own}; no cohort to borrow from)"


def _show(resource: str, q: Fraction) -> str:
    if resource == "memory" or resource.startswith("hugepages-"):
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20)):
            if q and q % size == 0:
                return f"{q // size}{suffix}"
    return format_quantity(q)


@dataclass(frozen=True, slots=True)
class _Step:
    demand: _Demand
    group: ResourceGroup
    resources: tuple[str, ...]  # of the group, requested by the pod set


def _search(judge: _Judge, steps: list[_Step]) -> bool | None:
    """Whether some flavor per (pod set, resource group) holds every demand; None: search too large."""
    used: dict[tuple[str, str], Fraction] = {}
    budget_left = [MAX_STEPS]

    def place(i: int) -> bool | None:
        if i == len(steps):
            return True
        budget_left[0] -= 1
        if budget_left[0] < 0:
            return None
        if i % 64 == 0:
            budget.check()
        step = steps[i]
        unknown = False
        for f in step.group.flavors:
            if judge.flavor_problem(step.demand, f.name, step.group):
                continue
            if any(used.get((f.name, r), Fraction(0)) + step.demand.requests[r] > judge.capacity(f.name, r)
                   for r in step.resources):
                continue
            for r in step.resources:
                used[(f.name, r)] = used.get((f.name, r), Fraction(0)) + step.demand.requests[r]
            found = place(i + 1)
            for r in step.resources:
                used[(f.name, r)] -= step.demand.requests[r]
            if found:
                return True
            unknown = unknown or found is None
        return None if unknown else False

    return place(0)


def _alone(judge: _Judge, step: _Step) -> list[str]:
    """Why no flavor holds the pod set on its own (Kueue's reasons), or [] when one does."""
    reasons = []
    for f in step.group.flavors:
        problem = judge.flavor_problem(step.demand, f.name, step.group)
        if problem:
            reasons.append(problem)
            continue
        over = [r for r in step.resources if step.demand.requests[r] > judge.capacity(f.name, r)]
        if not over:
            return []
        for r in over:
            reasons.append(
                f"insufficient quota for {r} in flavor {f.name}: pod set {step.demand.pod_set.name} asks for "
                f"{_show(r, step.demand.requests[r])} ({plural(step.demand.count, 'pod')}), the ClusterQueue can "
                f"reach at most {judge.describe_capacity(f.name, r)}"
            )
    return reasons


def _where(lq_name: str, cq: ClusterQueue) -> str:
    return f"LocalQueue {lq_name} → ClusterQueue {cq.name}" + (f" (cohort {cq.cohort})" if cq.cohort else "")


def check_workload(ctx: WorkloadContext) -> Iterator[Violation]:
    name = queue_name(ctx.obj)
    queues = ctx.facts.queues
    if not name or not ctx.namespace or queues is None or _owned(ctx.obj):
        return
    lq = queues.local_queue(ctx.namespace, name)
    if lq is None:
        others = sorted(q.name for q in queues.local_queues.values() if q.namespace == ctx.namespace)
        known = f" (it has {', '.join(others[:5])})" if others else " (it has none)"
        yield _finding(f"{QUEUE_LABEL} names LocalQueue {name!r}, which does not exist in namespace "
                       f"{ctx.namespace}{known}: Kueue keeps the workload suspended until one is created")
        return
    cq = queues.cluster_queues.get(lq.cluster_queue)
    if cq is None:
        yield _finding(f"LocalQueue {ctx.namespace}/{name} points at ClusterQueue {lq.cluster_queue!r}, which does "
                       "not exist: Kueue keeps the workload suspended until it is created")
        return
    if queues.in_cycle(cq.name):
        return  # Kueue refuses a cohort tree with a cycle; what it can reach is not defined
    where = _where(f"{ctx.namespace}/{name}", cq)
    for what, policy in (("LocalQueue", lq.stop_policy), ("ClusterQueue", cq.stop_policy)):
        if policy not in ("", "None"):
            yield _finding(f"{where}: the {what} is stopped (stopPolicy {policy}): it admits nothing until resumed")
    selected = namespace_selected(cq.namespace_selector, ctx.namespace)
    if selected is False:
        why = "has no namespaceSelector (a nothing selector: no namespace is eligible)" if (
            cq.namespace_selector is None) else f"has a namespaceSelector that excludes namespace {ctx.namespace}"
        yield _finding(f"{where}: the ClusterQueue {why}: Kueue never admits the workload "
                       "(\"workload namespace doesn't match ClusterQueue selector\")", severity=None)
        return
    sets = pod_sets(ctx.obj, ctx.templates)
    if not sets:
        return
    demands = _demands(ctx.obj, sets, cq)
    judge = _Judge(ctx, queues, cq)
    steps: list[_Step] = []
    for d in demands:
        groups: dict[int, tuple[ResourceGroup, list[str]]] = {}
        for r, q in sorted(d.requests.items()):
            if q <= 0:
                continue
            group = cq.group_of(r)
            if group is None:
                spec_at = tuple(pointer.split(d.pod_set.pod.spec_pointer))
                if ctx.is_gpu(r):
                    yield _finding(f"{where}: resource {r} unavailable in ClusterQueue {cq.name} (no resource group "
                                   f"covers it): Kueue never admits pod set {d.pod_set.name}", spec_at, severity=None,
                                   scale_up=_quota_bound(cq))
                    return
                yield _finding(f"{where}: pod set {d.pod_set.name} requests {r}, which no resource group of "
                               f"ClusterQueue {cq.name} covers: Kueue refuses it unless its configuration excludes "
                               "the resource (resources.excludeResourcePrefixes, quotaCheckStrategy: IgnoreUndeclared)",
                               spec_at)
                continue
            groups.setdefault(id(group), (group, []))[1].append(r)
        steps.extend(_Step(d, g, tuple(rs)) for g, rs in groups.values())
    if not steps:
        return
    gpu_steps = [s for s in steps if any(ctx.is_gpu(r) for r in s.resources)]
    for step in gpu_steps:
        problems = [judge.flavor_problem(step.demand, f.name, step.group) for f in step.group.flavors]
        if problems and all(problems) and all("leads to no node" in p for p in problems if p):
            gpus = ", ".join(r for r in step.resources if ctx.is_gpu(r))
            at = tuple(pointer.split(step.demand.pod_set.pod.spec_pointer))
            labels = sorted({f"{k}={v}" for f in step.group.flavors if (rf := queues.flavors.get(f.name)) is not None
                             for k, v in rf.node_labels.items()})
            on = f"labelled {', '.join(labels[:3])}" if labels else "its flavors select"
            yield _finding(f"{where}: no flavor of ClusterQueue {cq.name} for {gpus} leads to a GPU node for pod set "
                           f"{step.demand.pod_set.name} ({'; '.join(problems)}): Kueue admits the workload and its "
                           "pods stay Pending", at, severity=None,
                           scale_up=f"a scale-up helps only if it adds nodes {on} that offer {gpus}")
            return
    if _search(judge, steps) is not False:
        return
    for step in steps:
        reasons = _alone(judge, step)
        if reasons:
            yield _finding(f"Kueue never admits this workload ({where}): couldn't assign flavors to pod set "
                           f"{step.demand.pod_set.name}: {'; '.join(reasons)}",
                           tuple(pointer.split(step.demand.pod_set.at())), severity=None, scale_up=_quota_bound(cq))
            return
    totals: dict[str, Fraction] = {}
    for d in demands:
        for r, q in d.requests.items():
            totals[r] = totals.get(r, Fraction(0)) + q
    shown = [r for r in sorted(totals) if ctx.is_gpu(r)] or sorted(totals)
    asked = ", ".join(f"{_show(r, totals[r])} {r}" for r in shown)
    reach = "; ".join(
        f"{f.name}: {judge.describe_capacity(f.name, r)}"
        for r in shown for group in [cq.group_of(r)] if group is not None for f in group.flavors
    )
    biggest = max(demands, key=lambda d: d.count)
    yield _finding(f"Kueue never admits this workload ({where}): its {len(demands)} pod sets ask for {asked} in all, "
                   f"more than any assignment of flavors can hold at once (the ClusterQueue can reach {reach})",
                   tuple(pointer.split(biggest.pod_set.at())), severity=None, scale_up=_quota_bound(cq))

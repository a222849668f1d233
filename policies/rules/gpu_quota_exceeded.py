"""gpu-quota-exceeded: a namespace ResourceQuota is smaller than one pod's GPU request, or than a gang's.

ResourceQuota admission refuses every pod whose requests would take the namespace past
``spec.hard``; a controller then reports ``FailedCreate`` ("exceeded quota: …") and retries for
ever.  Only ``requests.<resource>`` items limit extended resources such as GPUs (a
``limits.nvidia.com/gpu`` or bare ``nvidia.com/gpu`` item is accepted but counts nothing; see
policies.quota_facts for the sources), and ``pods`` / ``count/pods`` limit the number of pods.

* A quota smaller than **one pod's** request: no such pod is ever created — for any kind.
* A quota smaller than what a **gang** needs at once (policies.gangs: a distributed job's
  replicas, a LeaderWorkerSet group, a Kueue workload): some pods are created and hold their GPUs,
  the rest are refused, and the job never runs as a whole.

Scopes and ``scopeSelector`` are honoured (Terminating, NotTerminating, BestEffort, NotBestEffort,
PriorityClass, CrossNamespacePodAffinity).  Where a template leaves the answer to admission (no
``priorityClassName`` under a PriorityClass scope, no cpu/memory under a BestEffort scope) the
finding is a **warning** that says it cannot tell whether the quota counts the pods.  Quotas come
from the snapshot (``kubectl get resourcequotas -A -o yaml``) or the live watch; an object without
``metadata.namespace`` is judged against none (the webhook uses the request's namespace).  Only the
hard limits are compared, not the current use: the finding means "never", not "not now".

Failing (the namespace's quota is ``requests.nvidia.com/gpu: 16``)::

    kind: Job
    metadata: {namespace: team-a}
    spec:
      template:
        spec:
          containers:
          - name: train
            resources: {limits: {nvidia.com/gpu: 32}}

Passing::

            resources: {limits: {nvidia.com/gpu: 8}}
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from policies import pointer
from policies.applicability import Applies, never
from policies.gangs import Gang, PodSet, gang_of
from policies.memo import is_gpu_device
from policies.podresources import pod_requests
from policies.podspec import PodTemplate
from policies.quantity import format_quantity
from policies.quota_facts import REQUESTS_PREFIX, Quota, counts_pod
from policies.rule import NeedsFacts, Option, RuleContext, WorkloadContext
from policies.scheduling import request_sites
from policies.types import Severity, Violation
from policies.wording import plural

ID = "gpu-quota-exceeded"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = never  # judges whole workloads (check_workload) only
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "A namespace ResourceQuota is smaller than one pod's GPU request or than what a gang needs at once."
REMEDIATION = (
    "Raise the namespace's ResourceQuota (requests.<gpu>, pods) to hold the job, ask for fewer GPUs or pods, "
    "or run the job in a namespace whose quota holds it."
)
OPTIONS: tuple[Option, ...] = ()


def _scale_up(quota: Quota) -> str:
    return f"more nodes do not help: ResourceQuota {quota.key} caps the namespace, however many GPUs are free"


def check(ctx: RuleContext) -> Iterator[Violation]:
    """Pod templates are judged by the other rules; this rule judges whole workloads."""
    return iter(())


def relevant(ctx: WorkloadContext) -> bool:
    """For the "skipped without facts" note: gangs in a namespace (where quotas matter most)."""
    return bool(ctx.namespace) and gang_of(ctx.obj, ctx.templates) is not None


def _gpu_requests(pod: PodTemplate, ctx: WorkloadContext) -> dict[str, Fraction]:
    return pod_requests(pod, is_gpu_device(ctx.is_gpu))


def _used(quota: Quota, item: str) -> str:
    used = quota.used.get(item)
    return f", {format_quantity(used)} in use now" if used else ""


def _scope_note(quota: Quota) -> str:
    return f" (scopes: {quota.describe_scopes()})" if quota.scopes else ""


def _site(pod: PodTemplate, resource: str) -> tuple[str, ...]:
    sites = request_sites(pod, resource)
    if not sites:
        return tuple(pointer.split(pod.spec_pointer))
    _, path, _ = max(sites, key=lambda s: s[2])
    return tuple(pointer.split(pointer.join(pod.spec_pointer, path)))


def _counted(quota: Quota, pod: PodTemplate) -> tuple[bool, str] | None:
    """(certain, why not certain) when the quota counts (or may count) pods of ``pod``; None when not."""
    matched, why = counts_pod(quota, pod)
    if matched is False:
        return None
    return (matched is True), why


def _per_pod(ctx: WorkloadContext, quota: Quota, pod: PodTemplate) -> Iterator[Violation]:
    counted = _counted(quota, pod)
    if counted is None:
        return
    certain, why = counted
    hedge = "" if certain else f"; gpuguard cannot tell whether the quota counts these pods ({why})"
    for resource, want in sorted(_gpu_requests(pod, ctx).items()):
        limit = quota.gpu_limit(resource)
        if limit is None or want <= limit:
            continue
        item = REQUESTS_PREFIX + resource
        yield Violation(
            message=(
                f"ResourceQuota {quota.key}{_scope_note(quota)} allows {item}: {format_quantity(limit)} in the "
                f"namespace{_used(quota, item)}, but one pod of this template asks for {format_quantity(want)}: "
                f"the API server refuses every such pod (exceeded quota), so none is ever created{hedge}"
            ),
            path=_site(pod, resource),
            anchor="object",
            severity=None if certain else Severity.WARNING,
            scale_up=_scale_up(quota),
        )
    pods = quota.pod_limit()
    if pods is not None and pods[1] < 1:
        yield Violation(
            message=(f"ResourceQuota {quota.key}{_scope_note(quota)} allows {pods[0]}: 0 in the namespace: "
                     f"no pod of this template is ever created{hedge}"),
            path=tuple(pointer.split(pod.spec_pointer)),
            anchor="object",
            severity=None if certain else Severity.WARNING,
            scale_up=_scale_up(quota),
        )


def _least_total(gang: Gang, counted: list[PodSet], per_set: dict[int, Fraction]) -> Fraction:
    """The least of a resource the pods the gang needs at once request: every set's own minimum,
    then the rest of ``gang.need`` from the sets that ask least."""
    total = sum((per_set[id(p)] * p.need for p in counted), Fraction(0))
    rest = gang.need - sum(p.need for p in gang.pod_sets)
    if rest > 0:
        spare = sorted((per_set.get(id(p), Fraction(0)), p.count - p.need) for p in gang.pod_sets)
        for each, available in spare:
            take = min(rest, available)
            total += each * take
            rest -= take
            if rest <= 0:
                break
    return total


def _gang(ctx: WorkloadContext, quota: Quota, gang: Gang) -> Iterator[Violation]:
    counted: list[PodSet] = []
    certain, why = True, ""
    for p in gang.pod_sets:
        found = _counted(quota, p.pod)
        if found is None:
            continue
        counted.append(p)
        if not found[0]:
            certain, why = False, why or found[1]
    if not counted:
        return
    hedge = "" if certain else f"; gpuguard cannot tell whether the quota counts these pods ({why})"
    severity = None if certain else Severity.WARNING
    requests = {id(p): _gpu_requests(p.pod, ctx) for p in gang.pod_sets}
    resources = sorted({r for p in counted for r in requests[id(p)]})
    all_counted = len(counted) == len(gang.pod_sets)
    for resource in resources:
        limit = quota.gpu_limit(resource)
        per_set = {id(p): requests[id(p)].get(resource, Fraction(0)) for p in gang.pod_sets}
        if limit is None or any(per_set[id(p)] > limit for p in counted):
            continue  # no limit, or one pod alone exceeds it (reported per pod)
        if all_counted:
            need = _least_total(gang, counted, per_set)
        else:
            need = sum((per_set[id(p)] * p.need for p in counted), Fraction(0))
        if need <= limit:
            continue
        item = REQUESTS_PREFIX + resource
        yield Violation(
            message=(
                f"ResourceQuota {quota.key}{_scope_note(quota)} allows {item}: {format_quantity(limit)} in the "
                f"namespace{_used(quota, item)}, but the {plural(gang.need, 'pod')} that must run together "
                f"({gang.why}) ask for {format_quantity(need)}: the controller's pod creation is refused past the "
                f"quota (FailedCreate: exceeded quota), so the gang never runs as a whole{hedge}"
            ),
            path=tuple(pointer.split(gang.at())),
            anchor="object",
            severity=severity,
            scale_up=_scale_up(quota),
        )
    pods = quota.pod_limit()
    need_pods = gang.need if all_counted else sum(p.need for p in counted)
    if pods is not None and 1 <= pods[1] < need_pods:
        yield Violation(
            message=(
                f"ResourceQuota {quota.key}{_scope_note(quota)} allows {pods[0]}: {format_quantity(pods[1])} in "
                f"the namespace{_used(quota, pods[0])}, but {plural(need_pods, 'pod')} must run together ({gang.why}): "
                f"the gang never runs as a whole{hedge}"
            ),
            path=tuple(pointer.split(gang.at())),
            anchor="object",
            severity=severity,
            scale_up=_scale_up(quota),
        )


def check_workload(ctx: WorkloadContext) -> Iterator[Violation]:
    quotas = ctx.facts.quotas
    if not ctx.namespace or quotas is None:
        return
    found = quotas.in_namespace(ctx.namespace)
    if not found:
        return
    gang = gang_of(ctx.obj, ctx.templates)
    gpu_templates = [t for t in ctx.templates if _gpu_requests(t, ctx)]
    for quota in found:
        for pod in gpu_templates:
            yield from _per_pod(ctx, quota, pod)
        if gang is not None:
            yield from _gang(ctx, quota, gang)

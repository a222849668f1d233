"""gpu-gang-unschedulable: the pods that must run together can never all be placed at once.

A distributed training job makes progress only when all its workers run.  Gangs are read from
the kinds that have them (policies.gangs, each sourced): every replica of a Kubeflow job (or its
``runPolicy.schedulingPolicy.minAvailable``), an MPIJob's launcher and workers, a TrainJob's
``numNodes``, a JobSet's replicatedJobs (replicas × parallelism; a replicatedJob others wait to
complete is not counted), one LeaderWorkerSet group (``size`` pods: leader and workers), a Volcano
Job's ``minAvailable``, a Ray cluster that is gang-scheduled (``ray.io/gang-scheduling-enabled``,
the Volcano integration) or queued, and any job Kueue admits as one workload (label
``kueue.x-k8s.io/queue-name``).  Plain Deployments and Jobs are not gangs.

The check packs whole pods per node by every resource they request — cpu, memory,
ephemeral-storage, GPUs, the node's pod slots — on the nodes and pools each pod set can use
(selectors, taints, cordons), with autoscaled pools counted up to their limits (Karpenter
``spec.limits``, ``limits.nodes``, a declared pool's ``maxNodes``).  It is an upper bound: the
error means the gang can never start, whatever else runs (policies.gangfit).  Without gang
scheduling such a job does worse than wait: the pods that fit start and hold their GPUs forever.

Severity: error; a **warning** where only capacity of unknown size (a declared pool without
``maxNodes``) or unknown GPU shape could make room — the message says what a scale-up must add.
A pod set that fits no node at all is left to the pod rules (gpu-unschedulable and friends).

Failing (16 pods of 8 GPUs; the cluster has 12 eight-GPU nodes)::

    kind: PyTorchJob
    spec:
      pytorchReplicaSpecs:
        Master: {replicas: 1, template: {spec: {containers: [{name: pytorch,
                 resources: {limits: {nvidia.com/gpu: 8}}}]}}}
        Worker: {replicas: 15, template: {spec: {containers: [{name: pytorch,
                 resources: {limits: {nvidia.com/gpu: 8}}}]}}}

Passing (12 pods: one per node)::

        Worker: {replicas: 11, ...}
"""

from __future__ import annotations

from collections.abc import Iterator

from policies import pointer
from policies.applicability import Applies, never
from policies.gangfit import UNBOUNDED, SetRooms, Shortfall, check_gang
from policies.gangs import Gang, gang_of
from policies.rule import NeedsFacts, Option, RuleContext, WorkloadContext
from policies.types import Severity, Violation
from policies.wording import plural

ID = "gpu-gang-unschedulable"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = never  # judges whole workloads (check_workload) only
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "The pods of a gang (a distributed job's workers, a LeaderWorkerSet group) can never all be placed at once."
REMEDIATION = (
    "Run fewer pods together (fewer workers, or more GPUs per pod so fewer pods are needed), or add room for "
    "the rest: more nodes of the kind the pods fit, a higher Karpenter NodePool limit, a larger pool maximum."
)
OPTIONS: tuple[Option, ...] = ()
MAX_ROOMS = 3


def check(ctx: RuleContext) -> Iterator[Violation]:
    """Pod templates are judged by the other rules; this rule judges whole workloads."""
    return iter(())


def relevant(ctx: WorkloadContext) -> bool:
    return _placed_gang(ctx) is not None


def _gpus(s: SetRooms, ctx: WorkloadContext) -> str:
    return " + ".join(f"{n} {r}" for r, n in s.shape if ctx.is_gpu(r))


def _pods(short: Shortfall, ctx: WorkloadContext) -> str:
    """"16 pods × 8 nvidia.com/gpu", or per set when their GPUs differ."""
    shapes = {_gpus(s, ctx) for s in short.sets}
    if len(shapes) == 1:
        each = next(iter(shapes))
        return plural(short.need, "pod") + (f" × {each}" if each else "")
    parts = []
    for s in short.sets:
        gpus = _gpus(s, ctx)
        parts.append(f"{s.pod_set.name} {s.pod_set.need}" + (f" × {gpus}" if gpus else ""))
    return f"{plural(short.need, 'pod')} ({', '.join(parts)})"


def _where(short: Shortfall) -> str:
    """The rooms that hold some pods; when none holds any, the nodes they fit and what bounds each
    to no pod (another resource the pods request, such as an EFA interface)."""
    known = [r for r in short.rooms if r.known]
    useful = sorted((r for r in known if r.pods), key=lambda r: (-r.pods, r.verdict.describe()))
    if not useful:
        useful = sorted((r for r in known if not r.is_pool and r.bound_by), key=lambda r: r.verdict.describe())
    shown = [r.describe() for r in useful[:MAX_ROOMS]]
    if len(useful) > MAX_ROOMS:
        shown.append(f"{len(useful) - MAX_ROOMS} more")
    return "; ".join(shown)


def _places(short: Shortfall) -> str:
    known = [r for r in short.rooms if r.known]
    nodes = sum(len(r.verdict.nodes) for r in known if not r.is_pool)
    pools = sum(1 for r in known if r.is_pool)
    parts = []
    if nodes:
        parts.append(plural(nodes, "node"))
    if pools:
        parts.append(plural(pools, "pool"))
    return " and ".join(parts)


def _fit_phrase(short: Shortfall) -> str:
    places = _places(short)
    if not places:
        return "no node or pool of known size fits them"
    where = _where(short)
    one = places.startswith("1 ") and " and " not in places
    verb = "holds" if one else "hold"
    held = plural(short.room, "such pod")
    return f"the {places} they fit {verb} at most {held} at once" + (f" ({where})" if where else "")


def _scale_up(short: Shortfall) -> str:
    unknown = [r for r in short.rooms if not r.known]
    bounded = [r for r in short.rooms if r.is_pool and r.known and r.pods < UNBOUNDED]
    more = plural(short.missing, "more such pod")
    if unknown:
        names = ", ".join(r.verdict.describe() + (f" ({r.note})" if r.note else "") for r in unknown[:MAX_ROOMS])
        return f"it can start only if {names} adds room for {more}"
    if bounded:
        names = ", ".join(f"{r.verdict.group.representative.pool.origin} "  # type: ignore[union-attr]
                          f"{r.verdict.group.representative.name!r} ({r.note})" for r in bounded[:MAX_ROOMS])
        return f"a scale-up stops at the pool limits: raise those of {names} to hold {more}"
    verb = "needs" if short.missing == 1 else "need"
    return f"{more} {verb} room on nodes of that kind (add nodes, or a pool that can create them)"


def _message(gang: Gang, short: Shortfall, ctx: WorkloadContext) -> str:
    why = gang.why
    if short.whole:
        head = f"{_pods(short, ctx)} must run together ({why})"
    else:
        names = ", ".join(s.pod_set.name for s in short.sets)
        head = (f"{_pods(short, ctx)} of pod set {names} must run with the rest of the gang "
                f"({plural(gang.size, 'pod')}: {why})")
    return f"{head}; {_fit_phrase(short)}; {_scale_up(short)}"


def _at(gang: Gang, short: Shortfall) -> str:
    if short.whole:
        return gang.at()
    return max(short.sets, key=lambda s: s.pod_set.count).pod_set.at()


def _placed_gang(ctx: WorkloadContext) -> Gang | None:
    """The gang whose pods must be placed at once (a queued Job is admitted at once, then placed
    pod by pod: policies.gangs ``Gang.placed_together``)."""
    gang = gang_of(ctx.obj, ctx.templates)
    return gang if gang is not None and gang.placed_together else None


def check_workload(ctx: WorkloadContext) -> Iterator[Violation]:
    gang = _placed_gang(ctx)
    if gang is None:
        return
    short = check_gang(gang, ctx.facts, ctx.is_gpu)
    if short is None:
        return
    yield Violation(
        message=_message(gang, short, ctx),
        path=tuple(pointer.split(_at(gang, short))),
        anchor="object",
        severity=None if short.certain else Severity.WARNING,
        scale_up=_scale_up(short),
    )

"""A pending pod of a gang: how many of its siblings run, what they hold and where, and whether
another partially placed gang holds what this one needs (a deadlock when each holds what the
other's pending pods need).

A gang is known by the labels its controller puts on every pod it creates (each sourced):

* ``kueue.x-k8s.io/pod-group-name`` — a Kueue pod group; the annotation
  ``kueue.x-k8s.io/pod-group-total-count`` says how many pods it has (kubernetes-sigs/kueue
  pkg/controller/jobs/pod/constants/constants.go ``GroupNameLabel``, ``GroupTotalCountAnnotation``);
* ``leaderworkerset.sigs.k8s.io/name`` with ``leaderworkerset.sigs.k8s.io/group-index`` — one
  LeaderWorkerSet group, of ``leaderworkerset.sigs.k8s.io/size`` pods (annotation) (kubernetes-sigs/lws
  api/leaderworkerset/v1/leaderworkerset_types.go ``SetNameLabelKey``, ``GroupIndexLabelKey``,
  ``SizeAnnotationKey``);
* ``jobset.sigs.k8s.io/jobset-name`` — the Jobs and pods of a JobSet (kubernetes-sigs/jobset
  api/jobset/v1alpha2/jobset_types.go ``JobSetNameKey``), which a Kubeflow TrainJob runs as;
* ``training.kubeflow.org/job-name`` (with ``training.kubeflow.org/operator-name``) — the replicas
  of a Kubeflow PyTorchJob, TFJob, MPIJob… (kubeflow/training-operator pkg/apis/kubeflow.org/v1
  common_types.go ``JobNameLabel``, ``OperatorNameLabel``);
* ``volcano.sh/job-name`` — a Volcano Job's pods ("job name key used in pod annotation / labels",
  volcano-sh/apis pkg/apis/batch/v1alpha1/labels.go ``JobNameKey``).

Which pods may use which nodes comes from the fit analysis (policies.pending.fit): a sibling of
another gang "holds what this one needs" when it holds GPUs of the kind the pending pod asks for on
a node that fits the pending pod but for those GPUs (policies.pending.preemption
``holders_in_the_way``).  Pods of a gang do nothing until all run, so two partially placed gangs
that each hold what the other's pending pods need wait for each other for ever: that is a deadlock,
which gang scheduling (Kueue with ``waitForPodsReady``, a coscheduling scheduler plugin) prevents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from policies.pending.fit import FitAnalyser
from policies.pending.objects import PodInfo
from policies.pending.preemption import holders_in_the_way
from policies.pending.state import ClusterState
from policies.shapes import as_dict
from policies.wording import noun, plural

KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_GROUP_COUNT = "kueue.x-k8s.io/pod-group-total-count"
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"
LWS_SIZE = "leaderworkerset.sigs.k8s.io/size"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
KUBEFLOW_JOB = "training.kubeflow.org/job-name"
KUBEFLOW_OPERATOR = "training.kubeflow.org/operator-name"
VOLCANO_JOB = "volcano.sh/job-name"
NODES_SHOWN = 5


@dataclass(frozen=True, slots=True)
class GangKey:
    namespace: str
    label: str  # "key=value" of the label(s) that name it, as people would select it
    what: str  # "JobSet train", "LeaderWorkerSet vllm group 0"
    operator: str = ""  # the Kubeflow operator that made it (two kinds may share a job name)


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def gang_key(pod: PodInfo) -> tuple[GangKey, int | None] | None:
    """The gang the pod belongs to and its size where the pod says it; None: no gang label."""
    meta = as_dict(pod.obj.get("metadata"))
    labels = {str(k): str(v) for k, v in as_dict(meta.get("labels")).items()}
    notes = {str(k): str(v) for k, v in as_dict(meta.get("annotations")).items()}
    ns = pod.namespace
    if group := labels.get(KUEUE_GROUP):
        return GangKey(ns, f"{KUEUE_GROUP}={group}", f"Kueue pod group {group}"), _int(notes.get(KUEUE_GROUP_COUNT))
    if (lws := labels.get(LWS_NAME)) and (index := labels.get(LWS_GROUP)) is not None:
        return (GangKey(ns, f"{LWS_NAME}={lws},{LWS_GROUP}={index}", f"LeaderWorkerSet {lws} group {index}"),
                _int(notes.get(LWS_SIZE)))
    if jobset := labels.get(JOBSET_NAME):
        return GangKey(ns, f"{JOBSET_NAME}={jobset}", f"JobSet {jobset}"), None
    if job := labels.get(KUBEFLOW_JOB):
        kind = pod.owner.partition("/")[0] or "Kubeflow job"
        return GangKey(ns, f"{KUBEFLOW_JOB}={job}", f"{kind} {job}", labels.get(KUBEFLOW_OPERATOR, "")), None
    if job := labels.get(VOLCANO_JOB):
        return GangKey(ns, f"{VOLCANO_JOB}={job}", f"Volcano Job {job}"), None
    return None


@dataclass(slots=True)
class Gang:
    key: GangKey
    bound: list[PodInfo] = field(default_factory=list)
    pending: list[PodInfo] = field(default_factory=list)
    size: int | None = None  # as its pods say (LWS, Kueue pod groups); else the pods seen

    @property
    def seen(self) -> int:
        return len(self.bound) + len(self.pending)

    @property
    def total(self) -> int:
        return max(self.size or 0, self.seen)

    @property
    def partial(self) -> bool:
        return bool(self.bound) and bool(self.pending)

    def held(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for p in self.bound:
            for r, n in p.gpus.items():
                out[r] = out.get(r, 0) + n
        return out

    def describe(self) -> str:
        return f"{self.key.what} ({self.key.label})"


def gangs_of(pods: Iterable[PodInfo]) -> dict[GangKey, Gang]:
    """Gangs of two or more pods among the non-terminal pods."""
    found: dict[GangKey, Gang] = {}
    for pod in pods:
        if pod.terminal:
            continue
        keyed = gang_key(pod)
        if keyed is None:
            continue
        key, size = keyed
        gang = found.setdefault(key, Gang(key))
        (gang.bound if pod.bound else gang.pending).append(pod)
        if size is not None:
            gang.size = max(gang.size or 0, size)
    return {k: g for k, g in found.items() if g.total >= 2}


def _gpus(held: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {r}" for r, n in sorted(held.items())) or "no GPUs"


def _nodes(names: Iterable[str]) -> str:
    unique = sorted(dict.fromkeys(names))
    shown = ", ".join(unique[:NODES_SHOWN])
    return shown + (f" and {len(unique) - NODES_SHOWN} more" if len(unique) > NODES_SHOWN else "")


@dataclass(frozen=True, slots=True)
class GangWait:
    message: str
    nodes: tuple[str, ...]  # where the siblings run, then where the other gang holds what this one needs
    pods: tuple[str, ...]  # the other gang's pods in the way
    deadlock: bool


class GangAnalyser:
    """Gang reasons for the pending pods of one :class:`ClusterState`."""

    def __init__(self, state: ClusterState, fits: FitAnalyser) -> None:
        self.state = state
        self.fits = fits
        self.gangs = gangs_of(state.pods)
        self._of: dict[str, GangKey] = {p.key: k for k, g in self.gangs.items() for p in (*g.bound, *g.pending)}
        self._blocking: dict[str, dict[GangKey, list[tuple[PodInfo, str]]]] = {}

    def gang_of(self, pod: PodInfo) -> Gang | None:
        key = self._of.get(pod.key)
        return self.gangs.get(key) if key is not None else None

    def _in_the_way(self, pod: PodInfo) -> dict[GangKey, list[tuple[PodInfo, str]]]:
        """Pods of other partially placed gangs holding the GPUs ``pod`` asks for on nodes it could use."""
        found = self._blocking.get(pod.key)
        if found is None:
            found = {}
            report = self.fits.analyse(pod)
            own = self._of.get(pod.key)
            for holder in holders_in_the_way(self.state, report):
                key = self._of.get(holder.pod.key)
                if key is None or key == own or not self.gangs[key].partial:
                    continue
                found.setdefault(key, []).append((holder.pod, holder.node))
            self._blocking[pod.key] = found
        return found

    def analyse(self, pod: PodInfo) -> GangWait | None:
        gang = self.gang_of(pod)
        if gang is None:
            return None
        running = len(gang.bound)
        waiting = gang.total - running
        head = f"gang {gang.describe()}: {running} of {plural(gang.total, 'pod')} {noun(running, 'runs', 'run')}"
        if gang.bound:
            where = [p.node_name for p in gang.bound]
            head += (f", holding {_gpus(gang.held())} on {plural(len(set(where)), 'node')} ({_nodes(where)}); "
                     f"{waiting} {noun(waiting, 'waits', 'wait')}, this pod among them: the job makes no progress "
                     "until all run, and the running pods hold their GPUs meanwhile")
        else:
            where = []
            head += f"; all {waiting} wait: the gang starts only when there is room for every pod"
        if gang.size is not None and gang.seen < gang.size:
            missing = gang.size - gang.seen
            head += f" ({plural(missing, 'pod')} of the gang {noun(missing, 'is', 'are')} not created yet)"
        if not gang.partial:
            return GangWait(head, tuple(dict.fromkeys(where)), (), False)
        others = self._in_the_way(pod)
        if not others:
            return GangWait(head, tuple(dict.fromkeys(where)), (), False)
        parts = []
        blockers: list[str] = []
        in_the_way: list[str] = []
        deadlock = False
        for key, holders in sorted(others.items(), key=lambda kv: kv[0].label):
            other = self.gangs[key]
            held: dict[str, int] = {}
            for p, _ in holders:
                for r, n in p.gpus.items():
                    if r in pod.gpus:
                        held[r] = held.get(r, 0) + n
            nodes = [node for _, node in holders]
            own = self._of.get(pod.key)
            mutual = any(own in self._in_the_way(q) for q in other.pending)
            deadlock = deadlock or mutual
            what = (f"gang {other.describe()} is partially placed too ({len(other.bound)} of {other.total} run) and "
                    f"holds {_gpus(held)} on nodes this pod could use ({_nodes(nodes)})")
            if mutual:
                what += ", while this gang holds nodes its pending pods could use: a deadlock, neither can ever "\
                        "complete (gang scheduling, e.g. Kueue's waitForPodsReady or a coscheduling plugin, admits "\
                        "a gang only whole)"
            parts.append(what)
            blockers += nodes
            in_the_way += [p.key for p, _ in holders]
        message = head + "; " + "; ".join(parts)
        if deadlock:
            message = "deadlock: " + message
        return GangWait(message, tuple(dict.fromkeys([*blockers, *where])), tuple(dict.fromkeys(in_the_way)),
                        deadlock)

"""Pod sets and gangs: how many pods of each template an object creates, and which must run together.

``pod_sets(obj, templates)`` maps each extracted pod template to the number of pods its object
creates from it, the way Kueue counts a workload's pod sets (kubernetes-sigs/kueue pkg/controller/
jobs at commit ff69552e: ``PodSets`` of each integration):

* batch/v1 Job: one set of ``min(parallelism, completions)`` pods (parallelism defaults to 1);
  the annotation ``kueue.x-k8s.io/job-min-parallelism`` lets Kueue admit fewer (partial admission);
* Kubeflow PyTorchJob, TFJob, PaddleJob, XGBoostJob, JAXJob and MPIJob: one set per replica type,
  ``replicas`` pods each (default 1);
* JobSet: one set per replicatedJob, ``replicas`` Jobs (default 1) × ``min(parallelism,
  completions)`` pods (kueue jobset ``podsCount``, ``PodsCountPerReplica``);
* LeaderWorkerSet: one group, ``leaderWorkerTemplate.size`` pods (default 1) — the leader (its own
  template when ``leaderTemplate`` is set, else the worker template) and ``size - 1`` workers
  (kueue leaderworkerset ``podSets``); ``replicas`` such groups;
* RayCluster, RayJob, RayService: the head (1) and each worker group's ``replicas`` (default 1)
  × ``numOfHosts`` (kueue raycluster ``effectiveWorkerCount``);
* Volcano Job: each task's ``replicas``;
* TrainJob: ``trainer.numNodes`` nodes of ``resourcesPerNode`` (kubeflow/trainer pkg/apis/trainer/
  v1alpha1 trainjob_types.go; the runtime decides when it is absent: no pod set);
  (Cluster)TrainingRuntime: its JobSet, with the ``node`` replicatedJob run ``mlPolicy.numNodes``
  times (default 1; trainingruntime_types.go ``MLPolicy.NumNodes``);
* Pods, Deployments, StatefulSets and the other controllers: one set of ``replicas`` (a Pod: 1).

``gang_of(obj, templates)`` says which of them must run at once, from each project's own gang
semantics (sources inline below).  Plain Deployments and Jobs are not gangs; a job Kueue manages
(label ``kueue.x-k8s.io/queue-name``) is: Kueue admits its pod sets as one workload, all or
nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies import pointer
from policies.podspec import PodTemplate
from policies.queue_facts import QUEUE_LABEL
from policies.shapes import as_dict, as_list, text

KUBEFLOW_REPLICA_SPECS = {
    "PyTorchJob": "pytorchReplicaSpecs",
    "TFJob": "tfReplicaSpecs",
    "PaddleJob": "paddleReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs",
    "JAXJob": "jaxReplicaSpecs",
    "MPIJob": "mpiReplicaSpecs",
}
RAY_CLUSTER_SPEC = {"RayCluster": "/spec", "RayJob": "/spec/rayClusterSpec", "RayService": "/spec/rayClusterConfig"}
JOB_MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"  # kueue job_controller.go
RAY_GANG_LABEL = "ray.io/gang-scheduling-enabled"
RAY_SCHEDULER_LABEL = "ray.io/scheduler-name"
MAX_COUNT = 1_000_000  # counts beyond this are nonsense (LWS validates replicas <= 1e6 likewise)


@dataclass(frozen=True, slots=True)
class PodSet:
    """``count`` pods of ``pod``; ``need`` of them (at most ``count``) must run with the rest of the gang."""

    name: str
    pod: PodTemplate
    count: int
    need: int
    count_path: str  # RFC 6901 pointer of the field that sets the count ("" when it is defaulted)

    def at(self) -> str:
        """Where a finding about this set's size points: its count field, else its template."""
        return self.count_path or self.pod.spec_pointer


@dataclass(frozen=True, slots=True)
class Gang:
    """Pod sets that must run together: ``need`` pods in all (at least each set's ``need``)."""

    kind: str
    pod_sets: tuple[PodSet, ...]
    need: int
    why: str  # what makes it a gang, for messages: "all replicas of a PyTorchJob"
    copies: int = 1  # identical gangs the object creates (LeaderWorkerSet replicas)
    need_path: str = ""  # the field that sets ``need`` when it is not the sum (minAvailable)
    # Whether the pods must also be *placed* at once.  Kueue admits a queued workload's pod sets as
    # one (quota for all, or none), but once admitted its pods are scheduled one by one unless the
    # cluster opts in to all-or-nothing with ready pods (``waitForPodsReady``, an opt-in:
    # kubernetes-sigs/kueue#433, "an opt-in mechanism to avoid concurrent pod scheduling"): a queued
    # Job of parallelism 3 on one free GPU runs its pods in turn.  Such a gang is judged against
    # quotas and queues, not against node capacity.
    placed_together: bool = True

    @property
    def size(self) -> int:
        return sum(p.count for p in self.pod_sets)

    def at(self) -> str:
        """Where a finding about the whole gang points: its minimum, else its largest set's count."""
        if self.need_path:
            return self.need_path
        biggest = max(self.pod_sets, key=lambda p: (p.count, bool(p.count_path)))
        return biggest.at()


def _count(value: Any, default: int) -> int | None:
    """A replica count; None for a value of the wrong type (the object is judged without it)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return min(max(value, 0), MAX_COUNT)


def _at(base: str, *segments: Any) -> str:
    return pointer.join(base, segments)


def _field(obj: Any, path: str, key: str) -> tuple[Any, str]:
    """The value under ``key`` of the mapping at ``path``, and its pointer ("" when absent)."""
    try:
        node = pointer.resolve(obj, path) if path else obj
    except KeyError:
        return None, ""
    node = as_dict(node)
    return (node[key], _at(path, key)) if key in node else (None, "")


class _Templates:
    def __init__(self, templates: Sequence[PodTemplate]) -> None:
        self.by_pointer = {t.spec_pointer: t for t in templates}

    def template(self, template_path: str) -> PodTemplate | None:
        """The extracted template whose PodTemplateSpec is at ``template_path``."""
        return self.by_pointer.get(template_path + "/spec") or self.by_pointer.get(template_path)


def labels_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    return as_dict(as_dict(obj.get("metadata")).get("labels"))


def queue_name(obj: Mapping[str, Any]) -> str:
    """The Kueue LocalQueue the object is submitted to (label ``kueue.x-k8s.io/queue-name``), or ""."""
    value = labels_of(obj).get(QUEUE_LABEL)
    return text(value, 253) if isinstance(value, str) else ""


def _kubeflow(obj: dict[str, Any], kind: str, t: _Templates) -> list[PodSet] | None:
    key = KUBEFLOW_REPLICA_SPECS[kind]
    specs = as_dict(as_dict(obj.get("spec")).get(key))
    elastic = as_dict(as_dict(obj.get("spec")).get("elasticPolicy"))
    out = []
    # Kueue orders MPIJob sets Launcher, Worker (mpijob_controller.go orderedReplicaTypes).
    names = sorted(specs, key=lambda n: (n not in ("Launcher", "Master", "Chief", "PS"), str(n)))
    for role in names:
        spec = as_dict(specs[role])
        pod = t.template(_at("/spec", key, role, "template"))
        count = _count(spec.get("replicas"), 1)
        if pod is None or count is None:
            continue
        need = count
        # PyTorchJob elasticPolicy.minReplicas: "lower limit for the number of replicas to which the
        # training job can scale down" (kubeflow/trainer ee116291 pytorch_types.go ElasticPolicy).
        minimum = _count(elastic.get("minReplicas"), count) if role == "Worker" and kind == "PyTorchJob" else None
        if minimum is not None:
            need = min(need, minimum)
        path = _at("/spec", key, role, "replicas") if "replicas" in spec else ""
        out.append(PodSet(str(role), pod, count, need, path))
    return out


def _job_count(job_spec: Mapping[str, Any]) -> int | None:
    """kueue job ``podsCount``: parallelism (default 1), at most completions."""
    parallelism = _count(job_spec.get("parallelism"), 1)
    completions = _count(job_spec.get("completions"), parallelism if parallelism is not None else 1)
    if parallelism is None or completions is None:
        return None
    return min(parallelism, completions)


def _job(obj: dict[str, Any], t: _Templates) -> list[PodSet] | None:
    spec = as_dict(obj.get("spec"))
    pod = t.template("/spec/template")
    count = _job_count(spec)
    if pod is None or count is None:
        return None
    need = count
    minimum = as_dict(as_dict(obj.get("metadata")).get("annotations")).get(JOB_MIN_PARALLELISM)
    if isinstance(minimum, str) and minimum.isdigit() and len(minimum) < 8:
        need = min(need, int(minimum))
    path = "/spec/parallelism" if "parallelism" in spec else ""
    return [PodSet("main", pod, count, need, path)]


def _replicated_jobs(obj: dict[str, Any], base: str, t: _Templates, node_count: tuple[int, str] | None = None
                     ) -> list[PodSet] | None:
    """JobSet ``replicatedJobs`` under ``base`` (a JobSet's spec, or a TrainingRuntime's template spec).

    A replicatedJob another one waits for until it is ``Complete`` (``dependsOn``, jobset_types.go:
    "the ReplicatedJob will be created only after the referenced ReplicatedJobs reach their desired
    state") has finished before that one starts: it is not part of the gang.
    """
    try:
        jobs = as_list(pointer.resolve(obj, base + "/replicatedJobs"))
    except KeyError:
        return None
    finished_first = {
        str(as_dict(d).get("name"))
        for rj in jobs
        for d in as_list(as_dict(rj).get("dependsOn"))
        if as_dict(d).get("status") == "Complete"
    }
    out = []
    for i, rj in enumerate(jobs):
        rj = as_dict(rj)
        name = rj.get("name")
        name = name if isinstance(name, str) else str(i)
        job_spec = as_dict(as_dict(rj.get("template")).get("spec"))
        pod = t.template(_at(base, "replicatedJobs", i, "template", "spec", "template"))
        replicas = _count(rj.get("replicas"), 1)
        per_job = _job_count(job_spec)
        if pod is None or replicas is None or per_job is None:
            continue
        path = _at(base, "replicatedJobs", i, "replicas") if "replicas" in rj else ""
        if node_count is not None and name == "node":
            per_job, path = node_count
            replicas = 1
        elif not path and "parallelism" in job_spec:
            path = _at(base, "replicatedJobs", i, "template", "spec", "parallelism")
        count = replicas * per_job
        need = 0 if name in finished_first else count
        out.append(PodSet(name, pod, count, need, path))
    return out


def _lws(obj: dict[str, Any], t: _Templates) -> tuple[list[PodSet], int] | None:
    spec = as_dict(obj.get("spec"))
    lwt = as_dict(spec.get("leaderWorkerTemplate"))
    size = _count(lwt.get("size"), 1)
    groups = _count(spec.get("replicas"), 1)
    worker = t.template("/spec/leaderWorkerTemplate/workerTemplate")
    leader = t.template("/spec/leaderWorkerTemplate/leaderTemplate")
    if size is None or groups is None or worker is None or size < 1:
        return None
    path = "/spec/leaderWorkerTemplate/size" if "size" in lwt else ""
    if leader is None:
        return [PodSet("leader+workers", worker, size, size, path)], groups
    return [PodSet("leader", leader, 1, 1, path), PodSet("workers", worker, size - 1, size - 1, path)], groups


def _ray(obj: dict[str, Any], kind: str, t: _Templates) -> list[PodSet] | None:
    base = RAY_CLUSTER_SPEC[kind]
    try:
        cluster = as_dict(pointer.resolve(obj, base))
    except KeyError:
        return None
    out = []
    head = t.template(_at(base, "headGroupSpec", "template"))
    if head is not None:
        out.append(PodSet("head", head, 1, 1, ""))
    autoscaling = cluster.get("enableInTreeAutoscaling") is True
    for i, group in enumerate(as_list(cluster.get("workerGroupSpecs"))):
        group = as_dict(group)
        pod = t.template(_at(base, "workerGroupSpecs", i, "template"))
        replicas = _count(group.get("replicas"), 1)
        hosts = _count(group.get("numOfHosts"), 1) or 1
        if pod is None or replicas is None:
            continue
        count = replicas * hosts
        # "If autoscaling is enabled, minReplicas will be used for gang scheduling, otherwise the
        # desired replicas" (ray-project/ray doc/source/cluster/kubernetes/k8s-ecosystem/volcano.md).
        minimum = _count(group.get("minReplicas"), 0) if autoscaling else None
        need = count if minimum is None else min(count, minimum * hosts)
        key = "minReplicas" if autoscaling and "minReplicas" in group else "replicas"
        path = _at(base, "workerGroupSpecs", i, key) if key in group else ""
        name = group.get("groupName")
        out.append(PodSet(name if isinstance(name, str) else f"worker-{i}", pod, count, need, path))
    return out


def _volcano(obj: dict[str, Any], t: _Templates) -> list[PodSet] | None:
    out = []
    for i, task in enumerate(as_list(as_dict(obj.get("spec")).get("tasks"))):
        task = as_dict(task)
        pod = t.template(_at("/spec/tasks", i, "template"))
        replicas = _count(task.get("replicas"), 0)
        if pod is None or replicas is None:
            continue
        # volcano pkg/webhooks/admission/jobs/mutate/mutate_job.go: a task's minAvailable defaults to
        # its replicas (or minPartitions × partitionSize).
        minimum = _count(task.get("minAvailable"), replicas)
        need = replicas if minimum is None else min(replicas, minimum)
        name = task.get("name")
        path = _at("/spec/tasks", i, "replicas") if "replicas" in task else ""
        out.append(PodSet(name if isinstance(name, str) else f"task-{i}", pod, replicas, need, path))
    return out


def _replicas(obj: dict[str, Any], t: _Templates, template_path: str, default: int) -> list[PodSet] | None:
    spec = as_dict(obj.get("spec"))
    pod = t.template(template_path)
    count = _count(spec.get("replicas"), default)
    if pod is None or count is None:
        return None
    return [PodSet("main", pod, count, count, "/spec/replicas" if "replicas" in spec else "")]


def pod_sets(obj: dict[str, Any], templates: Sequence[PodTemplate]) -> tuple[PodSet, ...] | None:
    """The pod sets of ``obj`` (see the module docstring); None for kinds whose counts are not known."""
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    group = api_version.rpartition("/")[0]
    t = _Templates(templates)
    found: list[PodSet] | None = None
    if group == "batch" and kind == "Job":
        found = _job(obj, t)
    elif group == "kubeflow.org" and kind in KUBEFLOW_REPLICA_SPECS:
        found = _kubeflow(obj, kind, t)
    elif group == "jobset.x-k8s.io" and kind == "JobSet":
        found = _replicated_jobs(obj, "/spec", t)
    elif group == "leaderworkerset.x-k8s.io" and kind == "LeaderWorkerSet":
        lws = _lws(obj, t)
        found = lws[0] if lws is not None else None
    elif group == "ray.io" and kind in RAY_CLUSTER_SPEC:
        found = _ray(obj, kind, t)
    elif group == "batch.volcano.sh" and kind == "Job":
        found = _volcano(obj, t)
    elif group == "trainer.kubeflow.org" and kind == "TrainJob":
        found = _train_job(obj, t)
    elif group == "trainer.kubeflow.org" and kind in ("TrainingRuntime", "ClusterTrainingRuntime"):
        spec = as_dict(obj.get("spec"))
        policy = as_dict(spec.get("mlPolicy"))
        nodes = _count(policy.get("numNodes"), 1)
        node_count = (nodes, "/spec/mlPolicy/numNodes" if "numNodes" in policy else "") if nodes is not None else None
        found = _replicated_jobs(obj, "/spec/template/spec", t, node_count)
    elif (group, kind) in (("", "Pod"),):
        pod = t.template("")
        found = [PodSet("main", pod, 1, 1, "")] if pod is not None else None
    elif (group, kind) in (("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "ReplicaSet"),
                           ("", "ReplicationController")):
        found = _replicas(obj, t, "/spec/template", 1)
    return tuple(found) if found else None


def _train_job(obj: dict[str, Any], t: _Templates) -> list[PodSet] | None:
    trainer = as_dict(as_dict(obj.get("spec")).get("trainer"))
    pod = t.by_pointer.get("/spec/trainer")
    if pod is None or "numNodes" not in trainer:
        return None
    count = _count(trainer.get("numNodes"), 1)
    if count is None:
        return None
    return [PodSet("node", pod, count, count, "/spec/trainer/numNodes")]


def _ray_gang(obj: dict[str, Any]) -> bool:
    labels = labels_of(obj)
    # ray-project/kuberay ray-operator/controllers/ray/utils/constant.go RayClusterGangSchedulingEnabled;
    # the Volcano integration creates a PodGroup for every RayCluster labelled ray.io/scheduler-name:
    # volcano (ray-project/ray doc/source/cluster/kubernetes/k8s-ecosystem/volcano.md).
    return labels.get(RAY_GANG_LABEL) == "true" or labels.get(RAY_SCHEDULER_LABEL) == "volcano"


def _min_available(obj: dict[str, Any], path: str) -> tuple[int | None, str]:
    value, at = _field(obj, path, "minAvailable")
    if value is None:
        return None, ""
    count = _count(value, 0)
    return count, at if count is not None else ""


def gang_of(obj: dict[str, Any], templates: Sequence[PodTemplate]) -> Gang | None:
    """The pods of ``obj`` that must run together, or None when it is no gang (or its size is unknown)."""
    sets = pod_sets(obj, templates)
    if not sets:
        return None
    kind = str(obj.get("kind"))
    group = str(obj.get("apiVersion")).rpartition("/")[0]
    queued = bool(queue_name(obj))
    size = sum(p.count for p in sets)
    copies = 1
    need = sum(p.need for p in sets)
    need_path = ""
    together = True
    if group == "kubeflow.org" and kind in KUBEFLOW_REPLICA_SPECS:
        why = f"all replicas of {'an' if kind.startswith('MPI') else 'a'} {kind}"
        # kubeflow/trainer ee116291 pkg/controller.v1/common/job.go: the PodGroup's minMember is the
        # total of replicas unless runPolicy.schedulingPolicy.minAvailable says otherwise, and then
        # any minAvailable of them (highest priority first) make up the gang.
        minimum, at = _min_available(obj, "/spec/runPolicy/schedulingPolicy")
        if minimum:
            sets = tuple(dataclasses.replace(p, need=0) for p in sets)
            need, need_path = min(minimum, size), at
    elif group == "jobset.x-k8s.io":
        why = "the replicated Jobs of a JobSet run together"
    elif group == "leaderworkerset.x-k8s.io":
        lws = _lws(obj, _Templates(templates))
        copies = lws[1] if lws is not None else 1
        why = f"one LeaderWorkerSet group (size {size}) starts and restarts as a unit"
    elif group == "batch.volcano.sh":
        why = "a Volcano Job's minAvailable pods are gang-scheduled"
        # mutate_job.go: the job's minAvailable defaults to the sum of its tasks' minAvailable.
        minimum, at = _min_available(obj, "/spec")
        if minimum:
            need, need_path = max(min(minimum, size), need), at
    elif group == "ray.io":
        if not (_ray_gang(obj) or queued):
            return None
        why = "a gang-scheduled Ray cluster (head and workers)" if _ray_gang(obj) else (
            "Kueue admits the Ray cluster as one workload")
        together = _ray_gang(obj)
    elif group == "trainer.kubeflow.org":
        why = f"the training nodes of a {kind} run together"
    elif queued and not (group == "apps" and kind == "Deployment") and kind != "Pod":
        why = f"Kueue admits the {kind}'s pods as one workload"
        together = False
    else:
        return None
    if need <= 1:
        return None  # one pod is judged by the pod rules
    return Gang(kind, sets, need, why, copies, need_path, placed_together=together)

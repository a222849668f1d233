"""policies.gangs: pod sets counted as Kueue counts them, and which objects are gangs.

Real manifests come from the public corpus (tests/corpus, sources in SOURCES.tsv): the Kubeflow
examples, mpi-operator's tensorflow-benchmarks, Volcano's MindSpore GPU job, Kueue's and GKE's
LeaderWorkerSets, Kueue's provisioning sample Job, and kubernetes-sigs/lws's vLLM example.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policies.gangs import gang_of, pod_sets, queue_name
from policies.podspec import extract
from tests.support.paths import CORPUS, load_yaml_docs

REAL = CORPUS / "real"


def _doc(path: str, kind: str | None = None) -> dict[str, Any]:
    docs = load_yaml_docs(CORPUS / path)
    found: dict[str, Any] = next(d for d in docs if kind is None or d.get("kind") == kind)
    return found


def _sets(obj: dict[str, Any]) -> list[tuple[str, int, int, str]]:
    found = pod_sets(obj, extract(obj))
    assert found is not None
    return [(p.name, p.count, p.need, p.count_path) for p in found]


def test_kubeflow_jobs_count_every_replica_type() -> None:
    job = _doc("real/kubeflow__trainer__examples__pytorch__mnist__v1__pytorch_job_mnist_nccl.yaml")
    assert _sets(job) == [("Master", 1, 1, "/spec/pytorchReplicaSpecs/Master/replicas"),
                          ("Worker", 1, 1, "/spec/pytorchReplicaSpecs/Worker/replicas")]
    gang = gang_of(job, extract(job))
    assert gang is not None and gang.need == 2 and gang.why == "all replicas of a PyTorchJob"


def test_mpijob_launcher_comes_first_and_counts() -> None:
    job = _doc("real/kubeflow__mpi-operator__examples__v2beta1__tensorflow-benchmarks__tensorflow-benchmarks.yaml")
    assert [(n, c) for n, c, _, _ in _sets(job)] == [("Launcher", 1), ("Worker", 2)]
    gang = gang_of(job, extract(job))
    assert gang is not None and gang.need == 3 and gang.why == "all replicas of an MPIJob"


def test_min_available_lets_any_pods_make_up_the_gang() -> None:
    job = _doc("real/kubeflow__trainer__examples__tensorflow__distribution_strategy__multi_worker_tfjob.yaml")
    job = copy.deepcopy(job)
    job["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 6
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"minAvailable": 4}}
    gang = gang_of(job, extract(job))
    assert gang is not None
    assert gang.need == 4 and gang.at() == "/spec/runPolicy/schedulingPolicy/minAvailable"
    assert all(p.need == 0 for p in gang.pod_sets)


def test_pytorch_elastic_min_replicas_is_the_workers_need() -> None:
    job = copy.deepcopy(_doc("real/NVIDIA__KAI-Scheduler__docs__batch__pytorch-job.yaml"))
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 2}
    assert [(n, c, need) for n, c, need, _ in _sets(job)] == [("Master", 1, 1), ("Worker", 2, 1)]


def test_volcano_job_min_available() -> None:
    job = _doc("real/volcano-sh__volcano__example__MindSpore-example__mindspore_gpu__mindspore-gpu.yaml")
    assert [(n, c, need) for n, c, need, _ in _sets(job)] == [("mpimaster", 1, 1), ("mpiworker", 2, 2)]
    gang = gang_of(job, extract(job))
    assert gang is not None and gang.need == 3 and gang.at() == "/spec/minAvailable"


def test_leaderworkerset_group_is_the_gang() -> None:
    lws = _doc("real/GoogleCloudPlatform__kubernetes-engine-samples__ai-ml__llm-multihost-gpus-tensorrt-llm__lws.yaml",
               "LeaderWorkerSet")
    assert [(n, c) for n, c, _, _ in _sets(lws)] == [("leader", 1), ("workers", 1)]
    gang = gang_of(lws, extract(lws))
    assert gang is not None and gang.need == 2 and gang.copies == 1
    vllm = _doc("gangs/kubernetes-sigs__lws__docs__examples__vllm__GPU__lws.yaml", "LeaderWorkerSet")
    gang = gang_of(vllm, extract(vllm))
    assert gang is not None and gang.need == 2 and gang.copies == 2
    assert gang.at() == "/spec/leaderWorkerTemplate/size"


def test_leaderworkerset_without_leader_template_uses_the_worker_template_for_all() -> None:
    lws = copy.deepcopy(_doc("gangs/kubernetes-sigs__lws__docs__examples__vllm__GPU__lws.yaml", "LeaderWorkerSet"))
    del lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    lws["spec"]["leaderWorkerTemplate"]["size"] = 4
    assert _sets(lws) == [("leader+workers", 4, 4, "/spec/leaderWorkerTemplate/size")]


def test_jobset_counts_replicas_times_parallelism_and_drops_stages_that_finish_first() -> None:
    jobset: dict[str, Any] = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
        "spec": {"replicatedJobs": [
            {"name": "init", "template": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}},
            {"name": "workers", "replicas": 2, "dependsOn": [{"name": "init", "status": "Complete"}],
             "template": {"spec": {"parallelism": 4, "completions": 3,
                                   "template": {"spec": {"containers": [{"name": "c"}]}}}}},
        ]},
    }
    assert _sets(jobset) == [("init", 1, 0, ""), ("workers", 6, 6, "/spec/replicatedJobs/1/replicas")]
    gang = gang_of(jobset, extract(jobset))
    assert gang is not None and gang.need == 6


def test_kueue_job_is_a_gang_and_min_parallelism_lowers_its_need() -> None:
    job = copy.deepcopy(_doc("real/kubernetes-sigs__kueue__site__static__examples__provisioning__sample-job.yaml"))
    assert queue_name(job) == "user-queue"
    gang = gang_of(job, extract(job))
    assert gang is not None and gang.need == 3 and gang.at() == "/spec/parallelism"
    job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = "2"
    gang = gang_of(job, extract(job))
    assert gang is not None and gang.need == 2
    del job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    assert gang_of(job, extract(job)) is None  # a plain Job is no gang


@pytest.mark.parametrize(("labels", "gang"), [
    ({}, False),
    ({"ray.io/gang-scheduling-enabled": "true"}, True),
    ({"ray.io/scheduler-name": "volcano"}, True),
    ({"kueue.x-k8s.io/queue-name": "q"}, True),
])
def test_ray_clusters_are_gangs_only_when_gang_scheduled_or_queued(labels: dict[str, str], gang: bool) -> None:
    cluster: dict[str, Any] = {
        "apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "r", "labels": labels},
        "spec": {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "head"}]}}},
                 "workerGroupSpecs": [{"groupName": "gpu", "replicas": 3, "numOfHosts": 2,
                                       "template": {"spec": {"containers": [{"name": "w"}]}}}]},
    }
    assert [(n, c) for n, c, _, _ in _sets(cluster)] == [("head", 1), ("gpu", 6)]
    assert (gang_of(cluster, extract(cluster)) is not None) is gang


def test_ray_autoscaling_gangs_count_min_replicas() -> None:
    cluster: dict[str, Any] = {
        "apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"name": "r", "labels": {"ray.io/scheduler-name": "volcano"}},
        "spec": {"enableInTreeAutoscaling": True,
                 "headGroupSpec": {"template": {"spec": {"containers": [{"name": "head"}]}}},
                 "workerGroupSpecs": [{"groupName": "gpu", "replicas": 8, "minReplicas": 2,
                                       "template": {"spec": {"containers": [{"name": "w"}]}}}]},
    }
    gang = gang_of(cluster, extract(cluster))
    assert gang is not None and gang.need == 3 and gang.pod_sets[1].count_path == "/spec/workerGroupSpecs/0/minReplicas"


def test_trainjob_needs_num_nodes_and_runtimes_use_ml_policy() -> None:
    job: dict[str, Any] = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "t"},
                           "spec": {"trainer": {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 8}}}}}
    assert pod_sets(job, extract(job)) is None  # the runtime decides
    job["spec"]["trainer"]["numNodes"] = 4
    assert _sets(job) == [("node", 4, 4, "/spec/trainer/numNodes")]
    runtime = _doc("real/kubeflow__trainer__manifests__base__runtimes__torchtune__llama3_2__llama3_2_1B.yaml")
    sets = {n: (c, need) for n, c, need, _ in _sets(runtime)}
    assert sets["node"][0] == (runtime["spec"].get("mlPolicy", {}).get("numNodes") or 1)


def test_deployments_and_pods_are_no_gangs() -> None:
    deployment: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                                  "spec": {"replicas": 5, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    assert _sets(deployment) == [("main", 5, 5, "/spec/replicas")]
    assert gang_of(deployment, extract(deployment)) is None
    deployment["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "q"}  # Kueue admits each pod alone
    assert gang_of(deployment, extract(deployment)) is None


@pytest.mark.parametrize("replicas", ["3", -1, True, 2.5])
def test_counts_of_the_wrong_type_are_not_guessed(replicas: Any) -> None:
    job: dict[str, Any] = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p"},
                           "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": replicas, "template": {
                               "spec": {"containers": [{"name": "c"}]}}}}}}
    found = pod_sets(job, extract(job))
    if replicas == -1:
        assert found is not None and found[0].count == 0
    else:
        assert found is None

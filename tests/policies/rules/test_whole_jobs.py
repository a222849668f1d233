"""gpu-gang-unschedulable, gpu-quota-exceeded and gpu-queue-unadmittable on real manifests.

The workloads are upstream examples from the public corpus (tests/corpus/real and gangs, sources in
SOURCES.tsv): kubernetes-sigs/lws's vLLM LeaderWorkerSet, Kueue's provisioning sample Job and TAS
LeaderWorkerSet, Volcano's MindSpore GPU job, the Kubeflow PyTorchJob mnist example.  The Kueue
setups they are paired with are Kueue's own (tests/corpus/queues).  Where a test changes a count or
a namespace to make a case, it says so.
"""

from __future__ import annotations

import copy
from typing import Any

from policies import ClusterFacts, Config, evaluate
from policies.facts_build import facts_from_objects
from policies.types import Severity
from tests.support.paths import CORPUS, load_yaml_docs

QUEUES = CORPUS / "queues"


def h100(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "status": {"allocatable": {"cpu": "192", "memory": "2048Gi", "ephemeral-storage": "7000Gi",
                                       "pods": "110", "nvidia.com/gpu": "8"}}}


def doc(path: str, kind: str) -> dict[str, Any]:
    found: dict[str, Any] = next(d for d in load_yaml_docs(CORPUS / path) if d.get("kind") == kind)
    return copy.deepcopy(found)


def findings(obj: dict[str, Any], facts: ClusterFacts, rule: str) -> list[Any]:
    return [f for f in evaluate(obj, Config(), facts).findings if f.rule == rule]


def test_vllm_leaderworkerset_groups_need_two_nodes_of_room_each() -> None:
    lws = doc("gangs/kubernetes-sigs__lws__docs__examples__vllm__GPU__lws.yaml", "LeaderWorkerSet")
    # Each pod asks for 8 GPUs, 125 cpu, 1124Gi memory and 800Gi ephemeral storage: one per node.
    one = facts_from_objects([h100("n0")])
    (f,) = findings(lws, one, "gpu-gang-unschedulable")
    assert f.severity is Severity.ERROR and f.path == "/spec/leaderWorkerTemplate/size"
    assert f.message.startswith("2 pods × 8 nvidia.com/gpu must run together (one LeaderWorkerSet group (size 2)")
    assert findings(lws, facts_from_objects([h100("n0"), h100("n1")]), "gpu-gang-unschedulable") == []


def test_memory_not_gpus_can_bound_a_gang() -> None:
    lws = doc("gangs/kubernetes-sigs__lws__docs__examples__vllm__GPU__lws.yaml", "LeaderWorkerSet")
    # A node with 16 GPUs and 400 cpus (room for two such pods) whose 2048Gi holds one pod of 1124Gi.
    big = [h100("n0")]
    big[0]["status"]["allocatable"].update({"nvidia.com/gpu": "16", "cpu": "400"})
    (f,) = findings(lws, facts_from_objects(big), "gpu-gang-unschedulable")
    assert "1 per node by memory" in f.message



def test_nodes_that_hold_no_pod_say_what_bounds_them() -> None:
    lws = doc("gangs/kubernetes-sigs__lws__docs__examples__vllm__GPU__lws.yaml", "LeaderWorkerSet")
    # Two nodes with GPUs to spare but 500Gi of ephemeral storage each: no pod of 800Gi fits on either.
    small = [h100("n0"), h100("n1")]
    for node in small:
        node["status"]["allocatable"]["ephemeral-storage"] = "500Gi"
    (f,) = findings(lws, facts_from_objects(small), "gpu-gang-unschedulable")
    assert "the 2 nodes they fit hold at most 0 such pods at once (" in f.message
    assert "0 per node by ephemeral-storage" in f.message, f.message

def test_volcano_mindspore_job_gang_of_three() -> None:
    job = doc("real/volcano-sh__volcano__example__MindSpore-example__mindspore_gpu__mindspore-gpu.yaml", "Job")
    one_gpu = h100("n0")
    one_gpu["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    (f,) = findings(job, facts_from_objects([one_gpu]), "gpu-gang-unschedulable")
    # The workers alone do not fit: the finding points at their count.
    assert f.path == "/spec/tasks/1/replicas" and "2 pods × 1 nvidia.com/gpu of pod set mpiworker" in f.message
    assert findings(job, facts_from_objects([h100("n0")]), "gpu-gang-unschedulable") == []


def kueue_facts(setup: str, *nodes: dict[str, Any], quota: dict[str, Any] | None = None) -> ClusterFacts:
    objects = load_yaml_docs(QUEUES / f"kubernetes-sigs__kueue__site__static__examples__{setup}")
    return facts_from_objects([*nodes, *objects, *([quota] if quota else [])])


def test_kueue_provisioning_sample_job_is_admitted_within_nine_gpus() -> None:
    job = doc("real/kubernetes-sigs__kueue__site__static__examples__provisioning__sample-job.yaml", "Job")
    facts = kueue_facts("provisioning__provisioning-setup.yaml", h100("n0"), h100("n1"))
    assert findings(job, facts, "gpu-queue-unadmittable") == []  # 3 pods × 1 GPU of 9
    job["spec"]["parallelism"] = job["spec"]["completions"] = 10  # changed: 10 pods × 1 GPU
    (f,) = findings(job, facts, "gpu-queue-unadmittable")
    assert f.severity is Severity.ERROR and f.path == "/spec/parallelism"
    assert ("insufficient quota for nvidia.com/gpu in flavor default-flavor: pod set main asks for 10 (10 pods), "
            "the ClusterQueue can reach at most 9 (9 nominal; no cohort to borrow from)") in f.message


def test_kueue_queue_name_of_another_namespace_is_a_warning() -> None:
    job = doc("real/kubernetes-sigs__kueue__site__static__examples__provisioning__sample-job.yaml", "Job")
    job["metadata"]["namespace"] = "team-a"  # changed: the LocalQueue user-queue is in default
    facts = kueue_facts("provisioning__provisioning-setup.yaml", h100("n0"))
    (f,) = findings(job, facts, "gpu-queue-unadmittable")
    assert f.severity is Severity.WARNING and f.path == "/metadata/labels/kueue.x-k8s.io~1queue-name"
    assert "names LocalQueue 'user-queue', which does not exist in namespace team-a (it has none)" in f.message


def test_kueue_cpu_only_queue_never_admits_a_gpu_job() -> None:
    job = doc("real/kubernetes-sigs__kueue__site__static__examples__provisioning__sample-job.yaml", "Job")
    job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "user-queue"
    facts = kueue_facts("admin__single-clusterqueue-setup.yaml", h100("n0"))
    (f,) = findings(job, facts, "gpu-queue-unadmittable")
    assert "resource nvidia.com/gpu unavailable in ClusterQueue cluster-queue" in f.message


def test_kueue_tas_flavor_leads_to_gpu_nodes_only_where_they_carry_its_node_labels() -> None:
    lws = doc("real/kubernetes-sigs__kueue__site__static__examples__serving-workloads__sample-leaderworkerset-tas.yaml",
              "LeaderWorkerSet")
    lws["metadata"]["namespace"] = "default"  # the LocalQueue's namespace (the sample names none)
    unlabelled = kueue_facts("tas__sample-gpu-queues.yaml", h100("n0"))
    (f,) = findings(lws, unlabelled, "gpu-queue-unadmittable")
    assert "flavor tas-flavor (nodeLabels cloud.provider.com/node-group=tas-group) leads to no node" in f.message
    labelled = kueue_facts("tas__sample-gpu-queues.yaml", h100("n0", **{"cloud.provider.com/node-group": "tas-group"}))
    assert findings(lws, labelled, "gpu-queue-unadmittable") == []


def test_quota_on_the_kubeflow_mnist_example() -> None:
    job = doc("real/kubeflow__trainer__examples__pytorch__mnist__v1__pytorch_job_mnist_nccl.yaml", "PyTorchJob")
    job["metadata"]["namespace"] = "ml"  # changed: the example names no namespace
    quota: dict[str, Any] = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "ml"},
             "spec": {"hard": {"requests.nvidia.com/gpu": "1"}}}
    facts = facts_from_objects([h100("n0"), quota])
    (f,) = findings(job, facts, "gpu-quota-exceeded")
    assert f.severity is Severity.ERROR and "the 2 pods that must run together" in f.message
    quota["spec"]["hard"]["requests.nvidia.com/gpu"] = "2"
    assert findings(job, facts_from_objects([h100("n0"), quota]), "gpu-quota-exceeded") == []

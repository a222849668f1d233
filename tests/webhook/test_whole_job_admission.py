"""``gpuguard serve`` judging whole jobs at admission, over real TLS, with facts watched live.

The server is a real subprocess (``--kubeconfig`` pointing at the in-process API server, which serves
the gang rule's fixture cluster — 12 eight-GPU H100 nodes, 2 L40S nodes, a Karpenter NodePool capped
at 32 GPUs — plus a namespace ResourceQuota and Kueue's queues).  Reviews are shaped as
kube-apiserver sends them (tests/support/admission.py).  The jobs are the rule fixtures' (the issue's
cases); the Kueue objects are Kueue's own examples (tests/corpus/queues, kubernetes-sigs/kueue
site/static/examples @ ff69552e): admin/single-clusterqueue-setup.yaml as published, and the TAS
GPU setup with its flavor's nodeLabels pointed at the fixture's H100 nodes.

The whole-job rules deny a CREATE at error only, never an UPDATE, a DELETE or what a controller
creates, and their warnings say what a scale-up could change.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from certs.tls import Bundle, generate_bundle
from tests.support.admission import review
from tests.support.fake_apiserver import KUEUE_RESOURCES, FakeApiServer, serving
from tests.support.kubeconfig import write_kubeconfig
from tests.support.paths import CORPUS, FIXTURES, load_yaml_docs
from tests.support.webhook_server import LOCAL_SANS, Server, call, start_server, stop_server, wait_for
from webhook import admission

pytestmark = pytest.mark.integration

GANGS = FIXTURES / "rules" / "gpu-gang-unschedulable"
QUEUES = CORPUS / "queues"
RESOURCE_OF = {"Node": "nodes", "NodePool": "nodepools", "ResourceFlavor": "resourceflavors",
               "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues", "ResourceQuota": "resourcequotas"}


def bad_job(name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(d for d in load_yaml_docs(GANGS / "bad.yaml") if d["metadata"]["name"] == name)
    return copy.deepcopy(found)


def kueue_objects() -> list[dict[str, Any]]:
    single = load_yaml_docs(QUEUES / "kubernetes-sigs__kueue__site__static__examples__admin__single-clusterqueue-setup.yaml")
    tas = [d for d in load_yaml_docs(QUEUES / "kubernetes-sigs__kueue__site__static__examples__tas__sample-gpu-queues.yaml")
           if d["kind"] in RESOURCE_OF]
    for doc in tas:
        if doc["kind"] == "ResourceFlavor":
            doc["spec"]["nodeLabels"] = {"pool": "h100"}
    return [*single, *tas]


QUOTA: dict[str, Any] = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "team-q"},
         "spec": {"hard": {"requests.nvidia.com/gpu": "16"}}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, FakeApiServer]]:
    tmp = tmp_path_factory.mktemp("whole-jobs")
    bundle: Bundle = generate_bundle("gpuguard", "gpuguard", tmp / "certs", extra_sans=LOCAL_SANS)
    api = FakeApiServer(("nodes", "runtimeclasses", "nodepools", "resourcequotas", *KUEUE_RESOURCES))
    api.absent.difference_update({"nodepools", *KUEUE_RESOURCES})
    (cluster,) = load_yaml_docs(GANGS / "cluster.yaml")
    for obj in [*cluster["items"], *kueue_objects(), QUOTA]:
        api.put(RESOURCE_OF[obj["kind"]], obj)
    config = yaml.safe_load((GANGS / "config.yaml").read_text())
    config["warnNamespaces"] = ["staging"]
    config_path = tmp / "gpuguard.yaml"
    config_path.write_text(yaml.safe_dump(config))
    with serving(api):
        kubeconfig = tmp / "kubeconfig"
        write_kubeconfig(kubeconfig, f"http://127.0.0.1:{api.port}", token="t")
        srv = start_server(tmp / "srv", bundle, "--kubeconfig", str(kubeconfig), "--config", str(config_path))
        try:
            with srv.client() as client:
                wait_for("live facts", lambda: client.get("/readyz").status_code == 200, srv.log_text)
            yield srv, api
        finally:
            stop_server(srv)


@pytest.fixture
def server(cluster: tuple[Server, FakeApiServer]) -> Server:
    return cluster[0]


def send(server: Server, operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None = None
         ) -> dict[str, Any]:
    with server.client() as client:
        return call(client, "validate", review(operation, obj, old))


def message(answer: dict[str, Any]) -> str:
    status: dict[str, Any] = answer.get("status", {})
    return str(status.get("message", ""))


@pytest.mark.parametrize(("name", "size"), [
    ("llama-pretrain", "16 pods × 8 nvidia.com/gpu"),  # PyTorchJob
    ("pretrain", "14 pods × 8 nvidia.com/gpu"),  # JobSet
    ("vllm-405b", "14 pods × 8 nvidia.com/gpu"),  # LeaderWorkerSet
    ("on-karpenter", "5 pods × 8 nvidia.com/gpu"),  # JobSet against a capped NodePool
])
def test_a_gang_that_can_never_start_is_denied_at_create(server: Server, name: str, size: str) -> None:
    job = bad_job(name)
    answer = send(server, "CREATE", job)
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 403
    text = message(answer)
    line = next(x for x in text.splitlines() if x.startswith("[gpu-gang-unschedulable]"))
    assert f"{size} must run together" in line


def test_the_denial_names_the_pool_limit_a_scale_up_stops_at(server: Server) -> None:
    text = message(send(server, "CREATE", bad_job("on-karpenter")))
    assert "a scale-up stops at the pool limits: raise those of Karpenter NodePool 'p5-capped'" in text, text


def test_updates_deletes_and_controller_made_objects_are_never_denied_for_the_whole_job(server: Server) -> None:
    job = bad_job("pretrain")
    smaller = copy.deepcopy(job)
    smaller["spec"]["replicatedJobs"][0]["replicas"] = 1
    for operation, new, old in (("UPDATE", job, smaller), ("UPDATE", job, job), ("DELETE", None, job)):
        answer = send(server, operation, new, old)
        assert answer["allowed"] is True, (operation, answer)
        assert not any("gpu-gang-unschedulable" in w for w in answer.get("warnings", ()))
    # the JobSet controller's Jobs: judged through the JobSet, never denied themselves
    child = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "pretrain-workers-0", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "tas-user-queue"},
        "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "pretrain",
                             "uid": "5f0c", "controller": True, "blockOwnerDeletion": True}]},
        "spec": job["spec"]["replicatedJobs"][0]["template"]["spec"]}
    answer = send(server, "CREATE", child)
    assert answer["allowed"] is True, message(answer)
    orphan = copy.deepcopy(child)
    del orphan["metadata"]["ownerReferences"]
    assert send(server, "CREATE", orphan)["allowed"] is False  # the same Job made by a person: judged


def test_a_warning_keeps_the_reason_and_what_a_scale_up_could_change(server: Server) -> None:
    # only a declared pool without maxNodes could hold it: a warning (admitted)
    answer = send(server, "CREATE", bad_job("on-autoscaled"))
    assert answer["allowed"] is True
    (warning,) = [w for w in answer["warnings"] if w.startswith("gpu-gang-unschedulable: ")]
    assert len(warning) <= admission.WARNING_LIMIT
    assert "must run together" in warning
    assert "it can start only if" in warning and "a100-autoscaled" in warning, warning


def test_would_deny_warnings_in_a_warn_namespace_say_what_a_scale_up_could_change(server: Server) -> None:
    job = bad_job("llama-pretrain")
    job["metadata"]["namespace"] = "staging"
    answer = send(server, "CREATE", job)
    assert answer["allowed"] is True
    (warning,) = [w for w in answer["warnings"] if w.startswith("would deny: gpu-gang-unschedulable: ")]
    assert len(warning) <= admission.WARNING_LIMIT
    assert warning.startswith("would deny: gpu-gang-unschedulable: 16 pods × 8 nvidia.com/gpu must run together")
    assert "4 more such pods need room on nodes of that kind" in warning, warning


def queued_job(queue: str, namespace: str, pods: int) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": "queued", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"parallelism": pods, "completions": pods, "suspend": True, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "train", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                                      "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}}


def test_a_job_kueue_never_admits_is_denied_and_more_nodes_are_said_not_to_help(server: Server) -> None:
    answer = send(server, "CREATE", queued_job("tas-user-queue", "default", 4))  # 32 GPUs; 16 nominal, no cohort
    assert answer["allowed"] is False
    line = next(x for x in message(answer).splitlines() if x.startswith("[gpu-queue-unadmittable]"))
    assert "Kueue never admits this workload (LocalQueue default/tas-user-queue → ClusterQueue tas-cluster-queue)" in line
    assert "more nodes do not help: Kueue admits by ClusterQueue tas-cluster-queue's quota" in line
    # a ClusterQueue that covers no GPU (Kueue's single-ClusterQueue example)
    answer = send(server, "CREATE", queued_job("user-queue", "default", 1))
    assert answer["allowed"] is False
    assert "resource nvidia.com/gpu unavailable in ClusterQueue cluster-queue" in message(answer)
    # two pods fit the queue's 16 GPUs
    assert send(server, "CREATE", queued_job("tas-user-queue", "default", 2))["allowed"] is True
    # a queue-name that names no LocalQueue: a warning
    answer = send(server, "CREATE", queued_job("no-such-queue", "default", 2))
    assert answer["allowed"] is True
    assert any(w.startswith("gpu-queue-unadmittable: ") and "no-such-queue" in w for w in answer["warnings"])


def test_a_gang_past_the_namespace_quota_is_denied(server: Server) -> None:
    job = bad_job("pretrain")  # 14 pods × 8 GPUs = 112 against 16
    job["metadata"]["namespace"] = "team-q"
    job["spec"]["replicatedJobs"][0]["replicas"] = 1  # 7 pods: they fit the nodes, not the quota
    answer = send(server, "CREATE", job)
    assert answer["allowed"] is False
    text = message(answer)
    assert "[gpu-gang-unschedulable]" not in text
    line = next(x for x in text.splitlines() if x.startswith("[gpu-quota-exceeded]"))
    assert "ResourceQuota team-q/gpus allows requests.nvidia.com/gpu: 16" in line
    assert "more nodes do not help: ResourceQuota team-q/gpus caps the namespace" in line


def test_a_quota_created_in_the_cluster_changes_the_verdict(cluster: tuple[Server, FakeApiServer]) -> None:
    """The quotas come from the live watch: a quota created in a namespace denies the next CREATE there."""
    server, api = cluster
    job = bad_job("pretrain")
    job["metadata"]["namespace"] = "team-new"
    job["spec"]["replicatedJobs"][0]["replicas"] = 1
    assert send(server, "CREATE", job)["allowed"] is True
    quota = copy.deepcopy(QUOTA)
    quota["metadata"]["namespace"] = "team-new"
    api.put("resourcequotas", quota)
    wait_for("the new quota", lambda: send(server, "CREATE", job)["allowed"] is False, server.log_text)
    api.delete("resourcequotas", "team-new/gpus")
    wait_for("the quota deleted", lambda: send(server, "CREATE", job)["allowed"] is True, server.log_text)

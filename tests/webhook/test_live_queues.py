"""LiveFacts watches ResourceQuotas and Kueue's queues with the real ``kubernetes`` client against the
in-process API server: they become ``ClusterFacts.quotas`` and ``.queues`` (aspects of their own, so
the nodes' memo entries survive their changes), spec changes reach the whole-job rules, status-only
changes publish nothing, Kueue CRDs installed later are picked up, an older Kueue version is used
when v1beta2 is not served, and a forbidden list leaves the webhook ready, judging without it.

The Kueue objects are Kueue's TAS GPU setup (tests/corpus/queues, kubernetes-sigs/kueue
site/static/examples/tas/sample-gpu-queues.yaml @ ff69552e).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from policies import Config, evaluate
from policies.reads import NODES, QUEUES, QUOTAS
from tests.support.fake_apiserver import (
    KUEUE_RESOURCES,
    LIST_META,
    PATHS,
    TYPE_META,
    FakeApiServer,
    gpu_node,
    serving,
)
from tests.support.paths import CORPUS, load_yaml_docs
from tests.webhook.test_live_facts import start_live

pytestmark = pytest.mark.integration

SETUP = CORPUS / "queues" / "kubernetes-sigs__kueue__site__static__examples__tas__sample-gpu-queues.yaml"
RESOURCE_OF = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}
SERVED = ("nodes", "runtimeclasses", "nodepools", "resourcequotas", *KUEUE_RESOURCES)
WHOLE_JOB_RULES = ("gpu-quota-exceeded", "gpu-queue-unadmittable")


def kueue_objects() -> list[dict[str, Any]]:
    return [d for d in load_yaml_docs(SETUP) if d["kind"] in RESOURCE_OF]


def install_kueue(state: FakeApiServer, objects: bool = True) -> None:
    state.absent.difference_update(KUEUE_RESOURCES)
    for obj in kueue_objects() if objects else ():
        state.put(RESOURCE_OF[obj["kind"]], obj)


def quota(gpus: str, used: str = "0", name: str = "gpu") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"namespace": "default", "name": name},
            "spec": {"hard": {"requests.nvidia.com/gpu": gpus}},
            "status": {"hard": {"requests.nvidia.com/gpu": gpus}, "used": {"requests.nvidia.com/gpu": used}}}


def pytorch_job(workers: int, queue: str | None = None) -> dict[str, Any]:
    replica = {"replicas": workers, "template": {"spec": {"containers": [
        {"name": "pytorch", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
         "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}
    meta: dict[str, Any] = {"name": "train", "namespace": "default"}
    if queue:
        meta["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta,
            "spec": {"pytorchReplicaSpecs": {"Worker": replica}}}


def rules(obj: dict[str, Any], facts: Any) -> list[str]:
    return sorted(f.rule for f in evaluate(obj, Config(), facts).findings if f.rule in WHOLE_JOB_RULES)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer(SERVED)
    for i in range(4):
        node = gpu_node(f"gpu-{i}")
        node["metadata"]["labels"]["cloud.provider.com/node-group"] = "tas-group"
        state.put("nodes", node)
    state.put("resourcequotas", quota("16"))
    with serving(state):
        yield state


def test_quotas_are_listed_watched_and_judged(api: FakeApiServer) -> None:
    live, recorder = start_live(api)
    try:
        recorder.wait_for(lambda: live.ready and live.current().quotas is not None, "quotas")
        first = live.current()
        assert first.quotas is not None and [q.key for q in first.quotas.in_namespace("default")] == ["default/gpu"]
        assert rules(pytorch_job(3), first) == ["gpu-quota-exceeded"]  # 24 GPUs > 16

        api.put("resourcequotas", quota("32"))
        recorder.wait_for(lambda: rules(pytorch_job(3), live.current()) == [], "a raised quota")
        raised = live.current()
        # the quota is an aspect of its own: what was worked out of the nodes stays valid
        assert raised.token(QUOTAS) != first.token(QUOTAS)
        assert raised.token(NODES) == first.token(NODES) and raised.token(QUEUES) == first.token(QUEUES)

        published = len(recorder.snapshots)
        api.put("resourcequotas", quota("32", used="24"))  # status only: nothing a rule judges by
        api.put("resourcequotas", quota("8", name="other"))  # then a change, on the same watch stream
        recorder.wait_for(lambda: len(live.current().quotas.in_namespace("default")) == 2,  # type: ignore[union-attr]
                          "a second quota")
        assert len(recorder.snapshots) == published + 1
        assert live.stats().events_unchanged >= 1

        api.delete("resourcequotas", "default/other")
        api.delete("resourcequotas", "default/gpu")
        recorder.wait_for(lambda: not live.current().quotas.in_namespace("default"),  # type: ignore[union-attr]
                          "deleted quotas")
    finally:
        live.stop()


def test_kueue_crds_installed_later_are_picked_up(api: FakeApiServer) -> None:
    live, recorder = start_live(api, crd_recheck_seconds=0.05)
    try:
        recorder.wait_for(lambda: live.ready, "ready without Kueue")
        assert live.current().queues is None
        job = pytorch_job(3, queue="tas-user-queue")  # 24 GPUs; tas-cluster-queue has 16
        assert rules(job, live.current()) == ["gpu-quota-exceeded"]  # Kueue unknown: the queue is not judged

        install_kueue(api)
        recorder.wait_for(lambda: live.current().queues is not None
                          and "tas-cluster-queue" in live.current().queues.cluster_queues  # type: ignore[union-attr]
                          and live.current().queues.local_queue("default", "tas-user-queue") is not None,  # type: ignore[union-attr]
                          "Kueue facts")
        before = live.current()
        assert rules(job, before) == ["gpu-queue-unadmittable", "gpu-quota-exceeded"]

        bigger = copy.deepcopy(next(o for o in kueue_objects() if o["kind"] == "ClusterQueue"))
        bigger["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = 32
        api.put("clusterqueues", bigger)
        recorder.wait_for(lambda: rules(job, live.current()) == ["gpu-quota-exceeded"], "a larger ClusterQueue")
        after = live.current()
        assert after.token(QUEUES) != before.token(QUEUES)
        assert after.token(NODES) == before.token(NODES) and after.token(QUOTAS) == before.token(QUOTAS)

        published = len(recorder.snapshots)
        status_only = copy.deepcopy(bigger)
        status_only["status"] = {"pendingWorkloads": 3, "admittedWorkloads": 1, "flavorsReservation": [
            {"name": "tas-flavor", "resources": [{"name": "nvidia.com/gpu", "total": "16", "borrowed": "0"}]}]}
        api.put("clusterqueues", status_only)
        api.delete("localqueues", "default/tas-user-queue")  # a change after it, on the same watch
        recorder.wait_for(lambda: live.current().queues.local_queue("default", "tas-user-queue") is None,  # type: ignore[union-attr]
                          "a deleted LocalQueue")
        assert len(recorder.snapshots) == published + 1
        assert [f.severity.name for f in evaluate(job, Config(), live.current()).findings
                if f.rule == "gpu-queue-unadmittable"] == ["WARNING"]  # names no LocalQueue
    finally:
        live.stop()


def test_kueue_served_without_objects_is_known(api: FakeApiServer) -> None:
    install_kueue(api, objects=False)
    live, recorder = start_live(api)
    try:
        recorder.wait_for(lambda: live.ready, "initial lists")
        queues = live.current().queues
        assert queues is not None and not queues.local_queues and not queues.cluster_queues
        messages = [f.message for f in evaluate(pytorch_job(1, queue="team-a"), Config(), live.current()).findings
                    if f.rule == "gpu-queue-unadmittable"]
        assert len(messages) == 1 and "team-a" in messages[0] and "LocalQueue" in messages[0]
    finally:
        live.stop()


def test_an_older_kueue_version_is_used_when_v1beta2_is_not_served(monkeypatch: pytest.MonkeyPatch) -> None:
    for resource in KUEUE_RESOURCES:
        kind = TYPE_META[resource]["kind"]
        monkeypatch.delitem(PATHS, f"/apis/kueue.x-k8s.io/v1beta2/{resource}")
        monkeypatch.setitem(PATHS, f"/apis/kueue.x-k8s.io/v1beta1/{resource}", resource)
        monkeypatch.setitem(TYPE_META, resource, {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": kind})
        monkeypatch.setitem(LIST_META, resource, {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": f"{kind}List"})
    state = FakeApiServer(SERVED)
    state.put("nodes", gpu_node("gpu-0"))
    state.absent.difference_update(KUEUE_RESOURCES)
    # kubernetes-sigs/kueue apis/kueue/v1beta1/clusterqueue_types.go: spec.cohort (cohortName in v1beta2)
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "team"},
          "spec": {"cohort": "ml", "namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                   "flavors": [{"name": "default", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}}
    state.put("clusterqueues", cq)
    with serving(state):
        live, recorder = start_live(state)
        try:
            recorder.wait_for(lambda: live.current().queues is not None
                              and "team" in live.current().queues.cluster_queues, "v1beta1 queues")  # type: ignore[union-attr]
            queues = live.current().queues
            assert queues is not None and queues.cluster_queues["team"].cohort == "ml"
            assert {r.resource.name: r.api_version for r in live._kueue_reflectors} == dict.fromkeys(
                ("localqueues", "clusterqueues", "resourceflavors", "cohorts"), "v1beta1")
        finally:
            live.stop()


def test_a_forbidden_list_leaves_the_webhook_ready_and_is_picked_up_once_granted(
    api: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    install_kueue(api)
    api.forbidden.update({"resourcequotas", "localqueues"})
    caplog.set_level(logging.INFO, logger="gpuguard.facts")
    live, recorder = start_live(api, crd_recheck_seconds=0.05)
    try:
        recorder.wait_for(lambda: live.ready, "ready although quotas and LocalQueues are forbidden")
        recorder.wait_for(lambda: sum(q[0] == "resourcequotas" for q in api.list_queries) >= 3, "rechecks of the quotas")
        facts = live.current()
        assert facts.quotas is None
        assert facts.queues is None  # without the LocalQueues, no queue is judged (rather than misjudged)
        assert rules(pytorch_job(3, queue="tas-user-queue"), facts) == []
        assert live.age_seconds() is not None  # a forbidden list does not make the facts look stale
        forbidden = [r.getMessage() for r in caplog.records if "forbids listing" in r.getMessage()]
        assert len(forbidden) == 2, forbidden  # once each, not at every recheck
        assert all(r.levelno == logging.WARNING for r in caplog.records if "forbids listing" in r.getMessage())

        api.forbidden.clear()
        recorder.wait_for(lambda: live.current().quotas is not None and live.current().queues is not None,
                          "quotas and queues once granted")
        assert rules(pytorch_job(3, queue="tas-user-queue"), live.current()) == [
            "gpu-queue-unadmittable", "gpu-quota-exceeded"]
    finally:
        live.stop()

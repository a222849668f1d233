"""Workloads without pods: the ``queue`` reason of what Kueue holds and the ``quota`` reason of what a
ResourceQuota refuses (the facts and their sources are in policies/pending/workloads.py).

Messages are Kueue's own (kubernetes-sigs/kueue @ ff69552e pkg/scheduler/flavorassigner/
flavorassigner.go) and the API server's (kubernetes/kubernetes @ 030880a5 staging/src/k8s.io/apiserver/
pkg/admission/plugin/resourcequota/controller.go); the Job controller's event carries it as
"Error creating: <error>" (pkg/controller/controller_utils.go).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policies.pending.state import ClusterState
from policies.pending.workloads import QUEUE, QUOTA, diagnose_workloads, refusal
from tests.support.cluster_objects import container

KUEUE = "kueue.x-k8s.io/v1beta2"
TEMPLATE = {"metadata": {}, "spec": {"restartPolicy": "Never", "containers": [container("train", 8)]}}
WAITING = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
           "default-flavor, 16 more needed")
FORBIDDEN = ('Error creating: pods "eval-sweep-7xk2p" is forbidden: exceeded quota: gpus, requested: '
             'requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8')


def cluster_queue(name: str, used: int, *, cohort: str = "ml", lending: int | None = None,
                  borrowing: int | None = None, nominal: int = 16) -> dict[str, Any]:
    res: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    if lending is not None:
        res["lendingLimit"] = lending
    if borrowing is not None:
        res["borrowingLimit"] = borrowing
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [
        {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "default-flavor", "resources": [res]}]}]}
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec,
            "status": {"flavorsReservation": [{"name": "default-flavor", "resources": [
                {"name": "nvidia.com/gpu", "total": str(used), "borrowed": "0"}]}]}}


def local_queue(name: str = "team-a", cq: str = "team-a", namespace: str = "ml") -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cq}}


def workload(count: int = 2, conditions: list[dict[str, Any]] | None = None, queue: str = "team-a",
             active: bool = True) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload",
            "metadata": {"name": "job-train-5d2f1", "namespace": "ml", "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u", "controller": True}]},
            "spec": {"queueName": queue, "active": active,
                     "podSets": [{"name": "main", "count": count, "template": copy.deepcopy(TEMPLATE)}]},
            "status": {"conditions": conditions if conditions is not None else [
                {"type": "QuotaReserved", "status": "False", "reason": "WaitingForQuota", "message": WAITING}]}}


def job(name: str, queue: str | None, *, suspend: bool = True, namespace: str = "ml") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if queue:
        meta["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": 1, "completions": 1, "suspend": suspend, "template": copy.deepcopy(TEMPLATE)}}


def failed_create(name: str, message: str, *, reason: str = "FailedCreate", kind: str = "Job",
                  namespace: str = "eval", count: int = 14) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{name}.1", "namespace": namespace},
            "involvedObject": {"apiVersion": "batch/v1", "kind": kind, "name": name, "namespace": namespace},
            "reason": reason, "message": message, "type": "Warning", "count": count,
            "lastTimestamp": "2026-11-30T11:54:12Z"}


def reasons(*objects: dict[str, Any], scope: Any = None) -> dict[str, list[tuple[str, str]]]:
    state = ClusterState.from_objects(list(objects))
    return {w.key: [(r.kind, r.message) for r in w.reasons] for w in diagnose_workloads(state, scope)}


FLAVOR = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}, "spec": {}}


def test_idle_cohort_quota_that_is_not_lent_is_said_so() -> None:
    found = reasons(FLAVOR, cluster_queue("team-a", 16), cluster_queue("team-b", 0, lending=0), local_queue(),
                    workload())
    ((kind, message),) = found["ml/Job/train"]
    assert kind == QUEUE
    assert message.startswith("waits in Kueue: LocalQueue ml/team-a → ClusterQueue team-a (cohort ml); "
                              "it asks for 16 nvidia.com/gpu; ClusterQueue team-a flavor default-flavor: "
                              "16 nvidia.com/gpu nominal, 16 in use; ")
    assert ("cohort ml has 16 nvidia.com/gpu idle in flavor default-flavor but only 0 of it is borrowable by "
            "ClusterQueue team-a (team-b (lendingLimit 0)): idle quota it cannot use") in message
    assert message.endswith(f"Workload job-train-5d2f1: QuotaReserved=False (WaitingForQuota): {WAITING}")


def test_a_borrowing_limit_keeps_idle_quota_out_of_reach_too() -> None:
    found = reasons(FLAVOR, cluster_queue("team-a", 16, borrowing=4), cluster_queue("team-b", 0), local_queue(),
                    workload())
    (_, message), = found["ml/Job/train"]
    assert "but only 4 of it is borrowable by ClusterQueue team-a (its own borrowingLimit 4)" in message
    assert "at most 20 with borrowing" in message


def test_all_idle_quota_borrowable_is_not_called_unusable() -> None:
    found = reasons(FLAVOR, cluster_queue("team-a", 16), cluster_queue("team-b", 8), local_queue(), workload())
    (_, message), = found["ml/Job/train"]
    assert "cohort ml has 8 nvidia.com/gpu idle in flavor default-flavor, all borrowable" in message
    assert "cannot use" not in message


def test_more_than_the_queue_can_ever_reach() -> None:
    exceeds = [{"type": "QuotaReserved", "status": "False", "reason": "ExceedsMaxQuota", "message": (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor default-flavor, "
        "previously considered podsets requests (0) + current podset request (32) > maximum capacity (16)")}]
    found = reasons(FLAVOR, cluster_queue("team-a", 0, cohort=""), local_queue(), workload(4, exceeds))
    (_, message), = found["ml/Job/train"]
    assert "more than it can ever reach (32 > 16): it is never admitted as it is" in message
    assert "(ExceedsMaxQuota)" in message


def test_admitted_finished_and_evaluated_states() -> None:
    admitted = workload(conditions=[{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}])
    checks = workload(conditions=[{"type": "QuotaReserved", "status": "True"},
                                  {"type": "Admitted", "status": "False", "reason": "Pending",
                                   "message": "The workload has failed admission checks"}])
    base = [FLAVOR, cluster_queue("team-a", 0), local_queue()]
    assert reasons(*base, admitted) == {}
    (_, message), = reasons(*base, checks)["ml/Job/train"]
    assert "quota reserved, Admitted=False (Pending): The workload has failed admission checks" in message
    (_, message), = reasons(*base, workload(conditions=[]))["ml/Job/train"]
    assert "not evaluated by Kueue yet" in message
    (_, message), = reasons(*base, workload(active=False))["ml/Job/train"]
    assert "is deactivated (spec.active: false)" in message


def test_queues_that_do_not_exist() -> None:
    found = reasons(FLAVOR, cluster_queue("team-a", 0), local_queue(), workload(queue="nope"))
    (_, message), = found["ml/Job/train"]
    assert message.startswith("waits in Kueue: LocalQueue ml/nope does not exist, so it is never admitted")
    found = reasons(FLAVOR, local_queue(cq="gone"), workload())
    (_, message), = found["ml/Job/train"]
    assert "LocalQueue ml/team-a → ClusterQueue gone, which does not exist" in message


def test_a_suspended_job_with_the_queue_label_and_no_workload() -> None:
    found = reasons(FLAVOR, cluster_queue("team-a", 16, cohort=""), local_queue(), job("smoke", "team-a"),
                    job("running", "team-a", suspend=False), job("plain", None))
    assert list(found) == ["ml/Job/smoke"]
    (_, message), = found["ml/Job/smoke"]
    assert "it asks for 8 nvidia.com/gpu; ClusterQueue team-a flavor default-flavor: 16 nvidia.com/gpu nominal, " \
           "16 in use" in message
    assert message.endswith("no Kueue Workload for it is in the input (is Kueue running, and were Workloads listed?)")
    # without any Kueue object, the queue cannot be followed, and that is said
    (_, alone), = reasons(job("smoke", "team-a"))["ml/Job/smoke"]
    assert "the input holds no Kueue objects" in alone
    # a job Kueue made a Workload for is reported once, through the Workload
    both = reasons(FLAVOR, cluster_queue("team-a", 16), local_queue(), workload(), job("train", "team-a"))
    assert list(both) == ["ml/Job/train"] and len(both["ml/Job/train"]) == 1


def test_the_api_servers_quota_message_is_read() -> None:
    found = refusal(FORBIDDEN)
    assert found is not None
    assert (found.quota, found.requested, found.used, found.limited) == (
        "gpus", "requests.nvidia.com/gpu=8", "requests.nvidia.com/gpu=8", "requests.nvidia.com/gpu=8")
    assert refusal('Error creating: pods "x" is forbidden: unable to validate against any security policy') is None


def test_failed_create_events_give_the_quota_reason() -> None:
    found = reasons(failed_create("eval-sweep", FORBIDDEN),
                    failed_create("train", FORBIDDEN.replace("eval-sweep", "train"), reason="FailedCreatePod",
                                  kind="PyTorchJob", count=1),
                    failed_create("other", "Error creating: pods \"o\" is forbidden: error looking up service account"))
    assert set(found) == {"eval/Job/eval-sweep", "eval/PyTorchJob/train"}
    ((kind, message),) = found["eval/Job/eval-sweep"]
    assert kind == QUOTA
    assert message == ("the Job controller cannot create its pods: ResourceQuota eval/gpus refuses them (requested "
                       "requests.nvidia.com/gpu=8, used requests.nvidia.com/gpu=8, limited requests.nvidia.com/gpu=8); "
                       "said by its FailedCreate event (x14), last 2026-11-30T11:54:12Z")
    assert "said by its FailedCreatePod event, last" in found["eval/PyTorchJob/train"][0][1]


def test_a_replica_set_condition_gives_the_quota_reason() -> None:
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "infer-7f9b5", "namespace": "serving"},
          "spec": {"replicas": 2}, "status": {"replicas": 0, "conditions": [
              {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
               "message": FORBIDDEN.removeprefix("Error creating: ")}]}}
    ((kind, message),) = reasons(rs)["serving/ReplicaSet/infer-7f9b5"]
    assert kind == QUOTA and "said by its condition ReplicaFailure (FailedCreate)" in message


@pytest.mark.parametrize(("scope", "expected"), [
    (lambda ns: ns == "eval", {"eval/Job/eval-sweep"}),
    (lambda ns: ns == "ml", {"ml/Job/train"}),
    (None, {"eval/Job/eval-sweep", "ml/Job/train"}),
])
def test_workloads_are_chosen_by_namespace(scope: Any, expected: set[str]) -> None:
    found = reasons(FLAVOR, cluster_queue("team-a", 16), local_queue(), workload(), failed_create("eval-sweep",
                                                                                                  FORBIDDEN),
                    scope=scope)
    assert set(found) == expected

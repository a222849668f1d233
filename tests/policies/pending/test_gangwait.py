"""The ``gang`` reason of a pending pod: its gang from the labels the controllers set (each sourced in
policies/pending/gangwait.py), how many siblings run and what they hold where, and a deadlock between
two partially placed gangs that each hold what the other's pending pods need."""

from __future__ import annotations

from typing import Any

import pytest

from policies.pending import diagnose as dg
from policies.pending.diagnose import diagnose
from policies.pending.fit import FitAnalyser
from policies.pending.gangwait import GangAnalyser, gang_key
from policies.pending.objects import PodReader
from policies.pending.reasons import Reason
from policies.pending.state import ClusterState
from tests.support.cluster_objects import L4, container, node, pod

MSG = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."


def member(namespace: str, name: str, labels: dict[str, str], *, on: str | None = None, gpus: int = 8,
           annotations: dict[str, str] | None = None, **kw: Any) -> dict[str, Any]:
    p = pod(namespace, name, node_name=on, phase="Running" if on else "Pending",
            containers=[container("main", gpus, cpu="8", memory="64Gi")],
            scheduled_message=None if on else MSG, **kw)
    p["metadata"]["labels"] = dict(labels)
    if annotations:
        p["metadata"]["annotations"] = dict(annotations)
    return p


def state_of(*objects: dict[str, Any]) -> ClusterState:
    return ClusterState.from_objects(list(objects))


KUBEFLOW = {"training.kubeflow.org/job-name": "alpha", "training.kubeflow.org/operator-name": "pytorchjob-controller"}
JOBSET = {"jobset.sigs.k8s.io/jobset-name": "beta"}
FOUR_NODES = [node(f"h100-{i}") for i in range(4)]


@pytest.mark.parametrize(("labels", "annotations", "label", "size"), [
    (KUBEFLOW, {}, "training.kubeflow.org/job-name=alpha", None),
    (JOBSET, {}, "jobset.sigs.k8s.io/jobset-name=beta", None),
    ({"leaderworkerset.sigs.k8s.io/name": "vllm", "leaderworkerset.sigs.k8s.io/group-index": "1"},
     {"leaderworkerset.sigs.k8s.io/size": "3"},
     "leaderworkerset.sigs.k8s.io/name=vllm,leaderworkerset.sigs.k8s.io/group-index=1", 3),
    ({"kueue.x-k8s.io/pod-group-name": "g1"}, {"kueue.x-k8s.io/pod-group-total-count": "4"},
     "kueue.x-k8s.io/pod-group-name=g1", 4),
    ({"volcano.sh/job-name": "mpi"}, {}, "volcano.sh/job-name=mpi", None),
])
def test_a_gang_is_known_by_its_controllers_labels(labels: dict[str, str], annotations: dict[str, str],
                                                   label: str, size: int | None) -> None:
    info = PodReader().read(member("ml", "p", labels, annotations=annotations))
    assert info is not None
    found = gang_key(info)
    assert found is not None and found[0].label == label and found[1] == size


def test_a_pod_without_gang_labels_is_no_gang() -> None:
    info = PodReader().read(member("ml", "p", {"app": "web", "batch.kubernetes.io/job-name": "web"}))
    assert info is not None and gang_key(info) is None


def gang_reason(state: ClusterState, key: str) -> Reason | None:
    result = {p.pod.key: p for p in diagnose(state).pods}
    return next((r for r in result[key].reasons if r.kind == dg.GANG), None)


def test_a_partially_placed_gang_says_how_many_run_what_they_hold_and_where() -> None:
    pods = [member("ml", f"alpha-{i}", KUBEFLOW, owner=("PyTorchJob", "alpha"), on=f"h100-{i}" if i < 3 else None) for i in range(4)]
    pods.append(member("ml", "web", {"app": "web"}, on="h100-3"))  # the last node is taken by a non-gang pod
    reason = gang_reason(state_of(*FOUR_NODES, *pods), "ml/alpha-3")
    assert reason is not None
    assert reason.message.startswith("gang PyTorchJob alpha (training.kubeflow.org/job-name=alpha): 3 of 4 pods run, "
                                     "holding 24 nvidia.com/gpu on 3 nodes (h100-0, h100-1, h100-2); 1 waits, this "
                                     "pod among them")
    assert "deadlock" not in reason.message and "partially placed too" not in reason.message
    assert reason.nodes == ("h100-0", "h100-1", "h100-2") and reason.pods == ()
    # the reason comes after the scheduler's and before the free-GPU count
    kinds = [r.kind for r in next(p for p in diagnose(state_of(*FOUR_NODES, *pods)).pods).reasons]
    assert kinds.index(dg.SCHEDULER) < kinds.index(dg.GANG) < kinds.index(dg.INSUFFICIENT)


def two_gangs(beta_pending: int = 2) -> ClusterState:
    alpha = [member("ml", f"alpha-{i}", KUBEFLOW, owner=("PyTorchJob", "alpha"), on=f"h100-{i}" if i < 2 else None) for i in range(4)]
    beta = [member("research", f"beta-{i}", JOBSET, on=f"h100-{i + 2}" if i < 2 else None)
            for i in range(2 + beta_pending)]
    return state_of(*FOUR_NODES, *alpha, *beta)


def test_two_gangs_holding_what_the_other_needs_are_a_deadlock() -> None:
    state = two_gangs()
    reason = gang_reason(state, "ml/alpha-2")
    assert reason is not None and reason.message.startswith("deadlock: gang PyTorchJob alpha")
    assert ("gang JobSet beta (jobset.sigs.k8s.io/jobset-name=beta) is partially placed too (2 of 4 run) and holds "
            "16 nvidia.com/gpu on nodes this pod could use (h100-2, h100-3), while this gang holds nodes its pending "
            "pods could use: a deadlock") in reason.message
    assert reason.pods == ("research/beta-0", "research/beta-1")
    assert reason.nodes[:2] == ("h100-2", "h100-3")
    other = gang_reason(state, "research/beta-3")
    assert other is not None and other.message.startswith("deadlock: gang JobSet beta")


def test_a_gang_in_the_way_that_could_complete_is_no_deadlock() -> None:
    # beta has all its pods placed but one, which an L4 node can take: beta completes, then frees its nodes
    alpha = [member("ml", f"alpha-{i}", KUBEFLOW, owner=("PyTorchJob", "alpha"), on=f"h100-{i}" if i < 2 else None) for i in range(4)]
    beta = [member("research", f"beta-{i}", JOBSET, on=f"h100-{i + 2}" if i < 2 else None) for i in range(2)]
    beta.append(member("research", "beta-2", JOBSET, gpus=4, node_selector={"nvidia.com/gpu.product": L4}))
    l4 = node("l4-0", product=L4, instance="g6.12xlarge", capacity=4, allocatable=4)
    state = state_of(*FOUR_NODES, l4, *alpha, *beta)
    analyser = GangAnalyser(state, FitAnalyser(state))
    pending = state.pod("ml", "alpha-2")
    assert pending is not None
    wait = analyser.analyse(pending)
    assert wait is not None and not wait.deadlock
    assert "gang JobSet beta (jobset.sigs.k8s.io/jobset-name=beta) is partially placed too" in wait.message
    assert "deadlock" not in wait.message


def test_a_gang_still_waiting_as_a_whole_and_pods_not_created_yet() -> None:
    labels = {"leaderworkerset.sigs.k8s.io/name": "vllm", "leaderworkerset.sigs.k8s.io/group-index": "0"}
    size = {"leaderworkerset.sigs.k8s.io/size": "4"}
    pods = [member("ml", f"vllm-0-{i}", labels, annotations=size) for i in range(2)]
    reason = gang_reason(state_of(*FOUR_NODES[:1], *pods), "ml/vllm-0-0")
    assert reason is not None
    assert reason.message == ("gang LeaderWorkerSet vllm group 0 (leaderworkerset.sigs.k8s.io/name=vllm,"
                              "leaderworkerset.sigs.k8s.io/group-index=0): 0 of 4 pods run; all 4 wait: the gang "
                              "starts only when there is room for every pod (2 pods of the gang are not created yet)")


def test_a_pod_alone_is_no_gang() -> None:
    state = state_of(*FOUR_NODES, member("ml", "solo", JOBSET))
    assert gang_reason(state, "ml/solo") is None

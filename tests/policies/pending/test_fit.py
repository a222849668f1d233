"""Fit verdicts (insufficient / fragmented / stranded), preemption and the scheduler verdict."""

from __future__ import annotations

import pytest

from policies.pending import fit as fitmod
from policies.pending.events import scheduler_verdict
from policies.pending.fit import FitAnalyser
from policies.pending.objects import PodInfo
from policies.pending.preemption import (
    NOT_ELIGIBLE_NEVER,
    NOT_ELIGIBLE_TERMINATING,
    PreemptionAnalyser,
    analyse_preemption,
    candidate_budget,
    holders_in_the_way,
)
from policies.pending.state import ClusterState
from tests.support.cluster_objects import all_objects, container, node, pod


@pytest.fixture(scope="module")
def state() -> ClusterState:
    return ClusterState.from_objects(all_objects())


def _pod(state: ClusterState, key: str) -> PodInfo:
    ns, name = key.split("/")
    found = state.pod(ns, name)
    assert found is not None
    return found


def test_pending_gpu_pods_exclude_bound_terminal_and_cpu_pods(state: ClusterState) -> None:
    assert sorted(p.key for p in state.pending_gpu_pods()) == [
        "ml/big-train", "ml/fits-now", "ml/gated", "ml/medium", "research/urgent"]
    assert _pod(state, "ml/gated").gated


def test_fragmentation_lists_the_best_nodes(state: ClusterState) -> None:
    report = FitAnalyser(state).analyse(_pod(state, "ml/big-train"))
    assert report.verdict == fitmod.FRAGMENTED
    (gpu,) = report.resources
    assert (gpu.want, gpu.total_free, gpu.max_free, gpu.nodes_with_room) == (4, 4, 2, 0)
    assert gpu.free_elsewhere == 12  # 8 on the cordoned A100, 4 on the NotReady L4
    assert [n.node for n in report.best()] == ["h100-a", "h100-b"]
    assert report.blocked == {"cordoned": 1, "node selector/affinity": 6, "untolerated taint": 2}
    assert [n.node for n in report.stranded()] == ["a100-cordoned", "l4-notready"]
    assert report.message().startswith("fragmented: enough GPUs are free in total, but not on any single node")


def test_insufficient_when_the_total_is_short() -> None:
    objs = [node("n1"), node("n2"),
            pod("ml", "a", node_name="n1", containers=[container("m", 7)]),
            pod("ml", "b", node_name="n2", containers=[container("m", 7)]),
            pod("ml", "want", containers=[container("m", 4)])]
    state = ClusterState.from_objects(objs)
    report = FitAnalyser(state).analyse(_pod(state, "ml/want"))
    assert report.verdict == fitmod.INSUFFICIENT
    assert report.resources[0].total_free == 2


def test_gpus_stranded_by_cpu_are_not_counted_as_usable() -> None:
    objs = [node("n1", cpu="16"), node("n2"),
            pod("ml", "cpu-hog", node_name="n1", containers=[container("m", 0, cpu="15")]),
            pod("ml", "gpu-hog", node_name="n2", containers=[container("m", 8)]),
            pod("ml", "want", containers=[container("m", 4, cpu="8")])]
    state = ClusterState.from_objects(objs)
    report = FitAnalyser(state).analyse(_pod(state, "ml/want"))
    assert report.verdict == fitmod.INSUFFICIENT
    (stranded,) = report.stranded()
    assert stranded.node == "n1" and stranded.short == ("Insufficient cpu (1 free, the pod asks 8)",)
    assert report.resources[0].free_elsewhere == 8


def test_no_gpu_node_for_an_unknown_resource() -> None:
    state = ClusterState.from_objects([node("n1"), pod("ml", "amd", containers=[
        {"name": "m", "image": "x", "resources": {"limits": {"amd.com/gpu": 1}}}])])
    report = FitAnalyser(state).analyse(_pod(state, "ml/amd"))
    assert report.verdict == fitmod.NO_GPU_NODE and report.missing == ("amd.com/gpu",)


def test_identical_pods_share_one_analysis(state: ClusterState) -> None:
    analyser = FitAnalyser(state)
    first = analyser.analyse(_pod(state, "ml/fits-now"))
    second = analyser.analyse(_pod(state, "ml/gated"))  # same demands and constraints
    assert first.verdict == second.verdict == fitmod.FITS
    assert second.nodes is first.nodes and second.pod.name == "gated"


def test_preemption_never_and_waiting_for_victims(state: ClusterState) -> None:
    analyser = FitAnalyser(state)
    never = analyse_preemption(state, analyser.analyse(_pod(state, "ml/big-train")))
    assert (never.eligible, never.note) == (False, NOT_ELIGIBLE_NEVER)
    waiting = analyse_preemption(state, analyser.analyse(_pod(state, "research/urgent")))
    assert (waiting.eligible, waiting.note) == (False, NOT_ELIGIBLE_TERMINATING)
    assert [p.key for p in waiting.waiting_on] == ["ml/terminating"]


def test_preemption_finds_minimal_victims_and_ranks_nodes(state: ClusterState) -> None:
    report = analyse_preemption(state, FitAnalyser(state).analyse(_pod(state, "ml/medium")))
    assert report.eligible and report.helps
    victims = {c.node: [v.key for v in c.victims] for c in report.candidates}
    assert victims == {
        "h100-a": ["ml/notebook-idle"],
        # both priority 0: the earlier-started init-pod is reprieved, one 3-GPU pod suffices
        "h100-b": ["ml/sidecar-pod"],
        "a100-unhealthy": ["ml/a100-job"],
        # urgent (2000) keeps its 4 reserved, so both lower pods must go
        "h100-c": ["ml/train-c", "ml/terminating"],
    }
    assert [c.node for c in report.candidates] == ["h100-a", "h100-b", "a100-unhealthy", "h100-c"]
    assert report.best is not None and report.best.node == "h100-a"
    # cordoned and NotReady-tainted nodes are never candidates
    assert report.unresolvable_nodes == 2


def test_preemption_cannot_help_across_taints() -> None:
    objs = [node("n1"), pod("ml", "low", node_name="n1", containers=[container("m", 8)], priority=0),
            pod("ml", "high", containers=[container("m", 8)], priority=100, tolerate_gpu=False)]
    state = ClusterState.from_objects(objs)
    report = analyse_preemption(state, FitAnalyser(state).analyse(_pod(state, "ml/high")))
    assert report.eligible and not report.helps
    assert "taints" in report.note


def test_holders_in_the_way_are_the_pods_on_nodes_that_could_fit(state: ClusterState) -> None:
    analyser = FitAnalyser(state)
    holders = holders_in_the_way(state, analyser.analyse(_pod(state, "ml/big-train")))
    assert {(h.node, h.pod.key, h.gpus) for h in holders} == {
        ("h100-a", "ml/train-a", 4), ("h100-a", "ml/notebook-idle", 2),
        ("h100-b", "ml/init-pod", 3), ("h100-b", "ml/sidecar-pod", 3),
        ("h100-c", "ml/train-c", 4), ("h100-c", "ml/terminating", 2),
    }


def test_scheduler_verdict_prefers_the_condition_then_events(state: ClusterState) -> None:
    big = scheduler_verdict(_pod(state, "ml/big-train"), state.events)
    assert big.source == "condition" and big.reason == "Unschedulable"
    assert big.message is not None and big.message.nodes == 10
    assert big.message.preemption is not None and not big.message.preemption.eligible
    fits_now = scheduler_verdict(_pod(state, "ml/fits-now"), state.events)
    assert fits_now.source == "event" and fits_now.event_count == 3
    assert fits_now.message is not None and fits_now.message.insufficient() == {"nvidia.com/gpu": 8, "cpu": 2}


def test_events_of_an_earlier_pod_with_the_same_name_are_ignored(state: ClusterState) -> None:
    stale = pod("ml", "fits-now", containers=[container("m", 1)])
    stale["metadata"]["uid"] = "uid-of-the-recreated-pod"
    info = ClusterState.from_objects([stale]).pods[0]
    assert state.events.for_pod(info) == []


def test_preemption_analyser_shares_reports_between_identical_pods(state: ClusterState) -> None:
    twin = pod("ml", "medium-2", containers=[container("main", 4)], priority=None, priority_class="high",
               preemption_policy=None)
    twin_state = ClusterState.from_objects([*all_objects(), twin])
    fits, preemption = FitAnalyser(twin_state), PreemptionAnalyser(twin_state)
    first = preemption.analyse(fits.analyse(_pod(twin_state, "ml/medium")))
    second = preemption.analyse(fits.analyse(_pod(twin_state, "ml/medium-2")))
    assert second.pod.name == "medium-2" and second.candidates is first.candidates
    assert [c.node for c in second.candidates][:1] == ["h100-a"]


def test_candidate_budget_follows_the_scheduler_defaults() -> None:
    # max(10 % of potential nodes, 100), never more than there are
    assert candidate_budget(40) == 40
    assert candidate_budget(500) == 100
    assert candidate_budget(5000) == 500

"""Reasons per pending pod, in the order of what fixes them, and the per-pool summary."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from policies.pending import diagnose as dg
from policies.pending.diagnose import GpuUse, diagnose
from policies.pending.state import ClusterState
from tests.support.cluster_objects import H100, all_objects

USE = {
    ("ml", "notebook-idle"): GpuUse(0.0, 0.0, 120),
    ("ml", "init-pod"): GpuUse(0.4, 0.2, 120),
    ("ml", "train-a"): GpuUse(99.0, 91.0, 120),
    ("ml", "sidecar-pod"): GpuUse(60.0, 40.0, 120),
}


@pytest.fixture(scope="module")
def state() -> ClusterState:
    return ClusterState.from_objects(all_objects())


def _kinds(d: dg.Diagnosis) -> dict[str, list[str]]:
    return {f"{p.pod.namespace}/{p.pod.name}": [r.kind for r in p.reasons] for p in d.pods}


def test_reason_kinds_per_pod_in_fix_order(state: ClusterState) -> None:
    result = diagnose(state, static={"ml/big-train": ["[gpu-shared-memory] example finding"]}, use=USE)
    assert _kinds(result) == {
        "ml/big-train": [dg.STATIC, dg.SCHEDULER, dg.FRAGMENTATION, dg.IDLE_HOLDERS],
        "ml/fits-now": [dg.SCHEDULER],
        "ml/gated": [dg.GATED],
        "ml/medium": [dg.SCHEDULER, dg.FRAGMENTATION, dg.UNHEALTHY, dg.PLUGIN_DOWN, dg.IDLE_HOLDERS, dg.PREEMPTIBLE],
        "research/urgent": [dg.SCHEDULER, dg.FRAGMENTATION, dg.UNHEALTHY, dg.PLUGIN_DOWN, dg.IDLE_HOLDERS,
                            dg.PREEMPTIBLE],
    }
    for p in result.pods:
        order = [dg.KINDS.index(r.kind) for r in p.reasons]
        assert order == sorted(order), p.pod.key


def test_fragmentation_and_idle_holders_evidence(state: ClusterState) -> None:
    result = diagnose(state, use=USE)
    big = next(p for p in result.pods if p.pod.name == "big-train")
    frag = next(r for r in big.reasons if r.kind == dg.FRAGMENTATION)
    assert frag.nodes == ("h100-a", "h100-b")
    idle = next(r for r in big.reasons if r.kind == dg.IDLE_HOLDERS)
    assert idle.pods == ("ml/init-pod", "ml/notebook-idle")
    assert "5 GPUs" in idle.message and "owner StatefulSet/notebook" in idle.message
    scheduler = next(r for r in big.reasons if r.kind == dg.SCHEDULER)
    assert scheduler.message.startswith("PodScheduled condition: 3 of 10 nodes: not enough nvidia.com/gpu left")
    assert "preemptionPolicy: Never" in scheduler.message


def test_health_preemption_and_waiting(state: ClusterState) -> None:
    result = {p.pod.key: p for p in diagnose(state).pods}
    medium = result["ml/medium"]
    down = next(r for r in medium.reasons if r.kind == dg.PLUGIN_DOWN)
    assert down.nodes == ("a100-down", "a100-gone", "a100-never")
    unhealthy = next(r for r in medium.reasons if r.kind == dg.UNHEALTHY)
    assert unhealthy.nodes == ("a100-unhealthy", "a100-cordoned", "l4-notready")
    pre = next(r for r in medium.reasons if r.kind == dg.PREEMPTIBLE)
    assert pre.pods == ("ml/notebook-idle",) and "best node h100-a" in pre.message
    urgent = next(r for r in result["research/urgent"].reasons if r.kind == dg.PREEMPTIBLE)
    assert urgent.pods == ("ml/terminating",) and urgent.nodes == ("h100-c",)
    # no utilization data: no idle-holders reason and no idle column
    assert all(r.kind != dg.IDLE_HOLDERS for p in result.values() for r in p.reasons)


def test_json_shape_matches_the_issue(state: ClusterState) -> None:
    doc = diagnose(state, use=USE).to_dict()
    assert set(doc) == {"pods", "workloads", "cluster"}
    first = doc["pods"][0]
    assert set(first) == {"name", "namespace", "gpus", "reasons"}
    assert all(set(r) <= {"kind", "message", "nodes", "pods"} and r["kind"] in dg.KINDS
               for p in doc["pods"] for r in p["reasons"])
    pools = {p["name"]: p for p in doc["cluster"]["pools"]}
    h100 = pools[f"{H100} (p5.48xlarge)"]
    assert h100 == {"name": f"{H100} (p5.48xlarge)", "resource": "nvidia.com/gpu", "allocatable": 24,
                    "allocated": 18, "free": 4, "idle": 5}
    assert "idle" not in diagnose(state).to_dict()["cluster"]["pools"][0]


def test_pods_younger_than_the_window_are_not_idle_holders(state: ClusterState) -> None:
    # init-pod started 11:00, notebook-idle the day before: a window from 10:30 keeps only the notebook
    result = diagnose(state, use=USE, window_start=datetime(2026, 11, 30, 10, 30, tzinfo=UTC))
    big = next(p for p in result.pods if p.pod.name == "big-train")
    idle = next(r for r in big.reasons if r.kind == dg.IDLE_HOLDERS)
    assert idle.pods == ("ml/notebook-idle",)
    h100 = next(p for p in result.pools if p.pool.name.startswith(H100))
    assert h100.idle == 2


def test_terminating_holders_are_not_named_idle(state: ClusterState) -> None:
    """ml/terminating (deletionTimestamp set, a preemption victim) holds 2 idle GPUs on h100-c; it
    counts in the pool's idle GPUs but is no reclaim candidate: it is already going."""
    use = {**USE, ("ml", "terminating"): GpuUse(0.0, 0.0, 120)}
    result = diagnose(state, use=use)
    big = next(p for p in result.pods if p.pod.name == "big-train")
    idle = next(r for r in big.reasons if r.kind == dg.IDLE_HOLDERS)
    assert "ml/terminating" not in idle.pods
    h100 = next(p for p in result.pools if p.pool.name.startswith(H100))
    assert h100.idle == 2 + 3 + 2  # notebook-idle, init-pod and the terminating pod

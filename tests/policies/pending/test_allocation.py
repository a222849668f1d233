"""Effective requests, per-node and per-pool GPU allocation, and device-plugin health."""

from __future__ import annotations

import pytest

from policies.pending import health
from policies.pending.objects import PodReader, PriorityClasses
from policies.pending.state import ClusterState
from tests.support.cluster_objects import A100, H100, all_objects, container, node, pod, priority_class, scenario


@pytest.fixture(scope="module")
def state() -> ClusterState:
    return ClusterState.from_objects(all_objects())


def test_effective_requests_count_init_containers_sidecars_and_overhead() -> None:
    reader = PodReader()
    init = reader.read(pod("ns", "p", init_containers=[container("fetch", 3)], containers=[container("main", 1)]))
    assert init is not None and init.gpus == {"nvidia.com/gpu": 3}
    # sidecar (restartable init) runs alongside: 1 + 2; a later plain init container needs 2 + the
    # sidecar started before it = 3 (KEP-753, resource.PodRequests)
    sidecar = reader.read(pod("ns", "s", init_containers=[
        container("proxy", 1, restartPolicy="Always"), container("warmup", 2)], containers=[container("main", 2)]))
    assert sidecar is not None and sidecar.gpus == {"nvidia.com/gpu": 3}
    over = reader.read(pod("ns", "o", containers=[container("main", 1, cpu="2")],
                           overhead={"cpu": "250m", "memory": "120Mi"}))
    assert over is not None and over.other["cpu"] == 2250  # milli-CPU, as the scheduler sums them
    assert over.other["memory"] == 4 * 2**30 + 120 * 2**20


def test_limits_only_gpu_counts_as_the_request() -> None:
    obj = pod("ns", "l", containers=[{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 2}}}])
    info = PodReader().read(obj)
    assert info is not None and info.gpus == {"nvidia.com/gpu": 2}


def test_pod_level_resources_replace_cpu_memory_but_never_gpus() -> None:
    obj = pod("ns", "pl", containers=[container("main", 1, cpu="1", memory="1Gi")])
    obj["spec"]["resources"] = {"requests": {"cpu": "4", "memory": "8Gi"}}
    info = PodReader().read(obj)
    assert info is not None
    assert info.other["cpu"] == 4000 and info.other["memory"] == 8 * 2**30 and info.gpus == {"nvidia.com/gpu": 1}


def test_priority_resolved_from_the_class_when_admission_did_not_fill_it() -> None:
    classes = PriorityClasses.from_objects([priority_class("high", 1500),
                                            priority_class("low", 7, global_default=True, preemption_policy="Never")])
    reader = PodReader(priority_classes=classes)
    named = reader.read(pod("ns", "a", priority=None, priority_class="high", preemption_policy=None))
    default = reader.read(pod("ns", "b", priority=None, preemption_policy=None))
    filled = reader.read(pod("ns", "c", priority=42, priority_class="high"))
    assert named is not None and (named.priority, named.preemption_policy) == (1500, "PreemptLowerPriority")
    assert default is not None and (default.priority, default.preemption_policy) == (7, "Never")
    assert filled is not None and filled.priority == 42


def test_per_node_allocation_counts_only_non_terminal_bound_pods(state: ClusterState) -> None:
    nodes = state.allocation.nodes
    a, b, c = (nodes[n].gpus["nvidia.com/gpu"] for n in ("h100-a", "h100-b", "h100-c"))
    assert (a.allocatable, a.allocated, a.nominated, a.free) == (8, 6, 0, 2)
    # init-pod (bound, still Pending) 3 + sidecar-pod 3; done-job (Succeeded) and crashed (Failed) hold nothing
    assert (b.allocated, b.free) == (6, 2)
    # train-c 4 + terminating 2 (deletionTimestamp set, still counts); urgent (4, nominated) reserves
    assert (c.allocated, c.nominated, c.free) == (6, 4, 0)
    assert "cpu-1" not in nodes
    assert [p.key for p in state.allocation.unknown_node_pods] == ["ml/ghost-runner"]


def test_nominated_reservations_apply_to_equal_or_lower_priority_pods_only(state: ClusterState) -> None:
    c = state.allocation.nodes["h100-c"]
    assert c.free("nvidia.com/gpu", priority=0) == 0
    assert c.free("nvidia.com/gpu", priority=2000) == 0  # equal priority: reserved
    assert c.free("nvidia.com/gpu", priority=2001) == 2  # higher priority ignores the nomination
    assert c.free("nvidia.com/gpu", priority=2000, exclude_uid="uid-research-urgent") == 2  # its own


def test_pools_group_by_product_and_instance_type(state: ClusterState) -> None:
    pools = {p.name: p for p in state.allocation.pools}
    assert set(pools) == {f"{H100} (p5.48xlarge)", f"{A100} (p4de.24xlarge)", "NVIDIA-L4 (g6.12xlarge)"}
    h100 = pools[f"{H100} (p5.48xlarge)"]
    assert (h100.nodes, h100.allocatable, h100.allocated, h100.reserved, h100.free) == (3, 24, 18, 4, 4)
    a100 = pools[f"{A100} (p4de.24xlarge)"]
    assert (a100.nodes, a100.capacity, a100.allocatable, a100.allocated, a100.unhealthy) == (5, 24, 15, 7, 9)
    assert (a100.unavailable_nodes, a100.free_on_unavailable) == (1, 8)


def test_health_issues_follow_the_device_manager_rules(state: ClusterState) -> None:
    issues = {(i.node, i.kind): i for i in health.cluster_issues(list(state.allocation.nodes.values()))}
    assert set(issues) == {
        ("a100-unhealthy", health.UNHEALTHY),
        ("a100-down", health.PLUGIN_DOWN),
        ("a100-gone", health.PLUGIN_DOWN),
        ("a100-never", health.PLUGIN_DOWN),
        ("a100-cordoned", health.CORDONED),
        ("l4-notready", health.NOT_READY),
    }
    assert issues[("a100-unhealthy", health.UNHEALTHY)].gpus == 1
    assert "within the last 5 minutes" in issues[("a100-down", health.PLUGIN_DOWN)].message
    assert "more than 5 minutes" in issues[("a100-gone", health.PLUGIN_DOWN)].message
    assert "never registered" in issues[("a100-never", health.PLUGIN_DOWN)].message
    assert "KubeletNotReady" in issues[("l4-notready", health.NOT_READY)].message


def test_mig_mixed_and_shared_resources_are_not_a_plugin_outage() -> None:
    mixed = node("mig-node", product=A100, capacity=0, allocatable=0)
    mixed["metadata"]["labels"].update({"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-1g.10gb.count": "56"})
    mixed["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "56"
    mixed["status"]["capacity"]["nvidia.com/mig-1g.10gb"] = "56"
    shared = node("shared-node", capacity=None, allocatable=None)
    shared["status"]["allocatable"]["nvidia.com/gpu.shared"] = "32"
    shared["status"]["capacity"]["nvidia.com/gpu.shared"] = "32"
    state = ClusterState.from_objects([mixed, shared])
    assert health.cluster_issues(list(state.allocation.nodes.values())) == []
    assert state.allocation.nodes["mig-node"].gpus["nvidia.com/mig-1g.10gb"].allocatable == 56


def test_malformed_objects_are_skipped_not_fatal() -> None:
    parts = scenario()
    broken = [
        {"kind": "Node"},
        {"kind": "Node", "metadata": {"name": "x"}, "status": {"allocatable": "lots"}},
        {"kind": "Pod", "metadata": {"name": 3}},
        {"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": "nope", "nodeName": 5}},
        {"kind": "PriorityClass", "metadata": {}, "value": "high"},
        "not an object",
    ]
    state = ClusterState.from_objects([*parts["nodes"], *broken])
    assert "x" not in state.allocation.nodes
    assert [p.name for p in state.pods] == ["p"]

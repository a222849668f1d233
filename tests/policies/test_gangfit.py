"""policies.gangfit: whole pods per node by every resource, node groups, pools up to their limits."""

from __future__ import annotations

from typing import Any

import pytest

from gpuguard.sources.configmodel import load_config
from policies.config import Config
from policies.effective_facts import effective_facts
from policies.facts import ClusterFacts
from policies.facts_build import facts_from_objects
from policies.gangfit import UNBOUNDED, check_gang, per_node, pod_shape
from policies.gangs import gang_of
from policies.podspec import extract

IS_GPU = Config().is_gpu


def node(name: str, gpus: int = 8, cpu: str = "96", memory: str = "1000Gi", pods: str = "110",
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods, "nvidia.com/gpu": str(gpus)}}}


def job(workers: int, limits: dict[str, Any], master: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    def replica(n: int, lim: dict[str, Any]) -> dict[str, Any]:
        return {"replicas": n, "template": {"spec": {**spec, "containers": [
            {"name": "c", "image": "i", "resources": {"limits": lim, "requests": lim}}]}}}
    specs = {"Worker": replica(workers, limits)}
    if master is not None:
        specs["Master"] = replica(1, master)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "ml"},
            "spec": {"pytorchReplicaSpecs": specs}}


def short(obj: dict[str, Any], facts: ClusterFacts) -> Any:
    gang = gang_of(obj, extract(obj))
    assert gang is not None
    return check_gang(gang, facts, IS_GPU)


def test_pod_shape_counts_every_resource_and_a_pod_slot() -> None:
    (pod,) = extract(job(1, {"nvidia.com/gpu": 2, "cpu": "1500m", "memory": "2Gi", "ephemeral-storage": "10Gi"}),
                     None)[:1]
    assert dict(pod_shape(pod)) == {"nvidia.com/gpu": 2, "cpu": 1500, "memory": 2 * 2**30,
                                    "ephemeral-storage": 10 * 2**30, "pods": 1}
    assert per_node({"nvidia.com/gpu": 8, "cpu": 4000, "pods": 110}, pod_shape(pod)) == 2  # cpu bounds it
    assert per_node({}, pod_shape(pod)) == UNBOUNDED


@pytest.mark.parametrize(("limits", "fits"), [
    ({"nvidia.com/gpu": 4}, True),  # two per node: 6 pods on 3 nodes
    ({"nvidia.com/gpu": 4, "cpu": "60"}, False),  # cpu: one per 96-cpu node
    ({"nvidia.com/gpu": 1, "memory": "600Gi"}, False),  # memory: one per node
])
def test_whole_pods_by_every_resource(limits: dict[str, Any], fits: bool) -> None:
    facts = facts_from_objects([node(f"n{i}") for i in range(3)])
    assert (short(job(6, limits), facts) is None) is fits


def test_pod_slots_bound_the_room() -> None:
    facts = facts_from_objects([node("n0", gpus=8, pods="3")])
    found = short(job(4, {"nvidia.com/gpu": 1}), facts)
    assert found is not None and found.room == 3 and found.certain


def test_nodes_of_a_group_that_differ_by_a_few_kib_are_each_counted() -> None:
    # One group (same labels and extended resources); memory 1000Gi and 1000Gi - 1Ki: a pod of 500Gi
    # fits twice on the first, once on the second.
    facts = facts_from_objects([node("a", memory="1000Gi"), node("b", memory=f"{1000 * 2**30 - 1024}")])
    assert len(facts.groups) == 1
    found = short(job(4, {"nvidia.com/gpu": 1, "memory": "500Gi"}), facts)
    assert found is not None and found.room == 3
    assert short(job(3, {"nvidia.com/gpu": 1, "memory": "500Gi"}), facts) is None


def test_mixed_shapes_are_bounded_by_their_smallest_requests() -> None:
    # 1 master + 2 workers of 6 GPUs on two 8-GPU nodes: each node holds one of them.
    facts = facts_from_objects([node("a"), node("b")])
    found = short(job(2, {"nvidia.com/gpu": 6}, master={"nvidia.com/gpu": 6, "cpu": "2"}), facts)
    assert found is not None and found.whole and (found.need, found.room) == (3, 2)
    # A CPU-only master goes anywhere: only the workers must fit.
    assert short(job(2, {"nvidia.com/gpu": 6}, master={"cpu": "2"}), facts) is None
    found = short(job(3, {"nvidia.com/gpu": 6}, master={"cpu": "2"}), facts)
    assert found is not None and not found.whole and [s.pod_set.name for s in found.sets] == ["Worker"]


def test_selectors_on_per_node_labels_count_only_the_selected_nodes() -> None:
    facts = facts_from_objects([node(f"n{i}") for i in range(4)])
    pinned = job(3, {"nvidia.com/gpu": 8}, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n0", "n1"]}]}]}}})
    found = short(pinned, facts)
    assert found is not None and found.room == 2


def nodepool(limits: dict[str, Any] | None = None, replicas: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"metadata": {"labels": {"pool": "gpu"}}, "spec": {
        "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5"]}],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}
    if limits is not None:
        spec["limits"] = limits
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu"}, "spec": spec}


SELECT_POOL = {"nodeSelector": {"pool": "gpu"}}


@pytest.mark.parametrize(("pool", "workers", "room"), [
    (nodepool({"nvidia.com/gpu": 32}), 5, 4),  # the issue's case: a gang of 5 × 8 against 32 GPUs
    (nodepool({"nvidia.com/gpu": 32}), 4, None),
    (nodepool({"nodes": 3}), 4, 3),  # limits.nodes: a node count
    (nodepool({"cpu": 1000}), 40, None),  # a limit on what the pods do not ask for bounds nothing
    (nodepool(), 400, None),  # no limits: unbounded by Karpenter's definition
    (nodepool(replicas=2), 3, 2),  # a static NodePool keeps that many nodes
])
def test_karpenter_pools_count_up_to_their_limits(pool: dict[str, Any], workers: int, room: int | None) -> None:
    facts = facts_from_objects([node("cpu-0", gpus=0), pool])
    found = short(job(workers, {"nvidia.com/gpu": 8}, **SELECT_POOL), facts)
    assert (found.room if found is not None else None) == room
    if found is not None:
        assert found.certain


def test_a_nodepool_limit_counts_what_its_nodes_already_hold() -> None:
    # Two p5 nodes the pool already created hold 16 of its 32 GPUs: 2 existing + 2 new pods at most.
    existing = [node(f"p5-{i}", labels={"pool": "gpu", "karpenter.sh/nodepool": "gpu"}) for i in range(2)]
    facts = facts_from_objects([*existing, nodepool({"nvidia.com/gpu": 32})])
    found = short(job(5, {"nvidia.com/gpu": 8}, **SELECT_POOL), facts)
    assert found is not None and found.room == 4
    assert short(job(4, {"nvidia.com/gpu": 8}, **SELECT_POOL), facts) is None


def test_a_declared_pool_without_max_nodes_gives_a_warning_and_with_one_an_error() -> None:
    facts = facts_from_objects([node("n0")])
    for max_nodes, certain in ((None, False), (2, True)):
        pool: dict[str, Any] = {"name": "a100", "labels": {"pool": "gpu"}, "resources": {"nvidia.com/gpu": 8}}
        if max_nodes is not None:
            pool["maxNodes"] = max_nodes
        config = load_config({"nodePools": [pool]})
        found = check_gang(gang_of(j := job(3, {"nvidia.com/gpu": 8}, **SELECT_POOL), extract(j)),  # type: ignore[arg-type]
                           effective_facts(facts, config), config.is_gpu)
        assert found is not None and found.certain is certain


def test_the_group_memo_serves_identical_shapes() -> None:
    facts = facts_from_objects([node(f"n{i}") for i in range(50)])
    first = short(job(60, {"nvidia.com/gpu": 8}), facts)
    again = short(job(60, {"nvidia.com/gpu": 8}), facts)
    assert first is not None and again is not None and first.room == again.room == 50

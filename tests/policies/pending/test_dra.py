"""The pending-pod analysis in a cluster where DRA serves GPUs (tests/fixtures/dra/nvidia-mixed-cluster.yaml:
NVIDIA's DRA driver beside its device plugin; gpu.nvidia.com sets extendedResourceName nvidia.com/gpu)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from policies.pending import diagnose as dg
from policies.pending import fit as fitmod
from policies.pending import health
from policies.pending.state import ClusterState
from tests.support.cluster_objects import container, pod
from tests.support.paths import FIXTURES

MIXED = FIXTURES / "dra" / "nvidia-mixed-cluster.yaml"


def mixed_items() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = yaml.safe_load(MIXED.read_text())["items"]
    return items


def without_dra(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in items if not str(o.get("apiVersion", "")).startswith("resource.k8s.io/")]


def h100_pod() -> dict[str, Any]:
    """A plain ``nvidia.com/gpu: 1`` limit aimed at the DRA-only H100 node (no device-plugin allocatable)."""
    return pod("ml", "dra-served", phase="Pending", containers=[container("main", 1)], node_selector={"pool": "h100"})


def with_gfd_labels(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """dra-h100-0 also labelled by GPU Feature Discovery (4 GPUs), as where the GPU Operator runs it."""
    out = copy.deepcopy(items)
    for obj in out:
        if obj.get("kind") == "Node" and obj["metadata"]["name"] == "dra-h100-0":
            obj["metadata"]["labels"].update({"nvidia.com/gpu.count": "4",
                                              "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    return out


def test_a_dra_served_extended_resource_is_not_called_insufficient() -> None:
    state = ClusterState.from_objects([*mixed_items(), h100_pod()])
    # the class's explicit name and the implicit deviceclass.resource.kubernetes.io/<class> (KEP-5004)
    assert state.dra_served == {"nvidia.com/gpu": ("gpu.nvidia.com",),
                                "deviceclass.resource.kubernetes.io/gpu.nvidia.com": ("gpu.nvidia.com",),
                                "deviceclass.resource.kubernetes.io/mig.nvidia.com": ("mig.nvidia.com",)}
    [pd] = dg.diagnose(state).pods
    assert pd.fit is not None and pd.fit.verdict == fitmod.DRA_SERVED
    kinds = [r.kind for r in pd.reasons]
    assert kinds == [dg.DRA_SERVED]
    assert "nvidia.com/gpu by DeviceClass gpu.nvidia.com" in pd.reasons[0].message
    assert pd.preemption is None


def test_the_same_pod_without_the_dra_objects_is_judged_by_device_plugin_counts() -> None:
    state = ClusterState.from_objects([*without_dra(mixed_items()), h100_pod()])
    assert state.dra_served == {}
    [pd] = dg.diagnose(state).pods
    assert pd.fit is not None and pd.fit.verdict == fitmod.NO_ELIGIBLE
    assert dg.INSUFFICIENT in [r.kind for r in pd.reasons]


@pytest.mark.parametrize(("dra", "down"), [(True, False), (False, True)])
def test_a_dra_node_labelled_by_gfd_has_no_device_plugin_down(dra: bool, down: bool) -> None:
    items = with_gfd_labels(mixed_items())
    state = ClusterState.from_objects(items if dra else without_dra(items))
    alloc = state.allocation.nodes["dra-h100-0"]
    assert (alloc.dra_gpus == frozenset({"nvidia.com/gpu"})) is dra
    kinds = [i.kind for i in health.node_issues(alloc)]
    assert (health.PLUGIN_DOWN in kinds) is down


def test_device_plugin_nodes_keep_their_health_checks_in_a_dra_cluster() -> None:
    items = copy.deepcopy(mixed_items())
    for obj in items:
        if obj.get("kind") == "Node" and obj["metadata"]["name"] == "dp-a100-0":
            obj["status"]["capacity"] = {"nvidia.com/gpu": "8"}
            obj["status"]["allocatable"]["nvidia.com/gpu"] = "6"
    state = ClusterState.from_objects(items)
    alloc = state.allocation.nodes["dp-a100-0"]
    assert alloc.dra_gpus == frozenset()
    assert [i.kind for i in health.node_issues(alloc)] == [health.UNHEALTHY]

"""Capacity that can appear: Karpenter NodePools, declared ``nodePools``, GPU nodes whose device
plugin has not registered yet — and the ExtendedResourceToleration behaviour of managed clusters.
Every facts rule sees them through the same scheduling model."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from policies import ClusterFacts, evaluate
from policies.config import Config, ConfigError
from policies.facts_build import facts_from_objects
from policies.types import Finding, Severity
from tests.support.paths import FIXTURES

CLUSTERS = FIXTURES / "clusters"
FACTS_RULES = {
    "gpu-resource-unknown", "gpu-exceeds-node-capacity", "gpu-taint-not-tolerated",
    "gpu-node-selector-mismatch", "gpu-unschedulable", "gpu-cuda-driver-mismatch",
}


def facts_of(name: str) -> ClusterFacts:
    return facts_from_objects(list(yaml.safe_load_all((CLUSTERS / name).read_text())))


def gpu_pod(gpus: Any = 1, resource: str = "nvidia.com/gpu", **spec: Any) -> dict[str, Any]:
    container = {"name": "train", "image": "nvidia/cuda:12.2.2-base-ubuntu22.04",
                 "resources": {"limits": {resource: gpus}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": [container], **spec}}


TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def facts_findings(obj: dict[str, Any], facts: ClusterFacts, config: Config | None = None) -> list[Finding]:
    return [f for f in evaluate(obj, config, facts).findings if f.rule in FACTS_RULES]


# --- a Karpenter cluster scaled to zero GPU nodes ---------------------------------------------

SCALE_TO_ZERO = "karpenter-scale-to-zero.yaml"


def test_a_pod_that_fits_only_a_pool_that_scales_up_is_not_an_error() -> None:
    facts = facts_of(SCALE_TO_ZERO)
    assert not any(name == "nvidia.com/gpu" for n in facts.nodes for name in n.allocatable)
    assert facts_findings(gpu_pod(8, tolerations=TOLERATE_GPU), facts) == []
    selected = gpu_pod(tolerations=TOLERATE_GPU, nodeSelector={"karpenter.sh/nodepool": "gpu", "accelerator": "nvidia"})
    assert facts_findings(selected, facts) == []
    family = gpu_pod(tolerations=TOLERATE_GPU, nodeSelector={"karpenter.k8s.aws/instance-family": "g6e"})
    assert facts_findings(family, facts) == []


def test_a_pod_that_fits_no_pool_is_still_an_error_naming_the_pool() -> None:
    facts = facts_of(SCALE_TO_ZERO)
    (taint,) = facts_findings(gpu_pod(), facts)
    assert (taint.rule, taint.severity) == ("gpu-taint-not-tolerated", Severity.ERROR)
    assert "Karpenter NodePool 'gpu' (scales up on demand): nvidia.com/gpu:NoSchedule" in taint.message
    assert taint.fix  # the toleration that opens the pool

    (too_many,) = facts_findings(gpu_pod(16, tolerations=TOLERATE_GPU), facts)
    assert too_many.rule == "gpu-exceeds-node-capacity" and too_many.severity is Severity.ERROR
    assert "no single node has more than 8 allocatable (Karpenter NodePool 'gpu'" in too_many.message

    (amd,) = facts_findings(gpu_pod(resource="amd.com/gpu", tolerations=TOLERATE_GPU), facts)
    assert amd.rule == "gpu-resource-unknown" and amd.severity is Severity.ERROR

    (family,) = facts_findings(
        gpu_pod(tolerations=TOLERATE_GPU, nodeSelector={"karpenter.k8s.aws/instance-family": "p5"}), facts
    )
    assert family.rule == "gpu-node-selector-mismatch" and family.severity is Severity.ERROR
    assert "karpenter.k8s.aws/instance-family in {g5, g5g, g6, g6e" in family.message
    assert "on Karpenter NodePool 'gpu' (scales up on demand)" in family.message

    (custom,) = facts_findings(gpu_pod(tolerations=TOLERATE_GPU, nodeSelector={"team": "ml"}), facts)
    assert custom.rule == "gpu-node-selector-mismatch"  # a label the NodePool does not define


def test_affinity_on_pool_labels_is_judged_per_key() -> None:
    facts = facts_of(SCALE_TO_ZERO)

    def with_terms(*exprs: dict[str, Any]) -> dict[str, Any]:
        affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]}}}
        return gpu_pod(tolerations=TOLERATE_GPU, affinity=affinity)

    generation = {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["5"]}
    assert facts_findings(with_terms(generation), facts) == []
    spot = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
    assert facts_findings(with_terms(generation, spot), facts) == []
    contradiction = {"key": "karpenter.sh/capacity-type", "operator": "NotIn", "values": ["spot"]}
    found = facts_findings(with_terms(spot, contradiction), facts)
    assert [f.rule for f in found] == ["gpu-node-selector-mismatch"]


def test_only_a_pool_of_unknown_shape_gives_a_warning_not_an_error() -> None:
    objects = list(yaml.safe_load_all((CLUSTERS / SCALE_TO_ZERO).read_text()))
    objects += list(yaml.safe_load_all((FIXTURES / "nodepools" / "aws-docs-gpu-p3.yaml").read_text()))
    objects[0]["items"] = [i for i in objects[0]["items"] if i["metadata"]["name"] != "gpu"]  # only the p3 pool
    facts = facts_from_objects(objects)
    toleration = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    (unknown,) = facts_findings(gpu_pod(tolerations=toleration), facts)
    assert (unknown.rule, unknown.severity) == ("gpu-resource-unknown", Severity.WARNING)
    assert "only Karpenter NodePool 'gpu' (scales up on demand), whose GPU shape is unknown" in unknown.message
    assert "karpenter.k8s.aws/instance-gpu-count open" in unknown.message
    assert unknown.fix == ()
    # A pod the unknown-shape pool would not take either is still an error.
    (taint,) = facts_findings(gpu_pod(), facts)
    assert (taint.rule, taint.severity) == ("gpu-taint-not-tolerated", Severity.ERROR)


def test_a_severity_set_in_config_still_wins_over_the_hedge() -> None:
    objects = list(yaml.safe_load_all((FIXTURES / "nodepools" / "aws-docs-gpu-p3.yaml").read_text()))
    facts = facts_from_objects(objects)
    config = load_config({"rules": {"gpu-resource-unknown": {"severity": "error"}}})
    (unknown,) = facts_findings(gpu_pod(tolerations=TOLERATE_GPU), facts, config)
    assert unknown.severity is Severity.ERROR


# --- declared node pools --------------------------------------------------------------------

def cpu_only() -> ClusterFacts:
    return facts_from_objects([{"apiVersion": "v1", "kind": "Node",
                                       "metadata": {"name": "cpu-1", "labels": {"kubernetes.io/arch": "amd64"}},
                                       "status": {"allocatable": {"cpu": "8"}}}])


A100_POOL = {
    "name": "a100-spot",
    "labels": {"cloud.google.com/gke-accelerator": "nvidia-tesla-a100", "cloud.google.com/gke-spot": "true"},
    "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
    "resources": {"nvidia.com/gpu": 8},
    "gpuProduct": "NVIDIA-A100-SXM4-40GB",
    "driverVersion": "535.129.03",
}


def test_declared_pools_are_nodes_that_can_exist() -> None:
    config = load_config({"nodePools": [A100_POOL]})
    pod = gpu_pod(8, tolerations=TOLERATE_GPU, nodeSelector={"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"})
    assert [f.rule for f in facts_findings(pod, cpu_only())] == ["gpu-resource-unknown"]
    assert facts_findings(pod, cpu_only(), config) == []
    # Well-known labels take values decided at scale-up; undeclared custom labels are absent.
    zoned = copy.deepcopy(pod)
    zoned["spec"]["nodeSelector"]["topology.kubernetes.io/zone"] = "us-central1-a"
    assert facts_findings(zoned, cpu_only(), config) == []
    other = copy.deepcopy(pod)
    other["spec"]["nodeSelector"]["cloud.google.com/gke-nodepool"] = "a100"
    (mismatch,) = facts_findings(other, cpu_only(), config)
    assert mismatch.rule == "gpu-node-selector-mismatch" and "node pool 'a100-spot'" in mismatch.message
    (big,) = facts_findings(gpu_pod(16, tolerations=TOLERATE_GPU), cpu_only(), config)
    assert big.rule == "gpu-exceeds-node-capacity" and "node pool 'a100-spot' (scales up on demand)" in big.message


def test_a_label_no_pool_node_carries_reads_as_absent() -> None:
    config = load_config({"nodePools": [A100_POOL]})
    pod = gpu_pod(tolerations=TOLERATE_GPU, nodeSelector={"nvidia.com/gpu.present": "true"})
    (mismatch,) = facts_findings(pod, cpu_only(), config)
    assert ("they carry no nvidia.com/gpu.present label on node pool 'a100-spot' (scales up on demand)"
            in mismatch.message)
    assert "with no value" not in mismatch.message
    pinned = gpu_pod(tolerations=TOLERATE_GPU, nodeSelector={"kubernetes.io/hostname": "gpu-box"})
    (mismatch,) = facts_findings(pinned, cpu_only(), config)
    assert ("kubernetes.io/hostname with each new node's own value on node pool 'a100-spot' (scales up on demand)"
            in mismatch.message)


def test_selector_pairs_no_single_node_carries_are_named() -> None:
    t4 = {**A100_POOL, "name": "t4", "labels": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
          "gpuProduct": "Tesla-T4"}
    config = load_config({"nodePools": [A100_POOL, t4]})
    both = {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4", "cloud.google.com/gke-spot": "true"}
    (mismatch,) = facts_findings(gpu_pod(tolerations=TOLERATE_GPU, nodeSelector=both), cpu_only(), config)
    assert mismatch.path == "/spec/nodeSelector"
    assert mismatch.message.startswith(
        "the nodeSelector labels cloud.google.com/gke-accelerator=nvidia-tesla-t4, cloud.google.com/gke-spot=true "
        "together match none of the nodes offering nvidia.com/gpu")
    assert "affinity" not in mismatch.message
    term = {"matchExpressions": [{"key": "cloud.google.com/gke-spot", "operator": "In", "values": ["true"]}]}
    mixed = gpu_pod(tolerations=TOLERATE_GPU, nodeSelector={"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"},
                    affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [term]}}})
    (mismatch,) = facts_findings(mixed, cpu_only(), config)
    assert mismatch.message.startswith(
        "nodeSelector cloud.google.com/gke-accelerator=nvidia-tesla-t4 and the required node affinity together "
        "match none")


def test_declared_pool_driver_version_reaches_the_cuda_rule() -> None:
    config = load_config({"nodePools": [A100_POOL]})
    pod = gpu_pod(tolerations=TOLERATE_GPU)
    pod["spec"]["containers"][0]["image"] = "nvidia/cuda:13.0.2-runtime-ubuntu22.04"
    found = facts_findings(pod, cpu_only(), config)
    assert [(f.rule, f.severity) for f in found] == [("gpu-cuda-driver-mismatch", Severity.WARNING)]
    assert ("forward compatibility: node pool 'a100-spot' (scales up on demand) (NVIDIA-A100-SXM4-40GB) "
            "driver 535.129.03") in found[0].message


def test_declared_pools_without_cluster_facts_add_nothing() -> None:
    config = load_config({"nodePools": [A100_POOL]})
    ev = evaluate(gpu_pod(), config, ClusterFacts.empty())
    assert ev.facts.is_empty and "gpu-resource-unknown" in ev.skipped_rules


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"nodePools": {"a": 1}}, "nodePools: expected a list"),
        ({"nodePools": [{"labels": {}}]}, "nodePools[0].name: expected a non-empty string"),
        ({"nodePools": [{"name": "a", "size": 3}]}, "nodePools[0].size: unknown key"),
        ({"nodePools": [{"name": "a"}, {"name": "a"}]}, "nodePools[1].name: 'a' is declared twice"),
        ({"nodePools": [{"name": "a", "taints": [{"key": "k", "effect": "Sometimes"}]}]},
         "nodePools[0].taints[0].effect: expected one of NoSchedule"),
        ({"nodePools": [{"name": "a", "taints": [{"key": "k", "effect": "NoSchedule", "operator": "x"}]}]},
         "nodePools[0].taints[0].operator: unknown key"),
        ({"nodePools": [{"name": "a", "resources": {"nvidia.com/gpu": "many"}}]},
         "nodePools[0].resources.nvidia.com/gpu: expected a non-negative quantity"),
        ({"nodePools": [{"name": "a", "labels": {"x": {"y": 1}}}]}, "nodePools[0].labels.x: expected a label value"),
        ({"nodePools": [{"name": "a", "driverVersion": 550.9}]}, "nodePools[0].driverVersion (quote it)"),
        ({"nodePools": [{"name": "a", "driverVersion": "r550"}]}, "nodePools[0].driverVersion: expected a driver"),
        ({"extendedResourceToleration": "yes"}, "extendedResourceToleration: expected true or false"),
    ],
)
def test_bad_pool_config_names_the_key(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match="^" + message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
                       .replace(")", r"\)")):
        load_config(raw)


# --- GPU nodes whose device plugin has not registered yet --------------------------------------

def test_a_gpu_node_without_advertised_gpus_yet_gives_a_warning() -> None:
    starting: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": "gpu-new", "labels": {"nvidia.com/gpu.present": "true"}},
                                "status": {"allocatable": {"cpu": "96"}}}
    facts = facts_from_objects([starting])
    (unknown,) = facts_findings(gpu_pod(), facts)
    assert (unknown.rule, unknown.severity) == ("gpu-resource-unknown", Severity.WARNING)
    assert "gpu-new (nvidia.com/gpu.present=true but no GPU advertised yet: device plugin starting?)" in unknown.message
    # Once it advertises GPUs, nothing is pending any more; with the device plugin disabled, nothing will come.
    disabled = copy.deepcopy(starting)
    disabled["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"] = "false"
    (error,) = facts_findings(gpu_pod(), facts_from_objects([disabled]))
    assert error.severity is Severity.ERROR


# --- ExtendedResourceToleration ---------------------------------------------------------------

def test_gke_nodes_mean_gpu_pods_get_the_gpu_toleration() -> None:
    facts = facts_of("gke.yaml")
    assert facts.tolerates_extended_resources
    assert "GKE" in (facts.extended_resource_toleration_reason or "")
    assert facts_findings(gpu_pod(nodeSelector={"cloud.google.com/gke-accelerator": "nvidia-l4"}), facts) == []


def test_extended_resource_toleration_covers_only_taints_keyed_by_the_resource() -> None:
    facts = facts_of("gke.yaml")
    dedicated = yaml.safe_load((CLUSTERS / "gke.yaml").read_text())
    for node in dedicated["items"]:
        if "nvidia.com/gpu" in node["status"]["allocatable"]:
            node["spec"]["taints"].append({"key": "dedicated", "value": "training", "effect": "NoSchedule"})
    facts = facts_from_objects([dedicated])
    (taint,) = facts_findings(gpu_pod(), facts)
    assert taint.rule == "gpu-taint-not-tolerated"
    assert "dedicated=training:NoSchedule" in taint.message and "nvidia.com/gpu=present" not in taint.message


def test_config_overrides_detection_both_ways() -> None:
    gke = facts_of("gke.yaml")
    off = load_config({"extendedResourceToleration": False})
    assert [f.rule for f in facts_findings(gpu_pod(), gke, off)] == ["gpu-taint-not-tolerated"]
    tainted = facts_of(SCALE_TO_ZERO)
    assert not tainted.tolerates_extended_resources
    on = load_config({"extendedResourceToleration": True})
    assert facts_findings(gpu_pod(), tainted, on) == []
    ev = evaluate(gpu_pod(), on, tainted)
    assert ev.facts.extended_resource_toleration_reason == "configured (extendedResourceToleration: true)"


def test_aks_nodes_are_detected_too() -> None:
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "aks-gpu-1", "labels": {"kubernetes.azure.com/cluster": "MC_rg_aks_eastus"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"nvidia.com/gpu": "1"}}}
    facts = facts_from_objects([node])
    assert "AKS" in (facts.extended_resource_toleration_reason or "")
    assert facts_findings(gpu_pod(), facts) == []


def test_selecting_another_nodepool_lists_what_the_pools_carry() -> None:
    facts = facts_of(SCALE_TO_ZERO)
    (mismatch,) = facts_findings(gpu_pod(tolerations=TOLERATE_GPU, nodeSelector={"karpenter.sh/nodepool": "gpu-x"}), facts)
    assert mismatch.rule == "gpu-node-selector-mismatch"
    assert "they carry karpenter.sh/nodepool=gpu on Karpenter NodePool 'gpu' (scales up on demand)" in mismatch.message


def test_a_network_operator_nic_is_named_as_one_not_taken_for_a_misspelt_gpu() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    pod = gpu_pod(8)
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/hostdev"] = 8
    (unknown,) = facts_findings(pod, facts_from_objects([node]))
    assert unknown.rule == "gpu-resource-unknown" and unknown.path.endswith("/nvidia.com~1hostdev")
    assert "the NVIDIA Network Operator's host-device NIC (SR-IOV/RDMA) resource" in unknown.message
    assert "did you mean" not in unknown.message
    misspelt = gpu_pod(1, resource="nvidia.com/gpus")
    (typo,) = facts_findings(misspelt, facts_from_objects([node]))
    assert "did you mean nvidia.com/gpu?" in typo.message

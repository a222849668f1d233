"""Karpenter NodePools read as capacity that can appear: real NodePools from public repositories
(tests/fixtures/nodepools, each file naming its source) and hand-made edge cases."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.aws_instances import aws_instance_table
from policies.facts import ClusterFacts, NodeFacts, Taint
from policies.facts_build import facts_from_objects
from policies.karpenter import nodepool_from_object
from tests.support.paths import FIXTURES

NODEPOOLS = FIXTURES / "nodepools"


def pools_of(name: str) -> dict[str, NodeFacts]:
    facts = facts_from_objects(list(yaml.safe_load_all((NODEPOOLS / name).read_text())))
    assert not facts.nodes
    return {p.name: p for p in facts.pools}


def test_every_fixture_names_its_source() -> None:
    for path in NODEPOOLS.glob("*.yaml"):
        assert path.read_text().startswith("# Source: "), path.name


def test_aws_general_purpose_pool_offers_no_gpu() -> None:
    """aws/karpenter-provider-aws examples/v1/general-purpose.yaml: categories c, m, r."""
    (pool,) = pools_of("aws-general-purpose.yaml").values()
    assert pool.name == "general-purpose"
    assert not any(name.endswith("/gpu") for name in pool.allocatable) and not pool.may_offer
    assert pool.labels["karpenter.sh/nodepool"] == "general-purpose"
    assert pool.labels["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert pool.labels["karpenter.sh/capacity-type"] == "on-demand"  # a single-valued requirement is a label
    assert pool.taints == ()
    assert pool.label_domain("karpenter.k8s.aws/instance-category").possible_values() == frozenset({"c", "m", "r"})


@pytest.mark.parametrize("name", ["ai-on-eks-gpu.yaml", "ai-on-eks-auto-mode-gpu.yaml"])
def test_ai_on_eks_gpu_pool_has_the_gpus_of_the_instance_types_it_admits(name: str) -> None:
    """Category g, generation > 4: the g5 and newer NVIDIA instance types of the AWS table."""
    (pool,) = pools_of(name).values()
    prefix = "eks.amazonaws.com/" if "auto-mode" in name else "karpenter.k8s.aws/"
    admitted = [
        row for row in aws_instance_table().gpu_instance_types
        if row.labels["instance-category"] == "g" and int(row.labels["instance-generation"]) > 4
    ]
    assert admitted, "the AWS table has g5 and newer GPU instance types"
    assert pool.allocatable == {"nvidia.com/gpu": max(r.resources["nvidia.com/gpu"] for r in admitted)}
    assert "amd.com/gpu" not in pool.allocatable  # g4ad is generation 4
    assert not pool.may_offer
    assert pool.taints == (Taint("nvidia.com/gpu", "", "NoSchedule"),)
    assert pool.labels["accelerator"] == "nvidia"
    assert pool.labels[prefix + "instance-category"] == "g"


def test_unknown_instance_family_leaves_the_gpu_shape_open() -> None:
    """The Karpenter docs' GPU NodePool asks for family p3, which the AWS table does not list."""
    (pool,) = pools_of("aws-docs-gpu-p3.yaml").values()
    assert "p3" not in aws_instance_table().families
    assert pool.allocatable == {}
    assert pool.may_offer == {"nvidia.com/gpu", "amd.com/gpu"}
    assert pool.pool is not None and "karpenter.k8s.aws/instance-gpu-count" in pool.pool.shape_note
    assert pool.taints == (Taint("nvidia.com/gpu", "true", "NoSchedule"),)


def test_azure_pool_without_gpu_labels_may_offer_gpus_and_ignores_startup_taints() -> None:
    (pool,) = pools_of("azure-general-purpose.yaml").values()
    assert pool.may_offer == {"nvidia.com/gpu", "amd.com/gpu"}
    assert pool.taints == ()
    assert pool.pool is not None
    assert pool.pool.startup_taints == (Taint("node.cilium.io/agent-not-ready", "true", "NoExecute"),)
    assert pool.labels["kubernetes.azure.com/ebpf-dataplane"] == "cilium"


def test_gcp_pool_with_gpu_count_exists_may_offer_nvidia_gpus() -> None:
    (pool,) = pools_of("gcp-gpu.yaml").values()
    assert pool.may_offer == {"nvidia.com/gpu"}
    assert pool.allocatable == {}


def nodepool(requirements: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    template_spec = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": requirements,
        **spec.pop("template_spec", {}),
    }
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {"template": {"spec": template_spec, **spec.pop("template", {})}, **spec},
    }


def test_gpu_count_and_manufacturer_requirements_give_the_shape() -> None:
    pool = nodepool_from_object(nodepool([
        {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "In", "values": ["2", "4"]},
        {"key": "karpenter.k8s.aws/instance-gpu-manufacturer", "operator": "In", "values": ["amd"]},
    ]))
    assert pool is not None
    assert pool.allocatable == {"amd.com/gpu": Fraction(4)} and not pool.may_offer


def test_gpu_count_does_not_exist_means_no_gpu() -> None:
    pool = nodepool_from_object(nodepool(
        [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "DoesNotExist"}]
    ))
    assert pool is not None and pool.allocatable == {} and not pool.may_offer


def test_limits_cap_and_zero_the_gpus() -> None:
    family = [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["p5"]}]
    capped = nodepool_from_object(nodepool(family, limits={"nvidia.com/gpu": "4"}))
    assert capped is not None and capped.allocatable == {"nvidia.com/gpu": Fraction(4)}
    none = nodepool_from_object(nodepool(family, limits={"nvidia.com/gpu": 0}))
    assert none is not None and none.allocatable == {}


def test_contradictory_requirements_create_no_node() -> None:
    assert nodepool_from_object(nodepool([
        {"key": "team", "operator": "In", "values": ["a"]},
        {"key": "team", "operator": "In", "values": ["b"]},
    ])) is None
    # A template label must satisfy the requirements too.
    assert nodepool_from_object(nodepool(
        [{"key": "team", "operator": "In", "values": ["a"]}], template={"metadata": {"labels": {"team": "b"}}}
    )) is None


def test_custom_labels_the_pool_does_not_define_are_absent_well_known_ones_open() -> None:
    pool = nodepool_from_object(nodepool([]))
    assert pool is not None
    assert pool.label_domain("team").possible_values() == frozenset()  # never on its nodes
    assert pool.label_domain("topology.kubernetes.io/zone").possible_values() is None
    assert pool.label_domain("karpenter.k8s.aws/instance-size").possible_values() is None
    assert pool.describe() == "Karpenter NodePool 'p' (scales up on demand)"


def test_snapshot_nodepools_and_nodes_group_separately() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu", "labels": {}},
            "status": {"allocatable": {"cpu": "4"}}}
    facts = facts_from_objects([{"kind": "List", "items": [node, nodepool([])]}])
    assert [g.representative.name for g in facts.groups] == ["cpu", "p"]
    assert not facts.is_empty
    assert ClusterFacts(pools=facts.pools).is_empty is False


def test_the_aws_table_names_its_source() -> None:
    table = aws_instance_table()
    assert len(table.commit) == 40
    assert {"g5", "p5", "c7i", "m7i", "r7i"} <= table.families
    assert all(row.resources for row in table.gpu_instance_types)
    rows = {r.instance_type: r for r in table.gpu_instance_types}
    assert rows["p5.48xlarge"].resources == {"nvidia.com/gpu": Fraction(8)}
    assert rows["g5.xlarge"].labels["instance-gpu-name"] == "a10g"


def test_nodepool_fixture_file_is_read_by_the_snapshot_loader(tmp_path: Path) -> None:
    from gpuguard.sources.snapshot import load_cluster_facts

    facts = load_cluster_facts(str(NODEPOOLS / "ai-on-eks-gpu.yaml"))
    assert [p.name for p in facts.pools] == ["gpu"]
    old = tmp_path / "v1beta1.yaml"
    old.write_text("apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: old}\nspec: {}\n")
    from gpuguard.sources.yamlsafe import InputError

    with pytest.raises(InputError, match=r"NodePool 'old' is karpenter.sh/v1beta1; gpuguard reads karpenter.sh/v1"):
        load_cluster_facts(str(old))

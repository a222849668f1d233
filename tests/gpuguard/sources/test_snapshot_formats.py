"""JSON snapshots load into the same facts the YAML loader builds; broken JSON names its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpuguard.sources.snapshot import load_cluster_facts
from gpuguard.sources.yamlsafe import InputError
from policies.facts import ClusterFacts
from tests.support.paths import EXAMPLES, FIXTURES


def same(a: ClusterFacts, b: ClusterFacts) -> None:
    assert a.nodes == b.nodes and dict(a.runtime_classes) == dict(b.runtime_classes) and a.pools == b.pools
    assert [g.representative.name for g in a.groups] == [g.representative.name for g in b.groups]


@pytest.mark.parametrize("source", [EXAMPLES / "cluster.yaml", FIXTURES / "audit" / "cluster-after.yaml"])
def test_json_and_yaml_give_the_same_facts(source: Path, tmp_path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(source.read_text()) if d]
    as_json = tmp_path / "snapshot.json"
    as_json.write_text(json.dumps(docs[0] if len(docs) == 1 else {"apiVersion": "v1", "kind": "List", "items": docs},
                                  indent=4))
    same(load_cluster_facts(str(as_json)), load_cluster_facts(str(source)))


def test_api_lists_and_nodepools(tmp_path: Path) -> None:
    nodes = yaml.safe_load((FIXTURES / "audit" / "cluster-before.yaml").read_text())["items"]
    bare = [{k: v for k, v in n.items() if k not in ("kind", "apiVersion")} for n in nodes if n["kind"] == "Node"]
    node_list = tmp_path / "nodes.json"
    node_list.write_text(json.dumps({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": bare}))
    facts = load_cluster_facts(str(node_list))
    assert len(facts.nodes) == 8 and {n.gpu_product for n in facts.nodes} >= {"Tesla-T4"}
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu"},
            "spec": {"template": {"metadata": {"labels": {"nvidia.com/gpu.product": "NVIDIA-L4"}}, "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                  "values": ["g6.xlarge"]}]}}}}
    pools = tmp_path / "pools.json"
    pools.write_text(json.dumps([pool]))
    as_yaml = tmp_path / "pools.yaml"
    as_yaml.write_text(yaml.safe_dump(pool))
    same(load_cluster_facts(str(pools)), load_cluster_facts(str(as_yaml)))
    assert len(load_cluster_facts(str(pools)).pools) == 1


def test_broken_json_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n "kind": "List",\n "items": [\n  {"kind": "Node",}\n ]\n}\n')
    with pytest.raises(InputError) as caught:
        load_cluster_facts(str(bad))
    assert caught.value.line == 4 and "invalid JSON" in caught.value.message
    empty = tmp_path / "empty.json"
    empty.write_text('{"apiVersion": "v1", "kind": "List", "items": []}')
    with pytest.raises(InputError, match="has no Node or NodePool objects"):
        load_cluster_facts(str(empty))

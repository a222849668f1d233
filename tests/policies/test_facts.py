"""ClusterFacts: snapshot formats, GFD label parsing, node grouping, malformed input."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest
import yaml

from policies.engine import evaluate
from policies.facts import ClusterFacts, Taint, parse_cuda_version, parse_driver_version
from policies.facts_build import facts_from_objects
from policies.types import Severity
from tests.support.paths import EXAMPLES, FIXTURES, load_yaml_docs

EXAMPLE = EXAMPLES / "cluster.yaml"
MULTI_DOC = FIXTURES / "rules" / "gpu-resource-unknown" / "cluster.yaml"


def _node(name: str, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {"allocatable": {"cpu": "8", "pods": "110"}},
    }
    for key, value in extra.items():
        node.setdefault(key, {}).update(value)
    return node


def _runtime_class(name: str) -> dict[str, Any]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}, "handler": name}


def test_kubectl_list_snapshot(example_facts: ClusterFacts) -> None:
    names = {n.name for n in example_facts.nodes}
    assert names == {
        "cpu-pool-1", "a100-pool-1", "a100-pool-2", "h100-pool-1", "h100-pool-2", "t4-pool-1", "a100-mig-1"
    }
    rc = example_facts.runtime_classes["nvidia"]
    assert rc.handler == "nvidia"
    assert dict(rc.node_selector) == {"nvidia.com/gpu.present": "true"}
    h100 = next(n for n in example_facts.nodes if n.name == "h100-pool-1")
    assert h100.taints == (
        Taint("nvidia.com/gpu", "present", "NoSchedule"),
        Taint("dedicated", "training", "NoSchedule"),
    )
    assert h100.allocatable["nvidia.com/gpu"] == 8
    assert h100.allocatable["cpu"] == 191
    assert example_facts.source == str(EXAMPLE)


def test_multi_document_snapshot() -> None:
    facts = facts_from_objects(load_yaml_docs(MULTI_DOC))
    assert {n.name for n in facts.nodes} == {"a100-1", "t4-shared-1", "a100-mig-1", "cpu-1"}
    assert set(facts.runtime_classes) == {"nvidia"}
    assert facts.runtime_classes["nvidia"].node_selector == {}
    assert {"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"} <= (
        facts.resource_names()
    )


def test_list_and_multi_document_forms_agree() -> None:
    as_list = facts_from_objects(load_yaml_docs(EXAMPLE))
    items = load_yaml_docs(EXAMPLE)[0]["items"]
    as_docs = facts_from_objects(yaml.safe_load_all(yaml.safe_dump_all(items)))
    assert as_list.nodes == as_docs.nodes
    assert as_list.runtime_classes == as_docs.runtime_classes


def test_typed_lists_are_flattened() -> None:
    node_list = {"apiVersion": "v1", "kind": "NodeList", "items": [_node("n1"), _node("n2")]}
    rc_list = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClassList",
        "items": [_runtime_class("nvidia")],
    }
    facts = facts_from_objects([node_list, rc_list])
    assert [n.name for n in facts.nodes] == ["n1", "n2"]
    assert list(facts.runtime_classes) == ["nvidia"]


def test_resource_names_skip_zero_quantities(example_facts: ClusterFacts) -> None:
    names = example_facts.resource_names()
    assert {"nvidia.com/gpu", "nvidia.com/mig-1g.5gb", "nvidia.com/mig-3g.20gb", "cpu"} <= names
    assert "hugepages-1Gi" not in names  # allocatable '0'


@pytest.mark.parametrize(
    ("labels", "driver", "cuda"),
    [
        pytest.param(
            {
                "nvidia.com/cuda.driver-version.full": "535.129.03",
                "nvidia.com/cuda.driver-version.major": "535",
                "nvidia.com/cuda.runtime-version.full": "12.2",
            },
            (535, 129, 3),
            (12, 2),
            id="new-full",
        ),
        pytest.param(
            {
                "nvidia.com/cuda.driver-version.major": "550",
                "nvidia.com/cuda.driver-version.minor": "90",
                "nvidia.com/cuda.driver-version.revision": "07",
                "nvidia.com/cuda.runtime-version.major": "12",
                "nvidia.com/cuda.runtime-version.minor": "4",
            },
            (550, 90, 7),
            (12, 4),
            id="new-parts",
        ),
        pytest.param(
            {
                "nvidia.com/cuda.driver.major": "470",
                "nvidia.com/cuda.driver.minor": "256",
                "nvidia.com/cuda.driver.rev": "02",
                "nvidia.com/cuda.runtime.major": "11",
                "nvidia.com/cuda.runtime.minor": "4",
            },
            (470, 256, 2),
            (11, 4),
            id="old-deprecated",
        ),
        pytest.param(
            # GFD on a two-part driver version publishes an empty revision (seen in public
            # `kubectl get node` output for driver 550.120).
            {
                "nvidia.com/cuda.driver-version.full": "550.120",
                "nvidia.com/cuda.driver-version.revision": "",
                "nvidia.com/cuda.driver.major": "550",
                "nvidia.com/cuda.driver.minor": "120",
                "nvidia.com/cuda.driver.rev": "",
            },
            (550, 120),
            None,
            id="empty-revision",
        ),
        pytest.param(
            {
                "nvidia.com/cuda.driver-version.full": "garbage",
                "nvidia.com/cuda.driver.major": "455",
                "nvidia.com/cuda.driver.minor": "06",
            },
            (455, 6),
            None,
            id="bad-full-falls-back",
        ),
        pytest.param({"nvidia.com/cuda.driver.major": "535"}, None, None, id="major-only"),
        pytest.param({}, None, None, id="no-labels"),
    ],
)
def test_gfd_versions(labels: dict[str, str], driver: tuple[int, ...] | None, cuda: tuple[int, ...] | None) -> None:
    assert parse_driver_version(labels) == driver
    assert parse_cuda_version(labels) == cuda


def test_example_nodes_expose_versions(example_facts: ClusterFacts) -> None:
    by_name = {n.name: n for n in example_facts.nodes}
    assert by_name["t4-pool-1"].driver_version == (470, 256, 2)  # deprecated labels only
    assert by_name["t4-pool-1"].cuda_version == (11, 4)
    assert by_name["h100-pool-1"].driver_version == (550, 90, 7)
    assert by_name["h100-pool-1"].gpu_product == "NVIDIA-H100-80GB-HBM3"
    assert by_name["cpu-pool-1"].driver_version is None


def test_nodes_differing_only_in_hostname_form_one_group(example_facts: ClusterFacts) -> None:
    sizes = sorted(g.size for g in example_facts.groups)
    assert sizes == [1, 1, 1, 2, 2]
    a100 = next(g for g in example_facts.groups if g.representative.name == "a100-pool-1")
    assert [m.name for m in a100.members] == ["a100-pool-1", "a100-pool-2"]
    assert "kubernetes.io/hostname" in a100.varying_labels
    assert a100.describe() == "a100-pool-1, a100-pool-2 (NVIDIA-A100-SXM4-80GB)"


def test_different_taints_or_capacity_split_groups() -> None:
    base = _node("g1", {"pool": "gpu"}, status={"allocatable": {"nvidia.com/gpu": "8"}})
    tainted = copy.deepcopy(base)
    tainted["metadata"]["name"] = "g2"
    tainted["spec"]["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    smaller = copy.deepcopy(base)
    smaller["metadata"]["name"] = "g3"
    smaller["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    cordoned = copy.deepcopy(base)
    cordoned["metadata"]["name"] = "g4"
    cordoned["spec"]["unschedulable"] = True
    facts = facts_from_objects([base, tainted, smaller, cordoned])
    assert len(facts.groups) == 4


def test_label_holding_the_node_name_is_per_node() -> None:
    nodes = [_node(f"n{i}", {"example.com/node-name": f"n{i}", "pool": "gpu"}) for i in range(3)]
    facts = facts_from_objects(nodes)
    assert len(facts.groups) == 1
    assert "example.com/node-name" in facts.groups[0].varying_labels


def _generated_cluster(count: int) -> list[dict[str, Any]]:
    kinds = [
        ({"pool": "cpu"}, {"cpu": "16"}, []),
        ({"pool": "a100", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}, {"nvidia.com/gpu": "8"},
         [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
        ({"pool": "t4", "nvidia.com/gpu.product": "Tesla-T4"}, {"nvidia.com/gpu": "1"}, []),
    ]
    nodes = []
    for i in range(count):
        labels, alloc, taints = kinds[i % 3]
        name = f"node-{i:05d}"
        node = _node(name, {**labels, "nvidia.com/gfd.timestamp": str(1700000000 + i)}, status={"allocatable": alloc})
        if taints:
            node["spec"]["taints"] = taints
        nodes.append(node)
    return nodes


def test_five_thousand_nodes_of_three_kinds_form_three_groups() -> None:
    facts = facts_from_objects(_generated_cluster(5000))
    assert len(facts.nodes) == 5000
    assert len(facts.groups) == 3
    assert sorted(g.size for g in facts.groups) == [1666, 1667, 1667]
    assert facts.resource_names() >= {"nvidia.com/gpu", "cpu"}


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param({"apiVersion": "v1", "kind": "Node"}, id="no-metadata"),
        pytest.param({"apiVersion": "v1", "kind": "Node", "metadata": "x"}, id="metadata-not-a-map"),
        pytest.param({"apiVersion": "v1", "kind": "Node", "metadata": {"name": 5}}, id="name-not-a-string"),
        pytest.param("not an object", id="string"),
        pytest.param(None, id="null"),
        pytest.param({"apiVersion": "v1", "kind": "List", "items": "x"}, id="list-items-not-a-list"),
        pytest.param(
            {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {}}, id="nameless-runtime-class"
        ),
    ],
)
def test_malformed_objects_are_skipped(bad: Any) -> None:
    facts = facts_from_objects([bad, _node("good")])
    assert [n.name for n in facts.nodes] == ["good"]
    assert facts.runtime_classes == {}


def test_malformed_fields_degrade_gracefully() -> None:
    node = _node("odd")
    node["spec"] = {"taints": 5, "unschedulable": True}
    node["metadata"]["labels"]["nvidia.com/gpu.present"] = True  # unquoted YAML boolean
    node["status"] = {"capacity": {"nvidia.com/gpu": "2", "memory": "lots"}}  # no allocatable
    rc = {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": "nvidia"},
        "handler": "nvidia",
        "scheduling": {"tolerations": "x", "nodeSelector": ["not", "a", "map"]},
    }
    facts = facts_from_objects([node, rc])
    (parsed,) = facts.nodes
    assert parsed.taints == ()
    assert parsed.unschedulable
    assert parsed.labels["nvidia.com/gpu.present"] == "true"
    assert parsed.allocatable == {"nvidia.com/gpu": Fraction(2)}  # capacity fallback, bad quantity dropped
    assert facts.runtime_classes["nvidia"].tolerations == ()
    assert facts.runtime_classes["nvidia"].node_selector == {}


def test_empty_facts() -> None:
    assert ClusterFacts.empty().is_empty
    assert facts_from_objects([]).is_empty
    assert not facts_from_objects([_node("n")]).is_empty


def _fleet_node(i: int, pool: str, gpus: int) -> dict[str, Any]:
    """A node of a real fleet: allocatable memory and storage differ by a few KiB between nodes of
    one type, and a provider label is unique per node."""
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": f"{pool}-{i}", "labels": {
            "kubernetes.io/hostname": f"{pool}-{i}", "pool": pool, "example.com/serial": f"SN-{pool}-{i:06d}",
            "topology.kubernetes.io/zone": f"zone-{i % 3}",
        }},
        "status": {"allocatable": {
            "cpu": "95", "memory": f"{1_000_000 + (i * 37) % 9000}Ki", "ephemeral-storage": f"{900_000 + i % 701}Ki",
            "pods": "110", "nvidia.com/gpu": str(gpus),
        }},
    }


def test_heterogeneous_fleet_groups_by_what_rules_read() -> None:
    nodes = [_fleet_node(i, pool, gpus) for pool, gpus in (("a100", 8), ("h100", 8), ("t4", 1)) for i in range(1700)]
    facts = facts_from_objects(nodes)
    assert len(facts.nodes) == 5100
    assert len(facts.groups) == 9  # three pools in three zones, whatever the memory and serial numbers
    # A selector on the per-node label is still judged per node, not per group.
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
           "spec": {"nodeSelector": {"example.com/serial": "SN-h100-000042"},
                    "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
    assert [f.rule for f in evaluate(pod, facts=facts).findings if f.severity is Severity.ERROR] == []
    pod["spec"]["nodeSelector"]["example.com/serial"] = "SN-h100-999999"
    assert "gpu-node-selector-mismatch" in [f.rule for f in evaluate(pod, facts=facts).findings]


def test_snapshot_wide_memo_values_survive_the_template_memo_starting_over() -> None:
    from policies.facts import MEMO_LIMIT

    facts = facts_from_objects([])
    computed: list[str] = []

    def index() -> str:
        computed.append("index")
        return "index"

    assert facts.memoised("wide", index, pinned=True) == "index"
    for i in range(MEMO_LIMIT + 2):  # enough distinct templates to make the template memo start over
        facts.memoised(("template", i), int)
    assert facts.memoised(("template", 0), lambda: -1) == -1  # the template memo did start over
    assert facts.memoised("wide", index, pinned=True) == "index" and computed == ["index"]

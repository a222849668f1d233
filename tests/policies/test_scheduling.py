"""The static scheduler model: toleration and node-affinity semantics, RuntimeClass merge,
per-group verdicts, and how the facts rules divide the work between them."""

from __future__ import annotations

import copy
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from policies import ClusterFacts, evaluate
from policies.facts import NodeFacts, Taint
from policies.facts_build import facts_from_objects
from policies.podspec import extract
from policies.scheduling import (
    analyse,
    constraints_for,
    diagnose,
    required_terms,
    term_matches,
    toleration_tolerates,
    untolerated,
)
from tests.support.paths import EXAMPLES, FIXTURES

FACTS_RULES = (
    "gpu-resource-unknown",
    "gpu-exceeds-node-capacity",
    "gpu-taint-not-tolerated",
    "gpu-node-selector-mismatch",
    "gpu-unschedulable",
)

GPU = Taint("nvidia.com/gpu", "present", "NoSchedule")


def _is_gpu(name: str) -> bool:
    return name.startswith("nvidia.com/")


# --- tolerations (k8s.io/api core/v1 toleration.go ToleratesTaint) -------------------------


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, GPU, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, GPU, True),  # empty effect: every effect
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, GPU, False),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, GPU, True),
        ({"key": "nvidia.com/gpu", "value": "present"}, GPU, True),  # operator "" means Equal
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"}, GPU, False),
        ({"key": "nvidia.com/gpu"}, GPU, False),  # Equal with empty value vs "present"
        ({"key": "nvidia.com/gpu"}, Taint("nvidia.com/gpu", "", "NoSchedule"), True),
        ({"operator": "Exists"}, GPU, True),  # empty key + Exists: everything
        ({"operator": "Exists", "effect": "NoExecute"}, GPU, False),
        ({"key": "dedicated", "operator": "Exists"}, GPU, False),
        ({"key": "nvidia.com/gpu", "operator": "Bogus"}, GPU, False),
        # Numeric threshold operators: taint value compared with toleration value as int64.
        ({"key": "gpu-errors", "operator": "Lt", "value": "5"}, Taint("gpu-errors", "3", "NoSchedule"), True),
        ({"key": "gpu-errors", "operator": "Lt", "value": "5"}, Taint("gpu-errors", "5", "NoSchedule"), False),
        ({"key": "gpu-errors", "operator": "Gt", "value": "5"}, Taint("gpu-errors", "9", "NoSchedule"), True),
        ({"key": "gpu-errors", "operator": "Gt", "value": "x"}, Taint("gpu-errors", "9", "NoSchedule"), False),
        ({"key": "gpu-errors", "operator": "Gt", "value": "5"}, Taint("gpu-errors", "1_0", "NoSchedule"), False),
    ],
)
def test_toleration_matching(toleration: dict[str, str], taint: Taint, tolerated: bool) -> None:
    assert toleration_tolerates(toleration, taint) is tolerated


def test_only_scheduling_effects_block() -> None:
    taints = [GPU, Taint("spot", "true", "PreferNoSchedule"), Taint("evict", "", "NoExecute")]
    assert untolerated([], taints) == [GPU, Taint("evict", "", "NoExecute")]
    assert untolerated([{"operator": "Exists"}], taints) == []
    assert untolerated([{"key": "evict", "operator": "Exists"}, "junk"], taints) == [GPU]  # type: ignore[list-item]


# --- node selection (component-helpers nodeaffinity) -----------------------------------------

NODE = NodeFacts(
    name="gpu-1",
    labels={"pool": "a100", "nvidia.com/gpu.memory": "81920", "nvidia.com/gpu.count": "8"},
    taints=(),
    allocatable={"nvidia.com/gpu": Fraction(8)},
)


def _term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields is not None:
        term["matchFields"] = fields
    return term


@pytest.mark.parametrize(
    ("term", "matches"),
    [
        (_term({"key": "pool", "operator": "In", "values": ["a100", "h100"]}), True),
        (_term({"key": "pool", "operator": "In", "values": ["h100"]}), False),
        (_term({"key": "pool", "operator": "In", "values": []}), False),  # invalid requirement
        (_term({"key": "pool", "operator": "NotIn", "values": ["h100"]}), True),
        (_term({"key": "zone", "operator": "NotIn", "values": ["a"]}), True),  # absent label: NotIn holds
        (_term({"key": "pool", "operator": "Exists"}), True),
        (_term({"key": "pool", "operator": "Exists", "values": ["a100"]}), False),  # invalid requirement
        (_term({"key": "zone", "operator": "DoesNotExist"}), True),
        (_term({"key": "pool", "operator": "DoesNotExist"}), False),
        (_term({"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["80000"]}), True),
        (_term({"key": "nvidia.com/gpu.memory", "operator": "Lt", "values": ["80000"]}), False),
        (_term({"key": "nvidia.com/gpu.count", "operator": "Lt", "values": ["9"]}), True),
        (_term({"key": "pool", "operator": "Gt", "values": ["1"]}), False),  # non-integer label
        (_term({"key": "nvidia.com/gpu.count", "operator": "Gt", "values": ["1", "2"]}), False),
        (_term({"key": "missing", "operator": "Gt", "values": ["1"]}), False),
        (_term({"key": "pool", "operator": "In", "values": ["a100"]}, {"key": "zone", "operator": "Exists"}), False),
        (_term(), False),  # an empty term matches nothing
        ({}, False),
        (_term(fields=[{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]), True),
        (_term(fields=[{"key": "metadata.name", "operator": "NotIn", "values": ["gpu-1"]}]), False),
        (_term(fields=[{"key": "metadata.name", "operator": "In", "values": ["gpu-1", "gpu-2"]}]), False),
        (_term({"key": "pool", "operator": "Bogus", "values": ["a100"]}), False),
    ],
)
def test_node_selector_term_matching(term: dict[str, Any], matches: bool) -> None:
    assert term_matches(term, NODE) is matches


def _pod(spec: dict[str, Any], kind: str = "Pod") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": "p"}, "spec": spec}


def _gpu_spec(count: int = 1, **fields: Any) -> dict[str, Any]:
    container = {"name": "main", "image": "x", "resources": {"limits": {"nvidia.com/gpu": count}}}
    return {"containers": [container], **fields}


AFFINITY = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


@pytest.mark.parametrize(
    ("spec", "selected"),
    [
        ({}, True),
        ({"nodeSelector": {"pool": "a100"}}, True),
        ({"nodeSelector": {"pool": "a100", "zone": "a"}}, False),  # every pair must match
        ({"nodeSelector": {"pool": ""}}, False),
        ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            _term({"key": "pool", "operator": "In", "values": ["x"]}),
            _term({"key": "pool", "operator": "In", "values": ["a100"]}),
        ]}}}}, True),  # terms are ORed
        ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}},
         False),
        ({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}}, False),
        ({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": _term({"key": "pool", "operator": "In", "values": ["x"]})}
        ]}}}, True),  # preferences never filter
        ({"nodeSelector": {"pool": "a100"}, "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                _term({"key": "pool", "operator": "NotIn", "values": ["a100"]})
            ]}}}}, False),  # nodeSelector AND affinity
    ],
)
def test_selector_and_affinity(spec: dict[str, Any], selected: bool) -> None:
    (pod,) = extract(_pod({**_gpu_spec(), **spec}))
    facts = ClusterFacts(nodes=(NODE,))
    assert constraints_for(pod, facts).selector_ok(NODE) is selected


def test_required_terms_absent_versus_empty() -> None:
    assert required_terms({}) is None
    assert required_terms({"affinity": {"nodeAffinity": {}}}) is None
    assert required_terms({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}}) == ()


# --- RuntimeClass scheduling merge (plugin/pkg/admission/runtimeclass setScheduling) ----------


def _facts_with_runtime_class(scheduling: dict[str, Any]) -> ClusterFacts:
    rc = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gpu"}, "handler": "nvidia",
          "scheduling": scheduling}
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"pool": "a100"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}}}
    return facts_from_objects([node, rc])


def test_runtime_class_selector_and_tolerations_are_merged() -> None:
    facts = _facts_with_runtime_class({
        "nodeSelector": {"pool": "a100"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    })
    (pod,) = extract(_pod(_gpu_spec(runtimeClassName="gpu", nodeSelector={"zone": "a"})))
    cons = constraints_for(pod, facts)
    assert dict(cons.node_selector) == {"zone": "a", "pool": "a100"}
    assert cons.untolerated(facts.nodes[0]) == []
    assert not cons.conflicts


def test_runtime_class_selector_conflict_matches_no_node() -> None:
    facts = _facts_with_runtime_class({"nodeSelector": {"pool": "a100"}})
    (pod,) = extract(_pod(_gpu_spec(runtimeClassName="gpu", nodeSelector={"pool": "h100"})))
    cons = constraints_for(pod, facts)
    assert cons.conflicts == ("pool",)
    assert not cons.selector_ok(facts.nodes[0])


def test_runtime_class_selector_mismatch_reported_at_runtime_class_name() -> None:
    facts = _facts_with_runtime_class({"nodeSelector": {"nvidia.com/gpu.present": "true"}})
    pod = _pod(_gpu_spec(runtimeClassName="gpu", tolerations=[{"operator": "Exists"}]))
    findings = [f for f in evaluate(pod, None, facts).findings if f.rule in FACTS_RULES]
    assert [(f.rule, f.path) for f in findings] == [("gpu-node-selector-mismatch", "/spec/runtimeClassName")]
    assert "nvidia.com/gpu.present=true" in findings[0].message


# --- verdicts per group -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def example() -> ClusterFacts:
    return facts_from_objects(list(yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text())))


def test_one_verdict_per_group_with_reasons(example: ClusterFacts) -> None:
    (pod,) = extract(_pod(_gpu_spec(8, nodeSelector={"pool": "t4"})))
    verdicts = analyse(pod, {"nvidia.com/gpu": Fraction(8)}, example)
    assert len(verdicts) == len(example.groups)
    by_first = {v.nodes[0].name: v for v in verdicts}
    assert by_first["t4-pool-1"].selector_ok and not by_first["t4-pool-1"].fits
    assert by_first["t4-pool-1"].reasons() == ["has 1 nvidia.com/gpu allocatable, the pod asks 8"]
    assert by_first["cpu-pool-1"].reasons()[0] == "offers no nvidia.com/gpu"
    assert "untolerated taint nvidia.com/gpu=present:NoSchedule" in by_first["a100-pool-1"].reasons()
    assert not any(v.passes for v in verdicts)


def test_hostname_selector_splits_a_group(example: ClusterFacts) -> None:
    spec = _gpu_spec(nodeSelector={"kubernetes.io/hostname": "a100-pool-2"}, tolerations=[{"operator": "Exists"}])
    (pod,) = extract(_pod(spec))
    verdicts = analyse(pod, {"nvidia.com/gpu": Fraction(1)}, example)
    passing = [v for v in verdicts if v.passes]
    assert [[n.name for n in v.nodes] for v in passing] == [["a100-pool-2"]]
    assert passing[0].describe() == "a100-pool-2 (NVIDIA-A100-SXM4-80GB)"


def test_cordoned_nodes_make_the_pod_unschedulable(example: ClusterFacts) -> None:
    nodes = tuple(
        NodeFacts(n.name, n.labels, n.taints, n.allocatable, unschedulable=n.name.startswith("t4"))
        for n in example.nodes
    )
    facts = ClusterFacts(nodes=nodes, runtime_classes=example.runtime_classes)
    findings = [f for f in evaluate(_pod(_gpu_spec(nodeSelector={"pool": "t4"})), None, facts).findings
                if f.rule in FACTS_RULES]
    assert [f.rule for f in findings] == ["gpu-unschedulable"]
    assert "t4-pool-1 (Tesla-T4): cordoned" in findings[0].message


def test_diagnosis_decides_one_owner(example: ClusterFacts) -> None:
    (pod,) = extract(_pod(_gpu_spec(1, nodeSelector={"pool": "gpu"})))
    diagnosis = diagnose(pod, {"nvidia.com/gpu": Fraction(1)}, example, _is_gpu)
    assert diagnosis.selector_blocked
    assert not diagnosis.taints_blocked  # the untainted T4 node offers the resource
    assert not diagnosis.unschedulable and not diagnosis.unknown and not diagnosis.too_large


# --- the facts rules divide the findings ----------------------------------------------------


def _rule_cases() -> list[Any]:
    cases = []
    for rule_id in FACTS_RULES:
        rule_dir = FIXTURES / "rules" / rule_id
        cluster = rule_dir / "cluster.yaml" if (rule_dir / "cluster.yaml").exists() else EXAMPLES / "cluster.yaml"
        for i, doc in enumerate(d for d in yaml.safe_load_all((rule_dir / "bad.yaml").read_text()) if d):
            cases.append(pytest.param(rule_id, cluster, doc, id=f"{rule_id}-{i}"))
    return cases


@pytest.mark.parametrize(("rule_id", "cluster", "doc"), _rule_cases())
def test_each_bad_fixture_has_one_facts_rule(rule_id: str, cluster: Path, doc: dict[str, Any]) -> None:
    facts = facts_from_objects(list(yaml.safe_load_all(cluster.read_text())))
    fired = {f.rule for f in evaluate(doc, None, facts).findings if f.rule in FACTS_RULES}
    assert fired == {rule_id}


def test_facts_rules_are_quiet_without_facts_or_gpus(example: ClusterFacts) -> None:
    typo = _pod({"containers": [{"name": "m", "image": "x", "resources": {"limits": {"nvidia.com/gpus": 1}}}]})
    assert not [f for f in evaluate(typo).findings if f.rule in FACTS_RULES]
    evaluation = evaluate(typo)
    assert "gpu-resource-unknown" in evaluation.skipped_rules
    cpu = _pod({"nodeSelector": {"pool": "nowhere"}, "containers": [{"name": "m", "image": "x"}]})
    assert not [f for f in evaluate(cpu, None, example).findings if f.rule in FACTS_RULES]


def test_taint_fix_prefers_the_group_needing_fewest_tolerations(example: ClusterFacts) -> None:
    # 8 GPUs: the untainted T4 node is too small; A100 needs one toleration, H100 two.
    pod = _pod(_gpu_spec(8))
    evaluation = evaluate(pod, None, example)
    (finding,) = [f for f in evaluation.findings if f.rule == "gpu-taint-not-tolerated"]
    assert finding.path == "/spec"
    assert evaluation.patch(["gpu-taint-not-tolerated"])[0].value == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert "a100-pool-1, a100-pool-2" in finding.message and "dedicated=training:NoSchedule" in finding.message


def test_taint_rule_offers_no_fix_when_selector_matches_no_gpu_node(example: ClusterFacts) -> None:
    nodes = tuple(n for n in example.nodes if not n.name.startswith("t4"))  # every GPU node tainted
    facts = ClusterFacts(nodes=nodes, runtime_classes=example.runtime_classes)
    evaluation = evaluate(_pod(_gpu_spec(nodeSelector={"pool": "gpu"})), None, facts)
    rules = sorted(f.rule for f in evaluation.findings if f.rule in FACTS_RULES)
    assert rules == ["gpu-node-selector-mismatch", "gpu-taint-not-tolerated"]
    assert evaluation.patch(["gpu-taint-not-tolerated"]) == []


# --- gpu-runtime-class beyond the fixtures ------------------------------------------------


def test_runtime_class_required_works_without_facts() -> None:
    config = load_config({"rules": {"gpu-runtime-class": {"options": {"required": "nvidia"}}}})
    evaluation = evaluate(_pod(_gpu_spec()), config)
    (finding,) = [f for f in evaluation.findings if f.rule == "gpu-runtime-class"]
    assert finding.path == "/spec/runtimeClassName"
    assert [op.to_dict() for op in finding.fix] == [{"op": "add", "path": "/spec/runtimeClassName", "value": "nvidia"}]


def test_runtime_class_defaults(example: ClusterFacts) -> None:
    # Not required by default; an unknown class is only judged against facts.
    assert not [f for f in evaluate(_pod(_gpu_spec()), None, example).findings if f.rule == "gpu-runtime-class"]
    unknown = _pod(_gpu_spec(runtimeClassName="kata"))
    assert not [f for f in evaluate(unknown).findings if f.rule == "gpu-runtime-class"]
    (finding,) = [f for f in evaluate(unknown, None, example).findings if f.rule == "gpu-runtime-class"]
    assert "'kata'" in finding.message and "nvidia" in finding.message and not finding.fix
    nodes_only = ClusterFacts(nodes=example.nodes)
    (finding,) = [f for f in evaluate(unknown, None, nodes_only).findings if f.rule == "gpu-runtime-class"]
    assert "runtimeclasses" in finding.message


# --- scale: rules iterate groups, not nodes -------------------------------------------------


def test_large_cluster_is_evaluated_per_group() -> None:
    template = yaml.safe_load((EXAMPLES / "cluster.yaml").read_text())["items"]
    nodes = []
    for i in range(5000):
        node = copy.deepcopy(template[1 + i % 5])  # a100, a100, h100, h100, t4 shapes
        name = f"gpu-{i:05d}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        nodes.append(node)
    facts = facts_from_objects(nodes)
    assert len(facts.groups) == 3
    (pod,) = extract(_pod(_gpu_spec(8, nodeSelector={"pool": "t4"})))
    assert len(analyse(pod, {"nvidia.com/gpu": Fraction(8)}, facts)) == 3
    findings = [f for f in evaluate(_pod(_gpu_spec(8, nodeSelector={"pool": "t4"})), None, facts).findings
                if f.rule in FACTS_RULES]
    assert [f.rule for f in findings] == ["gpu-unschedulable"]
    # 2,000 A100, 2,000 H100 and 1,000 T4 nodes, each group named by three members and a count.
    assert "and 1997 more (NVIDIA-A100-SXM4-80GB)" in findings[0].message
    assert "and 997 more (Tesla-T4): has 1 nvidia.com/gpu allocatable" in findings[0].message

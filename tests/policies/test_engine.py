"""Engine behaviour shared by every rule: suppression, exemptions, facts gating, patches, layering."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from gpuguard.sources.configmodel import load_config
from policies import ClusterFacts, evaluate
from policies.facts_build import facts_from_objects
from policies.patching import combine
from policies.registry import RULES, WORKLOAD_RULES
from policies.types import PatchOp


def _pod(requests: dict[str, Any], annotations: dict[str, str] | None = None, ns: str = "ml") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "train", "namespace": ns}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}]},
    }


def test_finding_shape() -> None:
    (f,) = [f for f in evaluate(_pod({"nvidia.com/gpu": 1})).findings if f.rule == "gpu-limit-missing"]
    assert f.kind == "Pod" and f.name == "train" and f.namespace == "ml"
    assert f.path == "/spec/containers/0/resources/requests/nvidia.com~1gpu"
    assert f.to_dict()["severity"] == "error"
    assert f.fix_dicts() == [{"op": "add", "path": "/spec/containers/0/resources/limits", "value": {"nvidia.com/gpu": 1}}]


@pytest.mark.parametrize("value", ["gpu-limit-missing", "gpu-whole-number, gpu-limit-missing", "all"])
def test_ignore_annotation_on_object(value: str) -> None:
    ev = evaluate(_pod({"nvidia.com/gpu": 1}, {"gpuguard.io/ignore": value}))
    assert not [f for f in ev.findings if f.rule == "gpu-limit-missing"]


def test_ignore_annotation_on_template_only_covers_that_template() -> None:
    pod_spec = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": 1}}}]}
    obj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j"},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"template": {"metadata": {"annotations": {"gpuguard.io/ignore": "all"}}, "spec": pod_spec}},
            "Worker": {"template": {"spec": pod_spec}},
        }},
    }
    paths = [f.path for f in evaluate(obj).findings if f.rule == "gpu-limit-missing"]
    assert paths == ["/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/resources/requests/nvidia.com~1gpu"]


def test_exempt_namespace() -> None:
    config = load_config({"exemptNamespaces": ["ml"]})
    ev = evaluate(_pod({"nvidia.com/gpu": 1}), config)
    assert ev.exempt and ev.findings == []


def test_rule_turned_off() -> None:
    config = load_config({"rules": {"gpu-limit-missing": {"severity": "off"}}})
    assert not [f for f in evaluate(_pod({"nvidia.com/gpu": 1}), config).findings if f.rule == "gpu-limit-missing"]


def test_severity_override() -> None:
    config = load_config({"rules": {"gpu-limit-missing": {"severity": "info"}}})
    (f,) = [f for f in evaluate(_pod({"nvidia.com/gpu": 1}), config).findings if f.rule == "gpu-limit-missing"]
    assert str(f.severity) == "info"


def test_facts_rules_skipped_without_facts_and_run_with_them(example_facts: ClusterFacts) -> None:
    needing = {rid for rid, m in RULES.items() if m.NEEDS_FACTS == "yes"}
    pod = _pod({"nvidia.com/gpu": 1})
    # A pod is no gang and names no queue: the workload rules have nothing to judge on it.
    assert set(evaluate(pod).skipped_rules) == needing - set(WORKLOAD_RULES)
    assert evaluate(pod, facts=example_facts).skipped_rules == ()


def test_workload_rules_are_noted_as_skipped_where_they_would_judge() -> None:
    worker = {"replicas": 2, "template": {"spec": {"containers": [
        {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}
    job: dict[str, Any] = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                           "metadata": {"name": "j", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                           "spec": {"pytorchReplicaSpecs": {"Worker": worker}}}
    assert set(WORKLOAD_RULES) <= set(evaluate(job).skipped_rules)
    del job["metadata"]["namespace"]  # no namespace: no quota or queue to look up
    skipped = set(evaluate(job).skipped_rules)
    assert "gpu-gang-unschedulable" in skipped and not {"gpu-quota-exceeded", "gpu-queue-unadmittable"} & skipped


def test_non_gpu_pod_is_not_gpu_related() -> None:
    ev = evaluate(_pod({"cpu": "1"}))
    assert not ev.gpu_related and ev.findings == []


def test_combine_merges_ops_creating_the_same_map() -> None:
    doc = {"spec": {"containers": [{"resources": {"requests": {"a.com/x": 1, "b.com/y": 2}}}]}}
    ops = [
        PatchOp("add", "/spec/containers/0/resources/limits", {"a.com/x": 1}),
        PatchOp("add", "/spec/containers/0/resources/limits", {"b.com/y": 2}),
    ]
    combined = combine(doc, ops)
    patched = jsonpatch.apply_patch(doc, [o.to_dict() for o in combined])
    assert patched["spec"]["containers"][0]["resources"]["limits"] == {"a.com/x": 1, "b.com/y": 2}


def test_two_resources_without_limits_patch_cleanly() -> None:
    pod = _pod({"nvidia.com/gpu": 2, "example.com/nic": 1})
    ev = evaluate(pod)
    ops = [o.to_dict() for o in ev.patch(["gpu-limit-missing"])]
    patched = jsonpatch.apply_patch(pod, ops)
    assert patched["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 2, "example.com/nic": 1}
    assert evaluate(patched).patch(["gpu-limit-missing"]) == []


@pytest.mark.parametrize("rule_id", list(RULES))
def test_rule_module_is_documented(rule_id: str) -> None:
    module = RULES[rule_id]
    assert rule_id == module.ID
    doc = module.__doc__ or ""
    assert doc.startswith(rule_id + ":"), "docstring must start with the rule id"
    assert "Failing" in doc and "Passing" in doc, "docstring needs a failing and a passing example"
    assert module.REMEDIATION.strip() and module.SUMMARY.strip()
    assert module.NEEDS_FACTS in ("no", "yes", "partly")
    for option in module.OPTIONS:
        assert option.doc


def test_memo_keeps_identity_and_separates_configs(example_facts: ClusterFacts) -> None:
    first = _pod({"nvidia.com/gpu": 1})
    second = _pod({"nvidia.com/gpu": 1})
    second["metadata"]["name"] = "train-2"
    strict = load_config({})
    relaxed = load_config({"rules": {"gpu-limit-missing": "off"}})
    a = evaluate(first, strict, example_facts)
    b = evaluate(second, strict, example_facts)
    assert [f.rule for f in a.findings] == [f.rule for f in b.findings]
    assert {f.name for f in b.findings} == {"train-2"}
    assert not [f for f in evaluate(second, relaxed, example_facts).findings if f.rule == "gpu-limit-missing"]
    changed = _pod({"nvidia.com/gpu": 1})
    changed["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 1}
    assert not [f for f in evaluate(changed, strict, example_facts).findings if f.rule == "gpu-limit-missing"]


def test_problems_of_the_nodes_are_found_once_per_node_at_the_configured_severity() -> None:
    import copy

    import yaml

    from policies.engine import cluster_findings, cluster_notes
    from policies.types import Severity
    from tests.support.paths import FIXTURES

    objects = list(yaml.safe_load_all((FIXTURES / "dra" / "nvidia-mixed-cluster.yaml").read_text()))
    facts = facts_from_objects(objects)
    (finding,) = cluster_findings(facts)
    assert (finding.rule, finding.kind, finding.name, finding.severity) == (
        "gpu-dra-mixed-allocation", "Node", "mixed-l4-0", Severity.WARNING)
    assert finding.path == "/status/allocatable/nvidia.com~1gpu"
    assert finding.message.startswith("node mixed-l4-0: nvidia.com/gpu is advertised through the device plugin")
    config = load_config({"rules": {"gpu-dra-mixed-allocation": "error"}})
    assert [f.severity for f in cluster_findings(facts, config)] == [Severity.ERROR]
    assert cluster_findings(facts, load_config({"rules": {"gpu-dra-mixed-allocation": "off"}})) == []
    # a second mixed node of the same kind is the same problem: one note naming both
    more = copy.deepcopy(objects)
    for obj in list(more[0]["items"] if more[0].get("kind") == "List" else more):
        if obj.get("kind") == "Node" and obj["metadata"]["name"] == "mixed-l4-0":
            twin = copy.deepcopy(obj)
            twin["metadata"]["name"] = twin["metadata"]["labels"]["kubernetes.io/hostname"] = "mixed-l4-1"
            (more[0]["items"] if more[0].get("kind") == "List" else more).append(twin)
        if obj.get("kind") == "ResourceSlice" and obj["spec"].get("nodeName") == "mixed-l4-0":
            twin = copy.deepcopy(obj)
            twin["metadata"]["name"] += "-1"
            twin["spec"]["nodeName"] = twin["spec"]["pool"]["name"] = "mixed-l4-1"
            (more[0]["items"] if more[0].get("kind") == "List" else more).append(twin)
    two = facts_from_objects(more)
    assert sorted(f.name for f in cluster_findings(two)) == ["mixed-l4-0", "mixed-l4-1"]
    (note,) = cluster_notes(two)
    assert note.startswith("gpu-dra-mixed-allocation on nodes mixed-l4-0, mixed-l4-1: nvidia.com/gpu is advertised")
    assert cluster_findings(ClusterFacts.empty()) == []

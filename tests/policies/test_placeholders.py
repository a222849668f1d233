"""Unrendered placeholders (policies.placeholders): envsubst's ``$VAR`` as well as ``${VAR}``, and
the empty quantity a template that rendered nothing leaves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policies import evaluate
from policies.placeholders import (
    find_placeholders,
    placeholder_in,
    quantity_placeholder_in,
    requests_by_placeholder,
)
from policies.podspec import extract
from tests.support.proc import gpuguard

CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04"  # its image config sets NVIDIA_VISIBLE_DEVICES=all


def pod(limits: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": CUDA, "resources": {"limits": limits}}], **spec}}


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ("$GPU_PER_NODE", "$GPU_PER_NODE"),  # envsubst: "$VARIABLE or ${VARIABLE}"
        ("${GPU_PER_NODE}", "${GPU_PER_NODE}"),
        ("$(GPUS)", "$(GPUS)"),
        ("{{ .Values.gpus }}", "{{ .Values.gpus }}"),
        ("${A}$B", "${A}"),
        ("1", None), ("$", None), ("$1", None), ("2$", None), (None, None), (4, None),
    ],
)
def test_placeholders_of_every_syntax(value: Any, found: str | None) -> None:
    assert placeholder_in(value) == found


def test_a_bare_envsubst_variable_is_a_placeholder_not_a_fractional_gpu() -> None:
    obj = pod({"nvidia.com/gpu": "$GPU_PER_NODE"}, nodeSelector={"node.kubernetes.io/instance-type": "$INSTANCE"})
    (template,) = extract(obj)
    found = [(p.path, p.text, p.what) for p in find_placeholders(template)]
    assert found == [
        (("containers", 0, "resources", "limits", "nvidia.com/gpu"), "$GPU_PER_NODE", "quantity"),
        (("nodeSelector", "node.kubernetes.io/instance-type"), "$INSTANCE", "node selector"),
    ]
    ev = evaluate(obj)
    assert [p.text for p in ev.placeholders] == ["$GPU_PER_NODE", "$INSTANCE"]
    assert not [f for f in ev.findings if f.rule == "gpu-whole-number"]
    # The container asks for GPUs once rendered: its image's NVIDIA_VISIBLE_DEVICES=all is no bypass.
    assert not [f for f in ev.findings if f.rule == "gpu-device-access-bypass"]
    assert requests_by_placeholder(template.containers[0].resources, lambda n: n.startswith("nvidia.com/"))


def test_dollar_in_args_is_kubernetes_own_variable_syntax() -> None:
    obj = pod({"nvidia.com/gpu": 1})
    obj["spec"]["containers"][0]["args"] = ["--tp=$TP", "--model=$(MODEL_ID)"]
    assert evaluate(obj).placeholders == []


def test_an_empty_gpu_count_says_the_container_gets_no_gpu() -> None:
    (finding,) = [f for f in evaluate(pod({"nvidia.com/gpu": None})).findings if f.rule == "gpu-whole-number"]
    assert finding.message == (
        "container 'c': limits.nvidia.com/gpu is empty (null), which the API server reads as 0, so the container "
        "gets no nvidia.com/gpu: write the number it needs, or remove the entry"
    )
    assert "None" not in finding.message
    obj = pod({"nvidia.com/gpu": 2})
    obj["spec"]["containers"][0]["resources"]["requests"] = {"nvidia.com/gpu": None}
    (finding,) = [f for f in evaluate(obj).findings if f.rule == "gpu-whole-number"]
    assert "unlike its limits (2), so the API server rejects the pod" in finding.message


def test_lint_reports_a_bare_placeholder_as_an_input_error_at_its_line(tmp_path: Path) -> None:
    from tests.support.proc import gpuguard

    path = tmp_path / "job.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
        f"    image: {CUDA}\n    resources:\n      limits:\n        nvidia.com/gpu: $GPU_PER_NODE\n"
    )
    done = gpuguard("lint", str(path), "--format", "json")
    assert done.code == 2
    report = json.loads(done.stdout)
    (error,) = report["errors"]
    assert error["line"] == 10
    assert error["message"].startswith("unrendered placeholder $GPU_PER_NODE where a quantity belongs")
    assert report["findings"] == []


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ("PLACEHOLDER_NUM_GPU_PER_NODE", "PLACEHOLDER_NUM_GPU_PER_NODE"),  # replaced by a setup script's sed
        ("NUM_GPUS", "NUM_GPUS"),
        ("<number-of-gpus>", "<number-of-gpus>"),
        ("$GPUS", "$GPUS"),
        # Not tokens: one word, lower case, a quantity, a half-written token.
        ("GPUS", None), ("num_gpus", None), ("8", None), ("1Gi", None), ("_GPU", None), ("GPU_", None),
        ("2_GPUS", None), (8, None), (None, None),
    ],
)
def test_quantity_placeholders_include_substitution_tokens(value: Any, found: str | None) -> None:
    assert quantity_placeholder_in(value) == found


def test_a_sed_token_is_a_placeholder_in_quantities_only() -> None:
    obj = pod(
        {"nvidia.com/gpu": "PLACEHOLDER_NUM_GPU_PER_NODE", "vpc.amazonaws.com/efa": "PLACEHOLDER_NUM_EFA_PER_NODE"},
        # A label value may well be such a token: node selection is not read this way.
        nodeSelector={"pool": "GPU_POOL_A"},
    )
    ev = evaluate(obj)
    assert [p.text for p in ev.placeholders] == ["PLACEHOLDER_NUM_GPU_PER_NODE", "PLACEHOLDER_NUM_EFA_PER_NODE"]
    assert not [f for f in ev.findings if f.rule in ("gpu-whole-number", "gpu-device-access-bypass")]


def test_a_sed_token_as_a_gpu_quantity_in_the_cli_is_an_input_error(tmp_path: Path) -> None:
    manifest = tmp_path / "raycluster.yaml"
    manifest.write_text(json.dumps(pod({"nvidia.com/gpu": "PLACEHOLDER_NUM_GPU_PER_NODE"})))
    result = gpuguard("lint", str(manifest))
    assert result.code == 2, result.stderr
    assert "unrendered placeholder PLACEHOLDER_NUM_GPU_PER_NODE where a quantity belongs" in result.stdout + result.stderr
    assert "gpu-whole-number" not in result.stdout


def test_a_your_value_in_node_selection_is_a_placeholder() -> None:
    """llm-d-fast-model-actuation's example pins ``kubernetes.io/hostname: your-node-name``, and
    accelerated-platforms' kustomize base selects ``cloud.google.com/compute-class:
    replaced-by-kustomize``: input errors to fill in, not selectors that match no node."""
    from policies import evaluate
    from policies.facts_build import facts_from_objects
    from tests.support.cluster_objects import node

    def pod(value: str) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": value},
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}

    facts = facts_from_objects([node("n0", capacity=1, allocatable=1)])
    for value in ("your-node-name", "YOUR_NODE", "replaced-by-kustomize", "changeme"):
        ev = evaluate(pod(value), None, facts)
        assert [p.what for p in ev.placeholders] == ["node selector"]
        assert not [f for f in ev.findings if f.rule == "gpu-node-selector-mismatch"]
    for value in ("yourself-1", "replacement-pool"):  # only the prefix with a separator
        ev = evaluate(pod(value), None, facts)
        assert not ev.placeholders and "gpu-node-selector-mismatch" in {f.rule for f in ev.findings}

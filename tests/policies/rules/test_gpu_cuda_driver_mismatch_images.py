"""gpu-cuda-driver-mismatch with image facts: the image config's Env, the pod's env and the runtime's check."""

from __future__ import annotations

from typing import Any

import jsonpatch

from policies import ClusterFacts, evaluate
from policies.facts_build import facts_from_objects
from policies.images import ImageConfig, ImageLookup
from policies.types import Severity
from tests.policies.cuda.test_require import nvidia_cuda_requirement
from tests.policies.rules.test_gpu_cuda_driver_mismatch import _node
from tests.policies.test_images import DictImageFacts

RULE = "gpu-cuda-driver-mismatch"
APP = "example.com/app:1"
CUDA_12_8 = ImageConfig(
    env=(("CUDA_VERSION", "12.8.1"), ("NVIDIA_REQUIRE_CUDA", nvidia_cuda_requirement("12.8", [470, 535, 550, 560, 565]))),
    source="registry example.com, sha256:abcd",
)


def _pod(image: str, env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": image, "resources": {"limits": {"nvidia.com/gpu": 1}}}
    if env is not None:
        container["env"] = env
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": [container]}}


def _findings(obj: dict[str, Any], facts: ClusterFacts, known: dict[str, ImageLookup]) -> list[Any]:
    return [f for f in evaluate(obj, None, facts, DictImageFacts(known)).findings if f.rule == RULE]


def _arch(node: dict[str, Any], arch: str) -> dict[str, Any]:
    node["metadata"]["labels"]["kubernetes.io/arch"] = arch
    return node


def test_the_runtime_refusal_decides_a_node_that_mvc_alone_would_pass() -> None:
    facts = facts_from_objects([_node("rtx", "525.147.05", "NVIDIA-RTX-A6000"),
                                       _node("new", "570.124.06", "NVIDIA-H100-80GB-HBM3")])
    [finding] = _findings(_pod(APP), facts, {APP: ImageLookup("found", CUDA_12_8)})
    assert finding.severity is Severity.WARNING
    assert "needs CUDA 12.8.1 (from image config CUDA_VERSION=12.8.1 (registry example.com, sha256:abcd)" in finding.message
    assert "incompatible: rtx (NVIDIA-RTX-A6000) driver 525.147.05 (the NVIDIA runtime refuses it: requirement " \
           "error: unsatisfied condition: cuda>=12.8)" in finding.message
    # the fix keeps the pod on the native node
    ops = [op.to_dict() for op in evaluate(_pod(APP), None, facts, DictImageFacts({APP: ImageLookup("found", CUDA_12_8)})).patch([RULE])]
    fixed = jsonpatch.apply_patch(_pod(APP), ops)
    assert _findings(fixed, facts, {APP: ImageLookup("found", CUDA_12_8)}) == []
    # by name alone the same node is only minor-version compatible
    [offline] = _findings(_pod("nvidia/cuda:12.8.1-base-ubuntu24.04"), facts, {})
    assert "minor-version compatibility: rtx" in offline.message


def test_a_pod_that_disables_the_check_is_told_so() -> None:
    facts = facts_from_objects([_node("new", "570.124.06", "NVIDIA-H100-80GB-HBM3")])
    env = [{"name": "NVIDIA_DISABLE_REQUIRE", "value": "true"}]
    [finding] = _findings(_pod(APP, env), facts, {APP: ImageLookup("found", CUDA_12_8)})
    assert finding.severity is Severity.INFO
    assert "it runs on every candidate node" in finding.message
    assert "the pod sets NVIDIA_DISABLE_REQUIRE=true: the NVIDIA runtime checks no requirement" in finding.message
    assert finding.remediation.startswith("Every candidate node runs it natively")
    assert _findings(_pod(APP), facts, {APP: ImageLookup("found", CUDA_12_8)}) == []
    # with a node that cannot run it, the severity follows the nodes and the note stays
    old = facts_from_objects([_node("old", "470.256.02", "NVIDIA-GeForce-RTX-3090")])
    [error] = _findings(_pod(APP, env), old, {APP: ImageLookup("found", CUDA_12_8)})
    assert error.severity is Severity.ERROR and "checks no requirement" in error.message


def test_a_pod_that_overrides_the_requirement_is_judged_by_its_own_value() -> None:
    facts = facts_from_objects([_node("a100", "570.124.06", "NVIDIA-A100-SXM4-80GB")])
    facts_labels = facts.nodes[0].labels
    assert "nvidia.com/gpu.compute.major" not in facts_labels  # arch unknown: never a refusal
    env = [{"name": "NVIDIA_REQUIRE_ARCH", "value": "arch>=9.0"}]
    [unknown_arch] = _findings(_pod(APP, env), facts, {APP: ImageLookup("found", CUDA_12_8)})
    assert unknown_arch.severity is Severity.INFO
    assert "the pod sets NVIDIA_REQUIRE_ARCH=arch>=9.0: the runtime checks it instead of the image's" in unknown_arch.message
    node = _node("a100", "570.124.06", "NVIDIA-A100-SXM4-80GB")
    node["metadata"]["labels"].update({"nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0"})
    [refused] = _findings(_pod(APP, env), facts_from_objects([node]), {APP: ImageLookup("found", CUDA_12_8)})
    assert refused.severity is Severity.ERROR
    assert "unsatisfied condition: arch>=9.0" in refused.message


def test_requirements_that_understate_the_need_are_named() -> None:
    facts = facts_from_objects([_node("t4", "470.256.02", "Tesla-T4"), _node("rtx", "470.256.02", "NVIDIA-RTX-A6000")])
    triton = "nvcr.io/nvidia/tritonserver:24.10-py3"
    config = ImageConfig(env=(("CUDA_VERSION", "12.6.2.004"), ("NVIDIA_REQUIRE_CUDA", "cuda>=9.0")))
    [finding] = _findings(_pod(triton), facts, {triton: ImageLookup("found", config)})
    assert finding.severity is Severity.WARNING
    assert "its NVIDIA_REQUIRE_CUDA (cuda>=9.0) asks for less than CUDA 12.6: the runtime's check will not stop it" \
           in finding.message
    # no runtime refusal is claimed: the runtime starts it and CUDA fails later
    assert "refuses" not in finding.message
    [offline] = _findings(_pod(triton), facts, {})
    assert "NGC framework images set NVIDIA_REQUIRE_CUDA=cuda>=9.0" in offline.message


def test_pending_lookups_are_judged_by_the_name_with_a_note() -> None:
    facts = facts_from_objects([_node("old", "470.256.02", "NVIDIA-GeForce-RTX-3090")])
    image = "vllm/vllm-openai:v0.10.0"
    [finding] = _findings(_pod(image), facts, {image: ImageLookup("pending", detail="lookup in flight")})
    assert finding.severity is Severity.ERROR
    assert "needs CUDA 12.8.1 (from vLLM v0.10.0 release image for amd64" in finding.message
    assert "registry lookup pending: lookup in flight; judged by the image name" in finding.message


def test_per_architecture_needs() -> None:
    facts = facts_from_objects([
        _arch(_node("x86", "550.90.07", "NVIDIA-H100-80GB-HBM3"), "amd64"),
        _arch(_node("gh200", "550.90.07", "NVIDIA-GH200-480GB"), "arm64"),
    ])
    [finding] = _findings(_pod("vllm/vllm-openai:v0.11.0"), facts, {})
    assert "needs CUDA 12.8.1 on amd64 (from vLLM v0.11.0 release image for amd64" in finding.message
    assert "CUDA 12.9.1 on arm64 (from vLLM v0.11.0 release image for arm64" in finding.message
    arm_only = DictImageFacts({})
    evaluate(_pod(APP), None, facts, arm_only)
    assert set(arm_only.calls) == {(APP, "amd64"), (APP, "arm64")}

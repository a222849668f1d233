"""gpu-cuda-driver-mismatch through the engine, its fix, and `gpuguard explain-image`."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from linter import cmd_explain_image
from policies import ClusterFacts, evaluate
from policies.facts_build import facts_from_objects
from policies.types import Severity
from tests.support.paths import CORPUS

RULE = "gpu-cuda-driver-mismatch"
TOLERATE_ALL = [{"operator": "Exists"}]


def _pod(image: str, tolerations: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "containers": [{"name": "train", "image": image, "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        **spec,
    }
    if tolerations:
        body["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": body}


def _findings(obj: dict[str, Any], facts: ClusterFacts, config: Any = None) -> list[Any]:
    return [f for f in evaluate(obj, config, facts).findings if f.rule == RULE]


def _apply_fix(obj: dict[str, Any], facts: ClusterFacts) -> dict[str, Any]:
    ops = [op.to_dict() for op in evaluate(obj, None, facts).patch([RULE])]
    assert ops, "expected a fix"
    patched: dict[str, Any] = jsonpatch.apply_patch(obj, ops)
    return patched


def _node(name: str, driver: str | None, product: str | None, old_labels: bool = False) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name}
    if product:
        labels["nvidia.com/gpu.product"] = product
    if driver:
        keys = ("major", "minor", "rev") if old_labels else ("major", "minor", "revision")
        prefix = "nvidia.com/cuda.driver." if old_labels else "nvidia.com/cuda.driver-version."
        labels.update({prefix + k: v for k, v in zip(keys, driver.split("."), strict=False)})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "1"}},
    }


def test_no_candidate_runs_the_image_is_an_error_without_fix(example_facts: ClusterFacts) -> None:
    (finding,) = _findings(_pod("nvidia/cuda:13.0.2-runtime-ubuntu22.04"), example_facts)
    assert finding.severity is Severity.ERROR
    assert finding.path == "/spec/containers/0/image"
    assert "CUDA 13.0.2" in finding.message and "t4-pool-1" in finding.message and "470.256.02" in finding.message
    assert "incompatible" in finding.message
    assert "580.95.05" in finding.remediation and "CUDA 11.4 or older" in finding.remediation
    assert finding.fix == ()


def test_forward_compat_only_is_a_warning(example_facts: ClusterFacts) -> None:
    (finding,) = _findings(_pod("nvidia/cuda:12.4.1-base-ubuntu22.04"), example_facts)
    assert finding.severity is Severity.WARNING
    assert "forward compatibility: t4-pool-1 (Tesla-T4) driver 470.256.02" in finding.message


def test_native_nodes_available_is_info_and_the_fix_removes_the_finding(example_facts: ClusterFacts) -> None:
    pod = _pod("nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", TOLERATE_ALL)
    (finding,) = _findings(pod, example_facts)
    assert finding.severity is Severity.INFO
    assert "native: h100-pool-1, h100-pool-2" in finding.message
    patched = _apply_fix(pod, example_facts)
    terms = patched["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    keys = {e["key"] for t in terms for e in t["matchExpressions"]}
    # The T4 carries only the deprecated names, so both name sets are written.
    assert "nvidia.com/cuda.driver-version.major" in keys and "nvidia.com/cuda.driver.major" in keys
    assert _findings(patched, example_facts) == []
    assert evaluate(patched, None, example_facts).patch([RULE]) == []


def test_fix_is_anded_into_existing_affinity_terms(example_facts: ClusterFacts) -> None:
    pool_term = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a100", "h100", "t4"]}]}
    host_term = {"matchExpressions": [{"key": "node.kubernetes.io/instance-type", "operator": "Exists"}]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [pool_term, host_term]}
        },
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
    }
    pod = _pod("nvidia/cuda:12.4.0-base-ubuntu22.04", TOLERATE_ALL, affinity=copy.deepcopy(affinity))
    (finding,) = _findings(pod, example_facts)
    assert finding.severity is Severity.INFO
    patched = _apply_fix(pod, example_facts)
    new_affinity = patched["spec"]["affinity"]
    assert new_affinity["podAntiAffinity"] == affinity["podAntiAffinity"]
    terms = new_affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) % 2 == 0 and len(terms) > 2
    for term in terms:  # every original term survives, with driver expressions added
        first = term["matchExpressions"][0]
        assert first in (pool_term["matchExpressions"][0], host_term["matchExpressions"][0])
        assert any(e["key"].startswith("nvidia.com/cuda.driver") for e in term["matchExpressions"])
    assert _findings(patched, example_facts) == []
    assert evaluate(patched, None, example_facts).patch([RULE]) == []


def test_minor_version_floor_fix_downgrades_the_finding() -> None:
    facts = facts_from_objects(
        [
            _node("old", "470.256.02", "NVIDIA-GeForce-RTX-3090"),
            _node("mid", "535.183.01", "NVIDIA-GeForce-RTX-4090"),
        ]
    )
    pod = _pod("nvidia/cuda:12.4.1-runtime-ubuntu22.04")
    (finding,) = _findings(pod, facts)
    assert finding.severity is Severity.WARNING and "incompatible: old" in finding.message
    patched = _apply_fix(pod, facts)
    (after,) = _findings(patched, facts)
    assert after.severity is Severity.WARNING and "incompatible" not in after.message
    assert evaluate(patched, None, facts).patch([RULE]) == []


def test_unknown_drivers_never_fire_and_soften_errors() -> None:
    unknown = _node("unlabelled", None, None)
    only_unknown = facts_from_objects([unknown])
    assert _findings(_pod("nvidia/cuda:13.0.2-base-ubuntu24.04"), only_unknown) == []
    mixed = facts_from_objects([unknown, _node("t4", "470.256.02", "Tesla-T4", old_labels=True)])
    (finding,) = _findings(_pod("nvidia/cuda:13.0.2-base-ubuntu24.04"), mixed)
    assert finding.severity is Severity.WARNING
    assert "unknown driver: unlabelled" in finding.message


def test_unresolvable_images_and_cpu_containers_are_silent(example_facts: ClusterFacts) -> None:
    for image in ("nvidia/cuda:latest", "registry.example.com/team/app@sha256:" + "a" * 64, "busybox"):
        assert _findings(_pod(image), example_facts) == []
    cpu_only = _pod("nvidia/cuda:11.4.3-base-ubuntu20.04")
    cpu_only["spec"]["containers"].append({"name": "side", "image": "nvidia/cuda:13.0.2-base-ubuntu24.04"})
    assert _findings(cpu_only, example_facts) == []


def test_config_severity_overrides_and_image_rules(example_facts: ClusterFacts) -> None:
    config = load_config(
        {
            "rules": {
                RULE: {
                    "severity": "warning",
                    "options": {"imageRules": [{"pattern": r"^registry\.example\.com/ml/", "cudaVersion": "13.0"}]},
                }
            }
        }
    )
    (finding,) = _findings(_pod("registry.example.com/ml/trainer:1.0"), example_facts, config)
    assert finding.severity is Severity.WARNING  # graded error, configured warning
    assert "imageRules" in finding.message


def test_per_container_annotation_wins(example_facts: ClusterFacts) -> None:
    pod = _pod("registry.example.com/team/app:1")
    pod["metadata"]["annotations"] = {"gpuguard.io/cuda-version": "11.4", "gpuguard.io/cuda-version.train": "13.0"}
    (finding,) = _findings(pod, example_facts)
    assert "CUDA 13.0" in finding.message and "gpuguard.io/cuda-version.train" in finding.message


def test_fix_is_not_offered_when_no_candidate_would_remain() -> None:
    facts = facts_from_objects([_node("a", "535.129.03", "NVIDIA-A100-SXM4-80GB")])
    (finding,) = _findings(_pod("nvidia/cuda:12.8.1-base-ubuntu22.04"), facts)
    assert finding.severity is Severity.WARNING and finding.fix == ()


def test_many_identical_nodes_are_judged_per_group() -> None:
    nodes = [_node(f"h{i}", "550.90.07", "NVIDIA-H100-80GB-HBM3") for i in range(2000)]
    nodes += [_node(f"t{i}", "470.256.02", "Tesla-T4") for i in range(2000)]
    facts = facts_from_objects(nodes)
    assert len(facts.groups) == 2
    (finding,) = _findings(_pod("nvidia/cuda:12.4.1-base-ubuntu22.04"), facts)
    assert finding.severity is Severity.INFO
    assert "and 1997 more" in finding.message and len(finding.message) < 600


def _corpus_docs() -> list[Any]:
    real = CORPUS / "real"
    docs: list[tuple[str, Any]] = []
    for path in sorted(real.glob("*.y*ml")):
        try:
            docs.extend((path.name, d) for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict))
        except yaml.YAMLError:
            continue
    return docs


def test_corpus_never_crashes_and_messages_name_the_container(example_facts: ClusterFacts) -> None:
    docs = _corpus_docs()
    assert docs, "the corpus holds GPU manifests"
    for name, doc in docs:
        for finding in _findings(doc, example_facts):
            assert finding.message.startswith("container '"), name
            assert finding.path.endswith("/image"), name


def _run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    cmd_explain_image.add_arguments(parser)
    return cmd_explain_image.run(parser.parse_args(list(argv)))


def test_explain_image_text_with_sample_cluster(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run_cli("nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", "--cluster", "sample") == 0
    out = capsys.readouterr().out
    assert "CUDA: 12.4.1 (from nvidia/cuda image tag)" in out
    assert "native: driver 550.54.15 or newer" in out
    assert "t4-pool-1 (Tesla-T4): driver 470.256.02, CUDA 11.4: forward compatibility" in out
    assert "h100-pool-1, h100-pool-2 (NVIDIA-H100-80GB-HBM3): driver 550.90.07, CUDA 12.4: native" in out
    assert "cpu-pool-1" not in out


def test_explain_image_json_and_unknown(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump(_node("x", "535.129.03", "NVIDIA-L4")))
    assert _run_cli("nvcr.io/nvidia/tritonserver:24.10-py3", "--cluster", str(cluster), "--format", "json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report == {
        "image": "nvcr.io/nvidia/tritonserver:24.10-py3",
        "cuda": {"version": "12.6.2", "source": "NGC tritonserver 24.10 release notes"},
        "cudaStatus": "known",
        "cudaReason": None,
        "requirement": None,
        "nodes": [{"name": "x", "driver": "535.129.03", "verdict": "minor-version"}],
    }
    assert _run_cli("nvidia/cuda:latest", "--format", "json") == 0
    unknown = json.loads(capsys.readouterr().out)
    assert unknown == {
        "image": "nvidia/cuda:latest",
        "cuda": None,
        "cudaStatus": "unknown",
        "cudaReason": "no sourced naming convention determines its CUDA version",
        "requirement": None,
        "nodes": [],
    }


@pytest.mark.parametrize(
    ("image", "status", "reason"),
    [
        ("ubuntu:22.04", "none", "Docker Official Image ubuntu: an OS/language base image without CUDA"),
        ("rocm/pytorch:latest", "none", "AMD's PyTorch image for ROCm (AMD GPUs): an image built without CUDA"),
        ("nvcr.io/nvidia/tritonserver:24.06-py3-sdk", "unknown", "no release note states the CUDA of the Triton SDK"),
        ("nvcr.io/nvidia/vllm:26.02-py3", "unknown", "gives the CUDA of NGC vllm 26.02"),
        ("example.com/app:1", "unknown", "no sourced naming convention"),
    ],
)
def test_explain_image_json_tells_none_from_unknown(
    capsys: pytest.CaptureFixture[str], image: str, status: str, reason: str
) -> None:
    """Both print "cuda": null; cudaStatus and cudaReason tell an image without CUDA from an unknown one."""
    assert _run_cli(image, "--format", "json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cuda"] is None and report["cudaStatus"] == status
    assert reason in report["cudaReason"]


def test_explain_image_unknown_when_the_image_config_declares_no_cuda() -> None:
    from policies.cuda.explain import explain_image
    from policies.images import ImageConfig

    report = explain_image("example.com/app:1", None, ImageConfig(env=(("PATH", "/usr/bin"),)))
    shown = report.to_json()
    assert (shown["cuda"], shown["cudaStatus"]) == (None, "unknown")
    assert shown["cudaReason"] == "its image config declares no CUDA_VERSION or NVIDIA_REQUIRE_CUDA"


def test_explain_image_text_says_why_an_image_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run_cli("nvcr.io/nvidia/tritonserver:24.06-py3-igpu") == 0
    out = capsys.readouterr().out
    assert "CUDA: unknown — the Triton iGPU image is built for Jetson devices" in out
    assert "gpuguard does not guess" in out
    assert _run_cli("example.com/app:1") == 0
    assert "CUDA: unknown (no recognised tag; gpuguard does not guess" in capsys.readouterr().out


def test_explain_image_with_an_image_config(capsys: pytest.CaptureFixture[str]) -> None:
    from policies.images import ImageConfig
    from tests.policies.cuda.test_require import nvidia_cuda_requirement

    requirement = nvidia_cuda_requirement("12.8", [470, 535, 550, 560, 565])
    config = ImageConfig(env=(("CUDA_VERSION", "12.8.1"), ("NVIDIA_REQUIRE_CUDA", requirement)),
                         source="registry example.com, sha256:abcd")
    parser = argparse.ArgumentParser()
    cmd_explain_image.add_arguments(parser)
    args = parser.parse_args(["example.com/app:1", "--cluster", "sample", "--format", "json"])
    assert cmd_explain_image.run(args, config) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cuda"] == {"version": "12.8.1",
                              "source": "image config CUDA_VERSION=12.8.1 (registry example.com, sha256:abcd)"}
    assert (report["cudaStatus"], report["cudaReason"]) == ("known", None)
    assert report["requirement"] == requirement
    verdicts = {n["name"]: n["verdict"] for n in report["nodes"]}
    assert verdicts["t4-pool-1"] == "forward" and verdicts["h100-pool-1"] == "minor-version"
    args = parser.parse_args(["example.com/app:1", "--cluster", "sample"])
    assert cmd_explain_image.run(args, config) == 0
    text = capsys.readouterr().out
    assert f"runtime requirement: NVIDIA_REQUIRE_CUDA={requirement} (image config)" in text
    assert "forward compatibility (data-center GPUs): the driver branches its NVIDIA_REQUIRE_CUDA lists" in text


def test_explain_image_plain_and_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert _run_cli("ubuntu:22.04") == 0
    assert "CUDA: none — the image carries no CUDA" in capsys.readouterr().out
    from policies.cuda.explain import explain_image, render_text
    from policies.images import ImageConfig

    facts = facts_from_objects([_node("r525", "525.147.05", "NVIDIA-A100-SXM4-80GB")])
    config = ImageConfig(env=(("CUDA_VERSION", "12.8.1"), ("NVIDIA_REQUIRE_CUDA", "cuda>=12.8")))
    report = explain_image("example.com/app:1", facts, config)
    assert report.to_json()["nodes"] == [{"name": "r525", "driver": "525.147.05", "verdict": "incompatible"}]
    assert "incompatible — the NVIDIA runtime refuses it: unsatisfied condition: cuda>=12.8" in render_text(report)


def test_explain_image_bad_cluster_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert _run_cli("nvidia/cuda:12.4.1-base-ubuntu22.04", "--cluster", str(tmp_path / "missing.yaml")) == 2
    assert "cannot read" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        _run_cli()
    assert exc.value.code == 2


def test_forward_compat_only_fix_pins_products_and_branches() -> None:
    facts = facts_from_objects(
        [
            _node("t4", "470.256.02", "Tesla-T4"),
            _node("rtx", "470.256.02", "NVIDIA-GeForce-RTX-3090"),
            _node("t4-old", "470.256.02", "Tesla-T4", old_labels=True),
        ]
    )
    pod = _pod("nvidia/cuda:12.4.1-base-ubuntu22.04")
    (finding,) = _findings(pod, facts)
    assert finding.severity is Severity.WARNING
    assert "incompatible: rtx" in finding.message
    patched = _apply_fix(pod, facts)
    terms = patched["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {(t["matchExpressions"][0]["values"][0], t["matchExpressions"][1]["key"]) for t in terms} == {
        ("Tesla-T4", "nvidia.com/cuda.driver-version.major"),
        ("Tesla-T4", "nvidia.com/cuda.driver.major"),
    }
    (after,) = _findings(patched, facts)
    assert "rtx" not in after.message and "t4-old" in after.message
    assert evaluate(patched, None, facts).patch([RULE]) == []



def test_container_with_zero_gpus_is_not_judged(example_facts: ClusterFacts) -> None:
    pod = _pod("nvidia/cuda:12.2.0-devel-ubi8", TOLERATE_ALL)
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 0
    assert _findings(pod, example_facts) == []


def _tainted(node: dict[str, Any], *taints: tuple[str, str]) -> dict[str, Any]:
    node["spec"] = {"taints": [{"key": k, "value": v, "effect": "NoSchedule"} for k, v in taints]}
    return node


def test_a_missing_toleration_does_not_hide_the_driver_of_the_nodes_the_pod_is_meant_for() -> None:
    # Both GPU pools are tainted nvidia.com/gpu and the pod tolerates neither: the taint rule fires, and
    # the CUDA rule judges the pools as if the toleration were there (R535 minor-version only, R550
    # native) in the same run, with its affinity fix.  After --fix (both fixes), nothing is left.
    facts = facts_from_objects([
        _tainted(_node("old", "535.129.03", "NVIDIA-A100-SXM4-80GB"), ("nvidia.com/gpu", "present")),
        _tainted(_node("new", "550.90.07", "NVIDIA-H100-80GB-HBM3"), ("nvidia.com/gpu", "present")),
    ])
    pod = _pod("nvidia/cuda:12.4.1-runtime-ubuntu22.04")
    ev = evaluate(pod, None, facts)
    assert {f.rule for f in ev.findings} >= {"gpu-taint-not-tolerated", RULE}
    (cuda,) = [f for f in ev.findings if f.rule == RULE]
    assert "old" in cuda.message and "new" in cuda.message and cuda.fix
    fixed = jsonpatch.apply_patch(pod, [op.to_dict() for op in ev.patch()])
    again = evaluate(fixed, None, facts)
    assert [f for f in again.findings if f.severity is not Severity.INFO] == []
    assert again.patch() == []


def test_the_cuda_verdict_after_the_taint_fix_is_the_one_before() -> None:
    # Only the pool the taint rule's toleration opens counts: a pool also reserved by dedicated=training
    # stays shut after the fix, so it is not judged before it either.
    facts = facts_from_objects([
        _tainted(_node("a100", "535.129.03", "NVIDIA-A100-SXM4-80GB"), ("nvidia.com/gpu", "present")),
        _tainted(_node("h100", "550.90.07", "NVIDIA-H100-80GB-HBM3"), ("nvidia.com/gpu", "present"),
                 ("dedicated", "training")),
    ])
    pod = _pod("nvidia/cuda:12.4.1-runtime-ubuntu22.04")
    ev = evaluate(pod, None, facts)
    before = [(f.path, f.severity, f.message) for f in ev.findings if f.rule == RULE]
    assert before and "h100" not in before[0][2]
    taint_fix = [op.to_dict() for op in ev.patch(["gpu-taint-not-tolerated"])]
    assert taint_fix
    after = evaluate(jsonpatch.apply_patch(pod, taint_fix), None, facts)
    assert [(f.path, f.severity, f.message) for f in after.findings if f.rule == RULE] == before


def test_a_pod_whose_selector_matches_no_gpu_node_is_not_judged() -> None:
    facts = facts_from_objects([
        _tainted(_node("a100", "535.129.03", "NVIDIA-A100-SXM4-80GB"), ("nvidia.com/gpu", "present")),
    ])
    pod = _pod("nvidia/cuda:13.0.2-runtime-ubuntu22.04", nodeSelector={"nvidia.com/gpu.product": "Tesla-T4"})
    assert _findings(pod, facts) == []


def test_forward_compatibility_no_source_states_is_a_warning_that_says_so() -> None:
    """Triton 25.12 (CUDA 13.1.0): NGC's notes list branches they call not forward-compatible and no
    nvidia/cuda 13.1 image's requirement is recorded, so an R570 data-center GPU may or may not start it:
    a warning that says why, not an error a webhook in enforce mode would deny it with."""
    facts = facts_from_objects([_node("h100", "570.133.20", "NVIDIA-H100-80GB-HBM3")])
    (f,) = _findings(_pod("nvcr.io/nvidia/tritonserver:25.12-py3"), facts)
    assert f.severity is Severity.WARNING
    assert "forward compatibility: h100 (NVIDIA-H100-80GB-HBM3) driver 570.133.20" in f.message
    assert "no source gpuguard has states which driver branches CUDA 13.1.0's forward-compatibility" in f.message
    consumer = facts_from_objects([_node("rtx", "570.133.20", "NVIDIA-GeForce-RTX-4090")])
    (g,) = _findings(_pod("nvcr.io/nvidia/tritonserver:25.12-py3"), consumer)
    assert g.severity is Severity.ERROR and "incompatible" in g.message and "no source" not in g.message


def test_explain_image_says_when_no_source_states_the_forward_branches(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run_cli("nvcr.io/nvidia/tritonserver:25.12-py3", "--offline") == 0
    out = capsys.readouterr().out
    assert ("forward compatibility (data-center GPUs): the accepted driver branches are stated by no source "
            "gpuguard has") in out
    assert _run_cli("nvcr.io/nvidia/tritonserver:25.10-py3", "--offline") == 0  # 13.0: nvidia/cuda's branches
    assert "forward compatibility (data-center GPUs): driver 535, 550, 565, 570, 575" in capsys.readouterr().out

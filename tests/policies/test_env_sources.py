"""envFrom sources the run carries are read; those it does not carry are a note in a run, and a
warning where no run is known (an admission review)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from policies.engine import evaluate
from policies.env_sources import NO_SOURCES, env_sources
from policies.types import Severity

RULE = "gpu-device-access-bypass"


def pod(env_from: list[dict[str, Any]], gpus: bool = True, namespace: str = "ml") -> dict[str, Any]:
    resources = {"limits": {"nvidia.com/gpu": 1}} if gpus else {}
    image = "vllm/vllm-openai:v0.8.5" if gpus else "busybox:1.36"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace},
            "spec": {"containers": [{"name": "c", "image": image, "envFrom": env_from,
                                     "resources": resources}]}}


def config_map(name: str, data: dict[str, str], namespace: str | None = "ml", kind: str = "ConfigMap",
               field: str = "data") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, field: data}


def found(obj: dict[str, Any], *objects: dict[str, Any] | None) -> list[tuple[Severity, str]]:
    run = None if objects == (None,) else env_sources(o for o in objects if o is not None)
    ev = evaluate(obj, env_sources=run)
    return [(f.severity, f.message) for f in ev.findings if f.rule == RULE]


REF = [{"configMapRef": {"name": "settings"}}]


def test_without_a_run_an_unread_source_is_a_warning() -> None:
    [(severity, message)] = found(pod(REF), None)
    assert severity is Severity.WARNING and "gpuguard cannot read it" in message


def test_a_source_the_run_carries_without_the_variable_is_no_finding() -> None:
    assert found(pod(REF), config_map("settings", {"MODEL": "llama", "HF_HOME": "/cache"})) == []
    # a container without GPUs that reads it (an init container downloading the model) too
    assert found(pod(REF, gpus=False), config_map("settings", {"MODEL": "llama"})) == []


@pytest.mark.parametrize(("source", "env_from"), [
    (config_map("settings", {"NVIDIA_VISIBLE_DEVICES": "all"}), REF),
    (config_map("settings", {"VISIBLE_DEVICES": "all"}), [{"configMapRef": {"name": "settings"}, "prefix": "NVIDIA_"}]),
    (config_map("tokens", {"NVIDIA_VISIBLE_DEVICES": base64.b64encode(b"0,1,2,3").decode()}, kind="Secret"),
     [{"secretRef": {"name": "tokens"}}]),
    (config_map("tokens", {"NVIDIA_VISIBLE_DEVICES": "all"}, kind="Secret", field="stringData"),
     [{"secretRef": {"name": "tokens"}}]),
    (config_map("settings", {"NVIDIA_VISIBLE_DEVICES": "all"}, namespace=None), REF),  # applied to the pod's
])
def test_a_source_that_sets_the_variable_is_an_error(source: dict[str, Any], env_from: list[dict[str, Any]]) -> None:
    [(severity, message)] = found(pod(env_from), source)
    assert severity is Severity.ERROR and "NVIDIA_VISIBLE_DEVICES=" in message and "wins" in message


def test_a_value_that_selects_no_device_is_no_finding() -> None:
    assert found(pod(REF), config_map("settings", {"NVIDIA_VISIBLE_DEVICES": "void"})) == []


def test_a_source_the_run_does_not_carry_is_a_note() -> None:
    for run in ((), (config_map("settings", {"NVIDIA_VISIBLE_DEVICES": "all"}, namespace="other"),)):
        [(severity, message)] = found(pod(REF), *run) if run else found(pod(REF))
        assert severity is Severity.INFO and "not among the inputs" in message


def test_the_same_pod_in_different_runs_gets_each_runs_answer() -> None:
    """The sources are part of the template's inputs, so the memo keeps the answers apart."""
    obj = pod(REF)
    clean, dirty = config_map("settings", {"A": "b"}), config_map("settings", {"NVIDIA_VISIBLE_DEVICES": "all"})
    assert found(obj, clean) == []
    assert [s for s, _ in found(obj, dirty)] == [Severity.ERROR]
    assert found(obj, clean) == []
    assert [s for s, _ in found(obj, None)] == [Severity.WARNING]
    assert evaluate(obj, env_sources=NO_SOURCES).findings[0].severity is Severity.INFO


def test_standalone_gpu_infrastructure_in_a_named_namespace_is_trusted_in_a_run_only() -> None:
    """NVIDIA's standalone vGPU device manager as its own example deploys it (into `default`): in a
    run of manifests its images decide, at admission only the namespace or a ClusterPolicy would."""
    daemon_set = {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "vgpu-device-manager", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "m"}}, "template": {
            "metadata": {"labels": {"app": "m"}},
            "spec": {"containers": [{"name": "m", "image": "nvcr.io/nvidia/cloud-native/vgpu-device-manager:v0.5.0",
                                     "securityContext": {"privileged": True}}]}}},
    }
    at_admission = [f for f in evaluate(daemon_set).findings if f.rule == RULE]
    in_a_run = [f for f in evaluate(daemon_set, env_sources=NO_SOURCES).findings if f.rule == RULE]
    assert any(f.severity is Severity.WARNING for f in at_admission)
    assert not any("infrastructureNamespaces or a ClusterPolicy make it so" in f.message for f in at_admission)
    assert in_a_run and all(f.severity is Severity.INFO for f in in_a_run)
    assert all("at admission only infrastructureNamespaces" in f.message for f in in_a_run)

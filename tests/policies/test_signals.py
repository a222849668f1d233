"""The GPU-access signals: one definition for the engine's pre-filter, the bypass rule and the webhook's CEL."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies import evaluate
from policies.signals import DEVICE_ENV_NAMES, HOST_PATH_MARKERS, is_device_host_path
from policies.types import Severity

DEVICE_PATHS = ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-caps", "/dev/dri", "/dev/dri/renderD128"]

def spellings(path: str) -> list[str]:
    """The same path written in ways the kernel resolves to it."""
    name = path.rsplit("/", 1)[-1]
    return [path, "/" + path, path + "/", "/." + path, path + "/.", path + "/../" + name, path.replace("/dev/", "/dev//")]

NOT_DEVICES = ["/dev/driver", "/dev/null", "/var/lib/nvidia-data", "/dev", "", "dev/nvidia0"]


def pod(**spec: Any) -> dict[str, Any]:
    containers = spec.pop("containers", [{"name": "c", "image": "busybox"}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": containers, **spec}}


@pytest.mark.parametrize("path", DEVICE_PATHS)
def test_device_paths_in_any_spelling(path: str) -> None:
    for spelt in spellings(path):
        assert is_device_host_path(spelt), spelt


@pytest.mark.parametrize("path", NOT_DEVICES)
def test_other_paths_are_not_devices(path: str) -> None:
    assert not is_device_host_path(path)


@given(st.text(alphabet="/.abcdeinrvu0-", max_size=30))
def test_coarse_markers_cover_every_device_path(path: str) -> None:
    """Whatever the precise test accepts, the coarse CEL test (substring markers) accepts too."""
    if is_device_host_path(path):
        assert any(marker in path for marker in HOST_PATH_MARKERS)


@pytest.mark.parametrize("name", DEVICE_ENV_NAMES)
def test_env_signal_reaches_the_rule(name: str) -> None:
    ev = evaluate(pod(containers=[{"name": "c", "image": "busybox", "env": [{"name": name, "value": "all"}]}]))
    assert ev.gpu_related
    assert [f.rule for f in ev.findings] == ["gpu-device-access-bypass"]


@pytest.mark.parametrize("path", ["/dev/nvidia0", "//dev/./nvidia0", "/dev/dri/renderD128"])
def test_host_path_signal_reaches_the_rule(path: str) -> None:
    ev = evaluate(pod(volumes=[{"name": "d", "hostPath": {"path": path}}]))
    assert ev.gpu_related
    assert [f.rule for f in ev.findings] == ["gpu-device-access-bypass"]


def test_unrelated_signals_are_not_gpu_related() -> None:
    ev = evaluate(pod(
        containers=[{"name": "c", "image": "x", "env": [{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=12"}]}],
        volumes=[{"name": "d", "hostPath": {"path": "/dev/driver"}}],
    ))
    assert not ev.gpu_related and not ev.findings


@pytest.mark.parametrize(("image", "infrastructure"), [
    ("nvcr.io/nvidia/k8s-device-plugin:v0.17.0", True),
    ("nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0", True),
    ("docker.io/rocm/test-runner:v1.4.0", True),  # the AMD GPU Operator's (ROCm/gpu-operator values.yaml)
    ("rocm/k8s-device-plugin:labeller-latest", True),
    ("rocm/device-metrics-exporter:v1.3.0", True),
    ("nvcr.io/nvidia/gpu-feature-discovery:v0.8.2", True),  # standalone GFD, before it joined the device plugin
    ("nvcr.io/nvidia/lepton/gpud:latest", True),  # NVIDIA's GPUd health daemon (leptonai/gpud's chart)
    ("nvcr.io/nvidia/lepton/gpud-worker:1", False),
    ("mcr.microsoft.com/aks/aks-gpu:${TAG}", True),  # AKS's GPU driver installer (Azure/aks-gpu manifests.yaml)
    ("mcr.microsoft.com/aks/aks-gpu-helper:1", False),
    ("rocm/pytorch:latest", False),  # a workload image of the same organisation
    ("docker.io/someone/rocm/test-runner-fork:1", False),
    ("nvcr.io/nvidia/pytorch:24.05-py3", False),
])
def test_gpu_infrastructure_images(image: str, infrastructure: bool) -> None:
    from policies.signals import is_infrastructure_image

    assert is_infrastructure_image(image) is infrastructure


@pytest.mark.parametrize("resource", ["volcano.sh/gpu-memory", "volcano.sh/gpu-number", "aliyun.com/gpu-mem",
                                      "aliyun.com/gpu-count"])
def test_a_gpu_share_whose_plugin_picks_the_gpu_is_no_bypass(resource: str) -> None:
    """Volcano's and Alibaba's GPU-share device plugins set NVIDIA_VISIBLE_DEVICES to the GPU they
    allocate, over the CUDA image's ``all``; without the share the same container is a bypass."""
    def pod(limits: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
                "spec": {"containers": [{"name": "c", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
                                         "command": ["sleep", "1000"], "resources": {"limits": limits}}]}}

    def bypass(obj: dict[str, Any]) -> list[Any]:
        return [f for f in evaluate(obj).findings if f.rule == "gpu-device-access-bypass"]

    assert bypass(pod({resource: 1024 if "mem" in resource else 1})) == []
    assert bypass(pod({"example.com/widget": 1})) != []


def _runai_pod(scheduler: str = "runai-scheduler", allocated: str = "1", key: str = "RUNAI-VISIBLE-DEVICES") -> dict[str, Any]:
    """A pod as Run:ai's scheduler leaves it (run-ai/fake-gpu-operator design/samples/>=2.9/mig/pod)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job-0-0", "namespace": "team-a", "annotations": {
        "runai-allocated-gpus": "0", "runai-allocated-mig-gpus": allocated, "runai-allocated-gpu-memory": "0"}},
        "spec": {"schedulerName": scheduler, "containers": [{"name": "job", "image": "gcr.io/run-ai-demo/mat-mul",
                 "env": [{"name": "RANK", "value": "0"}, {"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {
                     "configMapKeyRef": {"name": "job-runai-sh-gpu", "key": key}}}], "resources": {}}]}}


def test_a_gpu_run_ai_allocated_is_no_bypass() -> None:
    def bypass(obj: dict[str, Any]) -> list[Any]:
        return [f for f in evaluate(obj).findings if f.rule == "gpu-device-access-bypass"]

    assert bypass(_runai_pod()) == []
    # Without Run:ai's scheduler, an allocation it recorded, or its ConfigMap key, the variable is a bypass.
    for other in (_runai_pod(scheduler="default-scheduler"), _runai_pod(allocated="0"), _runai_pod(key="GPUS")):
        assert [f.severity.name for f in bypass(other)] == ["ERROR"]


def _monitor(env: list[dict[str, str]], namespace: str | None = None, **container: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "exporter"}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "spec": {
        "selector": {"matchLabels": {"app": "e"}}, "template": {"metadata": {"labels": {"app": "e"}}, "spec": {
            "runtimeClassName": "nvidia",
            "containers": [{"name": "exporter", "image": "docker.io/utkuozdemir/nvidia_gpu_exporter:1.3.1",
                            "env": env, **container}]}}}}


UTILITY = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"}]


@pytest.mark.parametrize(("env", "container", "severity"), [
    # utkuozdemir/nvidia_gpu_exporter's chart: every GPU for nvidia-smi, the utility capability alone.
    (UTILITY, {}, Severity.INFO),
    ([UTILITY[0], {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": " utility "}], {}, Severity.INFO),
    ([UTILITY[0], {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"}], {}, Severity.ERROR),
    ([UTILITY[0], {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "all"}], {}, Severity.ERROR),
    ([UTILITY[0]], {}, Severity.ERROR),  # the default capabilities include compute
    ([UTILITY[0], {"name": "NVIDIA_DRIVER_CAPABILITIES", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}],
     {}, Severity.ERROR),
    (UTILITY, {"securityContext": {"privileged": True}}, Severity.ERROR),  # raw devices need no library
])
def test_a_gpu_monitor_with_the_utility_capability_alone_is_infrastructure_in_a_lint_run(
    env: list[dict[str, Any]], container: dict[str, Any], severity: Severity
) -> None:
    from policies.env_sources import EnvSources

    for namespace in (None, "monitoring"):  # a lint run (its env sources given) judges what the pod is
        found = [f for f in evaluate(_monitor(env, namespace, **container), env_sources=EnvSources()).findings
                 if f.rule == "gpu-device-access-bypass"]
        assert found and max(f.severity for f in found) is severity, found
        if severity is Severity.INFO:
            assert all("NVIDIA_DRIVER_CAPABILITIES=utility gives it NVML and nvidia-smi" in f.message for f in found)


def test_a_gpu_monitor_at_admission_keeps_its_finding() -> None:
    """A tenant's pod in its own namespace could name the utility capability and bring its own CUDA
    library to the device nodes: at admission only infrastructureNamespaces make it infrastructure."""
    found = [f for f in evaluate(_monitor(UTILITY, namespace="team-a")).findings if f.rule == "gpu-device-access-bypass"]
    assert [f.severity for f in found] == [Severity.ERROR]


def _hived(**spec: Any) -> dict[str, Any]:
    """A pod of microsoft/hivedscheduler's basic example: GPUs allocated by the scheduler, named to the
    NVIDIA runtime through the annotation it sets when it binds the pod."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "demo1-a-0", "namespace": "ml"}, "spec": {
        "schedulerName": "hivedscheduler", **spec,
        "containers": [{"name": "ubuntu", "image": "ubuntu:trusty",
                        "resources": {"limits": {"hivedscheduler.microsoft.com/pod-scheduling-enable": 1}},
                        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"fieldRef": {
                            "fieldPath": "metadata.annotations['hivedscheduler.microsoft.com/pod-leaf-cell-isolation']"}}}]}]}}


@pytest.mark.parametrize(("spec", "severity"), [
    ({}, Severity.INFO),
    ({"schedulerName": "default-scheduler"}, Severity.ERROR),  # no HiveD sets the annotation
    ({"nodeName": "gpu-node-1"}, Severity.ERROR),  # bound by its author: the annotation is whatever they wrote
])
def test_gpus_the_hived_scheduler_allocates_are_no_bypass(spec: dict[str, Any], severity: Severity) -> None:
    found = [f for f in evaluate(_hived(**spec)).findings if f.rule == "gpu-device-access-bypass"]
    assert [f.severity for f in found] == [severity], found
    if severity is Severity.INFO:
        assert "the HiveD scheduler sets when it binds the pod" in found[0].message


_PRIVILEGED = {"privileged": True}
_SYS_ADMIN = {"capabilities": {"add": ["SYS_ADMIN"]}}


@pytest.mark.parametrize(("mig_monitor", "security", "severity"), [
    ("all", _PRIVILEGED, Severity.INFO),  # Kepler's DaemonSet: NVML power readings of every GPU and MIG device
    ("all", _SYS_ADMIN, Severity.INFO),  # CAP_SYS_ADMIN in the bounding set: privileged to the toolkit
    ("all", {"privileged": False}, Severity.ERROR),  # the runtime refuses the capability to an unprivileged one
    ("all", {"capabilities": {"add": ["SYS_PTRACE"]}}, Severity.ERROR),
    ("0", _PRIVILEGED, Severity.ERROR),
    (None, _PRIVILEGED, Severity.ERROR),
])
def test_a_privileged_mig_monitor_is_gpu_infrastructure_in_a_lint_run(
    mig_monitor: str | None, security: dict[str, Any], severity: Severity
) -> None:
    from policies.env_sources import EnvSources

    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    if mig_monitor is not None:
        env.append({"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": mig_monitor})
    obj = _monitor(env, "kepler", securityContext=security)
    found = [f for f in evaluate(obj, env_sources=EnvSources()).findings if f.rule == "gpu-device-access-bypass"]
    assert found and max(f.severity for f in found) is severity, found
    at_admission = [f for f in evaluate(obj).findings if f.rule == "gpu-device-access-bypass"]
    assert max(f.severity for f in at_admission) is Severity.ERROR  # a tenant could ask for it too


def _intel_exporter(resource: str, namespace: str | None = None) -> dict[str, Any]:
    """boxp/lolice's intel-gpu-exporter DaemonSet (tests/corpus/holdout15), with ``resource`` requested."""
    meta: dict[str, Any] = {"name": "intel-gpu-exporter", **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": meta, "spec": {
        "selector": {"matchLabels": {"app": "e"}}, "template": {"metadata": {"labels": {"app": "e"}}, "spec": {
            "hostPID": True,
            "containers": [{"name": "exporter", "image": "ghcr.io/onedr0p/intel-gpu-exporter:rolling",
                            "resources": {"limits": {resource: "1"}}, "securityContext": {"privileged": True},
                            "volumeMounts": [{"name": "devfs", "mountPath": "/dev/dri"}]}],
            "volumes": [{"name": "devfs", "hostPath": {"path": "/dev/dri"}}]}}}}


@pytest.mark.parametrize(("resource", "severity"), [
    ("gpu.intel.com/monitoring", Severity.INFO),  # the plugin's default, single monitoring resource
    ("gpu.intel.com/i915_monitoring", Severity.INFO),  # -monitoring-mode=split
    ("gpu.intel.com/xe_monitoring", Severity.INFO),
    ("gpu.intel.com/i915", Severity.ERROR),  # a GPU, not the monitoring resource: privileged sees the others
])
def test_an_intel_gpu_monitoring_agent_is_gpu_infrastructure_in_a_lint_run(resource: str, severity: Severity) -> None:
    from policies.env_sources import EnvSources

    found = [f for f in evaluate(_intel_exporter(resource), env_sources=EnvSources()).findings
             if f.rule == "gpu-device-access-bypass"]
    assert sorted(f.path for f in found) == ["/spec/template/spec/containers/0/securityContext/privileged",
                                             "/spec/template/spec/volumes/0/hostPath/path"]
    assert {f.severity for f in found} == {severity}, found
    if severity is Severity.INFO:
        assert f"requests {resource}, which Intel's GPU plugin answers with every Intel GPU" in found[0].message
    at_admission = evaluate(_intel_exporter(resource, namespace="tenant")).findings
    assert max(f.severity for f in at_admission if f.rule == "gpu-device-access-bypass") is Severity.ERROR


def test_intel_monitoring_resources_are_no_gpu_counts() -> None:
    from policies.resources import is_gpu_share_resource

    assert all(is_gpu_share_resource(n) for n in ("gpu.intel.com/monitoring", "gpu.intel.com/xe_monitoring"))
    assert not is_gpu_share_resource("gpu.intel.com/i915")


def test_env_entries_of_any_shape_never_fail_the_infrastructure_checks() -> None:
    from policies.env_sources import EnvSources

    env: list[Any] = [{"name": ["NVIDIA_VISIBLE_DEVICES"], "value": "all"}, {"name": {"a": 1}, "value": "all"},
                      {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                      {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": ["all"]}, "x", None]
    obj = _monitor(env, securityContext={"privileged": True})
    rules = {f.rule for f in evaluate(obj, env_sources=EnvSources()).findings}
    assert "gpu-check-failed" not in rules and "gpu-device-access-bypass" in rules

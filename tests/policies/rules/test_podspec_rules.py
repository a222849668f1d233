"""Unit tests of the pod-spec rules that need no cluster facts, beyond their fixtures."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from policies import evaluate
from policies.config import Config, ConfigError
from policies.facts_build import facts_from_objects
from policies.types import Finding, Severity
from tests.support.paths import CORPUS, load_yaml_docs

NO_FACTS_RULES = (
    "gpu-limit-missing",
    "gpu-request-limit-mismatch",
    "gpu-whole-number",
    "gpu-topology-alignment",
    "gpu-shared-memory",
    "gpu-device-access-bypass",
    "gpu-memory-limit-missing",
    "gpu-dra-claim-reference",
)
FIXABLE = ("gpu-limit-missing", "gpu-request-limit-mismatch", "gpu-shared-memory")


def pod(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"containers": list(containers), **spec},
    }


def container(name: str = "trainer", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "nvcr.io/nvidia/pytorch:24.05-py3", **fields}


def limits(amounts: dict[str, Any]) -> dict[str, Any]:
    return {"limits": amounts}


def findings(obj: dict[str, Any], rule: str, config: Config | None = None) -> list[Finding]:
    return [f for f in evaluate(obj, config).findings if f.rule == rule]


def test_mismatch_message_names_container_values_and_fix() -> None:
    obj = pod(container(resources={"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}))
    [f] = findings(obj, "gpu-request-limit-mismatch")
    assert f.message == (
        "container 'trainer': requests.nvidia.com/gpu is 1 but the limit is 2; extended resources cannot be "
        "overcommitted: set both to the number of GPUs the container needs (the fix takes the smaller, 1)"
    )
    assert f.path == "/spec/containers/0/resources/requests/nvidia.com~1gpu"
    # The fix never raises a GPU count: the larger number comes down to the smaller.
    assert [op.to_dict() for op in f.fix] == [
        {"op": "replace", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu", "value": 1}
    ]


def test_mismatch_fix_lowers_a_request_above_its_limit() -> None:
    obj = pod(container(resources={"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "4"}}))
    [f] = findings(obj, "gpu-request-limit-mismatch")
    assert [op.to_dict() for op in f.fix] == [
        {"op": "replace", "path": "/spec/containers/0/resources/requests/nvidia.com~1gpu", "value": "4"}
    ]


def test_the_webhook_may_not_apply_the_mismatch_fix() -> None:
    with pytest.raises(ConfigError, match=r"mutate\[0\]: rule 'gpu-request-limit-mismatch' has a fix that changes"):
        load_config({"mutate": ["gpu-request-limit-mismatch"]})


@pytest.mark.parametrize(
    ("scalar", "bad"),
    [
        ("1", False),
        ('"1"', False),
        ("1.0", False),
        ("2000m", False),
        ('"1e3"', False),
        ("0", False),
        ("0.5", True),
        ('"500m"', True),
        ("1.5", True),
        ("-1", True),
        ("one", True),
        ("~", True),
    ],
)
def test_whole_number_handles_every_yaml_scalar_type(scalar: str, bad: bool) -> None:
    value = yaml.safe_load(f"v: {scalar}")["v"]
    obj = pod(container(resources={"limits": {"nvidia.com/gpu": value}}))
    got = findings(obj, "gpu-whole-number")
    assert [f.path for f in got] == (["/spec/containers/0/resources/limits/nvidia.com~1gpu"] if bad else [])


def test_whole_number_gpu_advice_only_for_gpus() -> None:
    obj = pod(container(resources={"limits": {"nvidia.com/gpu": 0.5, "example.com/fpga": "1.5"}}))
    by_path = {f.path.rsplit("/", 1)[-1]: f.message for f in findings(obj, "gpu-whole-number")}
    assert "MIG" in by_path["nvidia.com~1gpu"]
    assert (
        "MIG" not in by_path["example.com~1fpga"] and "whole number of example.com/fpga" in by_path["example.com~1fpga"]
    )


def _wide_pod(cpu: str = "32") -> dict[str, Any]:
    return pod(container(resources=limits({"cpu": cpu, "memory": "512Gi", "nvidia.com/gpu": 8})))


def _topology_config(**options: Any) -> Config:
    return load_config({"rules": {"gpu-topology-alignment": {"options": options}}})


def test_topology_default_options_report_nothing() -> None:
    """The kubelet's CPU and Topology Manager policies default to none: nothing is aligned."""
    assert findings(_wide_pod(), "gpu-topology-alignment") == []
    assert findings(_wide_pod("31500m"), "gpu-topology-alignment") == []


@pytest.mark.parametrize("options", [{"cpuManagerPolicy": "static"}, {"topologyManagerPolicy": "restricted"}])
def test_topology_declared_policies_warn_about_qos(options: dict[str, str]) -> None:
    config = _topology_config(**options)
    assert findings(_wide_pod(), "gpu-topology-alignment", config) == []
    [f] = findings(_wide_pod("31500m"), "gpu-topology-alignment", config)
    assert f.severity is Severity.WARNING
    assert f.path == "/spec/containers/0/resources/limits/cpu"
    assert "31500m" in f.message and "trainer" in f.message


def test_topology_single_numa_node_without_share_stays_a_qos_check() -> None:
    config = _topology_config(topologyManagerPolicy="single-numa-node")
    assert findings(_wide_pod(), "gpu-topology-alignment", config) == []


def test_topology_error_when_gpus_exceed_a_numa_node() -> None:
    config = _topology_config(topologyManagerPolicy="single-numa-node", gpusPerNumaNode=4)
    [f] = findings(_wide_pod(), "gpu-topology-alignment", config)
    assert f.severity is Severity.ERROR
    assert "TopologyAffinityError" in f.message and "4" in f.message


def test_topology_mig_instances_are_not_whole_gpus() -> None:
    config = _topology_config(topologyManagerPolicy="single-numa-node", gpusPerNumaNode=4)
    mig = pod(container(resources=limits({"cpu": "8", "memory": "64Gi", "nvidia.com/mig-1g.10gb": 7})))
    assert findings(mig, "gpu-topology-alignment", config) == []


def test_topology_configured_severity_overrides_the_rules_grading() -> None:
    config = load_config(
        {
            "rules": {
                "gpu-topology-alignment": {
                    "severity": "info",
                    "options": {"topologyManagerPolicy": "single-numa-node", "gpusPerNumaNode": 4},
                }
            }
        }
    )
    [f] = findings(_wide_pod(), "gpu-topology-alignment", config)
    assert f.severity is Severity.INFO


def test_topology_policy_none_reports_nothing() -> None:
    burstable = pod(container(resources=limits({"nvidia.com/gpu": 4})))
    assert findings(burstable, "gpu-topology-alignment", _topology_config(cpuManagerPolicy="static"))
    none = _topology_config(cpuManagerPolicy="static", topologyManagerPolicy="none")
    assert findings(burstable, "gpu-topology-alignment", none) == []


@pytest.mark.parametrize(
    "options",
    [{"topologyManagerPolicy": "static"}, {"gpusPerNumaNode": "4"}, {"gpusPerNumaNode": True},
     {"cpuManagerPolicy": "single-numa-node"}],
)
def test_topology_options_are_validated(options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"gpu-topology-alignment\.options"):
        _topology_config(**options)


def test_topology_zero_cpu_limit_is_not_guaranteed() -> None:
    obj = pod(container(resources=limits({"cpu": "0", "memory": "8Gi", "nvidia.com/gpu": 2})))
    [f] = findings(obj, "gpu-topology-alignment", _topology_config(cpuManagerPolicy="static"))
    assert "zero cpu limit" in f.message


def test_topology_counts_devices_not_hami_shares() -> None:
    vgpu = pod(container(resources=limits({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30})))
    assert findings(vgpu, "gpu-topology-alignment") == []
    assert findings(vgpu, "gpu-shared-memory") == []


def _apply(obj: dict[str, Any], f: Finding) -> dict[str, Any]:
    result: dict[str, Any] = jsonpatch.apply_patch(obj, f.fix_dicts() or [])
    return result


def test_shared_memory_each_finding_fix_applies_on_its_own_and_combined() -> None:
    obj = pod(
        container("a", resources=limits({"nvidia.com/gpu": 4})),
        container("b", resources=limits({"nvidia.com/gpu": 4}), volumeMounts=[{"name": "data", "mountPath": "/data"}]),
        volumes=[{"name": "dshm", "configMap": {"name": "x"}}, {"name": "dshm-1", "emptyDir": {}}],
    )
    got = findings(obj, "gpu-shared-memory")
    assert len(got) == 2
    for f in got:
        patched = _apply(obj, f)
        assert {"name": "dshm-2", "emptyDir": {"medium": "Memory"}} in patched["spec"]["volumes"]
    ev = evaluate(obj)
    fixed = jsonpatch.apply_patch(obj, [op.to_dict() for op in ev.patch(["gpu-shared-memory"])])
    assert [v["name"] for v in fixed["spec"]["volumes"]] == ["dshm", "dshm-1", "dshm-2"]
    for c in fixed["spec"]["containers"]:
        assert {"name": "dshm-2", "mountPath": "/dev/shm"} in c["volumeMounts"]
    assert findings(fixed, "gpu-shared-memory") == []


def test_shared_memory_mount_of_missing_volume_is_reported_without_fix() -> None:
    obj = pod(
        container(resources=limits({"nvidia.com/gpu": 2}), volumeMounts=[{"name": "shm", "mountPath": "/dev/shm"}])
    )
    [f] = findings(obj, "gpu-shared-memory")
    assert f.path == "/spec/containers/0/volumeMounts/0" and not f.fix


def test_limit_and_mismatch_fixes_apply_one_finding_at_a_time() -> None:
    obj = pod(
        container(resources={"requests": {"nvidia.com/gpu": 2, "example.com/fpga": 1}}),
        container("b", resources={"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 3}}),
    )
    got = [f for rule in ("gpu-limit-missing", "gpu-request-limit-mismatch") for f in findings(obj, rule)]
    assert len(got) == 3
    for f in got:
        assert _apply(obj, f) != obj
    ev = evaluate(obj)
    fixed = jsonpatch.apply_patch(obj, [op.to_dict() for op in ev.patch(FIXABLE)])
    assert fixed["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 2, "example.com/fpga": 1}
    assert fixed["spec"]["containers"][1]["resources"] == {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 1}}


@pytest.mark.parametrize(
    ("host_path", "flagged"),
    [
        ("/dev/nvidia0", True),
        ("/dev/nvidiactl", True),
        ("/dev/nvidia-caps/nvidia-cap1", True),
        ("//dev/nvidia-uvm", True),
        ("/dev/./nvidia1", True),
        ("/dev/dri", True),
        ("/dev/dri/renderD128", True),
        ("/dev/driver", False),
        ("/dev/shm", False),
        ("/usr/local/nvidia", False),
    ],
)
def test_device_hostpaths(host_path: str, flagged: bool) -> None:
    obj = pod(
        container(resources=limits({"nvidia.com/gpu": 1})),
        volumes=[{"name": "dev", "hostPath": {"path": host_path}}],
    )
    paths = [f.path for f in findings(obj, "gpu-device-access-bypass")]
    assert paths == (["/spec/volumes/0/hostPath/path"] if flagged else [])


def test_device_env_overrides_the_allocation_of_a_gpu_container_too() -> None:
    """The container's own NVIDIA_VISIBLE_DEVICES comes after the device plugin's and wins."""
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    obj = pod(container(resources=limits({"nvidia.com/gpu": 1}), env=env), container("sidecar", env=copy.deepcopy(env)))
    gpu, sidecar = findings(obj, "gpu-device-access-bypass")
    assert gpu.path == "/spec/containers/0/env/0" and "wins" in gpu.message and gpu.severity is Severity.ERROR
    assert sidecar.path == "/spec/containers/1/env/0" and "requests no GPU" in sidecar.message


def test_void_on_a_gpu_container_hides_its_gpus() -> None:
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    [f] = findings(pod(container(resources=limits({"nvidia.com/gpu": 1}), env=env)), "gpu-device-access-bypass")
    assert f.severity is Severity.WARNING and "hides them" in f.message


def test_the_last_entry_of_a_variable_is_the_one_judged() -> None:
    """The kubelet keeps the last entry of a name (kubelet_pods.go makeEnvironmentVariables)."""
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}, {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert findings(pod(container("tool", image="busybox", env=env)), "gpu-device-access-bypass") == []
    env.reverse()
    [f] = findings(pod(container("tool", image="busybox", env=env)), "gpu-device-access-bypass")
    assert f.path == "/spec/containers/0/env/1"


def test_dra_requests_of_one_claim_are_distinct_but_repeats_are_not() -> None:
    claims = [{"name": "gpus", "request": "a"}, {"name": "gpus", "request": "b"}, {"name": "gpus", "request": "a"}]
    obj = pod(
        container(resources={"claims": claims}),
        resourceClaims=[{"name": "gpus", "resourceClaimTemplateName": "two"}],
    )
    [f] = findings(obj, "gpu-dra-claim-reference")
    assert f.path == "/spec/containers/0/resources/claims/2"
    assert "'a'" in f.message


def test_dra_lists_the_declared_claims() -> None:
    obj = pod(
        container(resources={"claims": [{"name": "gpu0"}]}),
        resourceClaims=[{"name": "gpu", "resourceClaimName": "a"}, {"name": "nic", "resourceClaimName": "b"}],
    )
    [f] = findings(obj, "gpu-dra-claim-reference")
    assert "declared: gpu, nic" in f.message


def test_memory_limit_counts_only_gpu_containers() -> None:
    obj = pod(container(resources=limits({"nvidia.com/gpu": 1})), container("cpu-only", resources=limits({"cpu": "1"})))
    assert [f.path for f in findings(obj, "gpu-memory-limit-missing")] == ["/spec/containers/0/resources/limits"]


def _corpus_docs() -> list[Any]:
    docs: list[Any] = []
    for path in sorted((CORPUS / "real").iterdir()):
        try:
            docs.extend((path, d) for d in load_yaml_docs(path) if isinstance(d, dict))
        except yaml.YAMLError:
            continue
    return docs


def test_corpus_findings_are_well_formed_and_fixes_are_idempotent() -> None:
    docs = _corpus_docs()
    assert docs
    seen: set[str] = set()
    for path, doc in docs:
        ev = evaluate(doc)
        for f in ev.findings:
            if f.rule in NO_FACTS_RULES:
                seen.add(f.rule)
                assert f.message and f.remediation, (path, f)
                assert f.path.startswith("/"), (path, f)
        ops = [op.to_dict() for op in ev.patch(FIXABLE)]
        if not ops:
            continue
        fixed = jsonpatch.apply_patch(doc, ops)
        assert evaluate(fixed).patch(FIXABLE) == [], Path(path).name
    # The corpus has multi-GPU pods without /dev/shm and GPU containers without memory limits.
    assert {"gpu-shared-memory", "gpu-memory-limit-missing"} <= seen


@pytest.mark.parametrize(
    "name",
    [
        # The GPU Operator's device plugin sets NVIDIA_VISIBLE_DEVICES=all without a GPU request.
        "NVIDIA__gpu-operator__assets__state-device-plugin__0500_daemonset.yaml",
        # The standalone static manifest sets no variable, but its image sets NVIDIA_VISIBLE_DEVICES=all.
        "NVIDIA__k8s-device-plugin__deployments__static__nvidia-device-plugin.yml",
    ],
)
@pytest.mark.parametrize(("namespace", "trusted"), [(None, True), ("gpu-operator", True), ("cluster-addons", False)])
def test_real_device_plugin_daemonsets_are_info_only_where_infrastructure_is_trusted(
    name: str, namespace: str | None, trusted: bool
) -> None:
    """A device plugin is reported as info in an infrastructure namespace (or a manifest without
    one); elsewhere its mount of the kubelet's directory is no exemption a tenant could claim."""
    for doc in load_yaml_docs(CORPUS / "real" / name):
        meta = doc.setdefault("metadata", {})
        if namespace is None:
            meta.pop("namespace", None)
        else:
            meta["namespace"] = namespace
        ev = evaluate(doc)
        assert ev.gpu_related and ev.findings
        bypass = [f for f in ev.findings if f.rule == "gpu-device-access-bypass"]
        assert bypass
        if trusted:
            assert all(f.severity is Severity.INFO for f in ev.findings), ev.findings
        else:
            assert any(f.severity is not Severity.INFO for f in bypass), bypass


@pytest.mark.parametrize(
    ("host_path", "severity", "says"),
    [
        ("/dev/shm", Severity.INFO, "mounts the node's own /dev/shm (hostPath volume 'shm'): memory-backed"),
        ("//dev/./shm/nccl", Severity.INFO, "memory-backed, so NCCL and DataLoader workers have room, but shared"),
        ("/mnt/scratch", Severity.WARNING, "at /dev/shm, which is not a memory-backed emptyDir"),
    ],
)
def test_a_host_path_at_dev_shm_is_judged_by_what_it_mounts(host_path: str, severity: Severity, says: str) -> None:
    """The node's /dev/shm is a tmpfs (systemd mount-setup.c): memory-backed, shared with the node."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "t", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                        "resources": {"limits": {"nvidia.com/gpu": 4}},
                        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}]}],
        "volumes": [{"name": "shm", "hostPath": {"path": host_path}}]}}
    (finding,) = [f for f in evaluate(pod).findings if f.rule == "gpu-shared-memory"]
    assert finding.severity is severity and says in finding.message
    assert finding.fix == ()
    if severity is Severity.INFO:
        assert "not a memory-backed" not in finding.message


@pytest.mark.parametrize(
    ("volumes", "mounts", "severity", "says"),
    [
        ([], [], Severity.INFO, "hostIPC: true, so the runtime gives it the node's own /dev/shm: memory-backed"),
        # A volume mounted at /dev/shm takes the place of the node's (containerd: isInCRIMounts).
        ([{"name": "shm", "emptyDir": {}}], [{"name": "shm", "mountPath": "/dev/shm"}], Severity.WARNING,
         "but it is disk-backed"),
        ([{"name": "shm", "emptyDir": {"medium": "Memory"}}], [{"name": "shm", "mountPath": "/dev/shm"}], None, ""),
    ],
)
def test_a_host_ipc_pod_gets_the_nodes_dev_shm(
    volumes: list[dict[str, Any]], mounts: list[dict[str, Any]], severity: Severity | None, says: str
) -> None:
    obj = pod(container(image="nvcr.io/nvidia/pytorch:24.05-py3", resources=limits({"nvidia.com/gpu": 8}),
                        volumeMounts=mounts), volumes=volumes, hostIPC=True)
    found = findings(obj, "gpu-shared-memory")
    assert [f.severity for f in found] == ([severity] if severity is not None else [])
    if found:
        assert says in found[0].message
        assert (found[0].fix == ()) == (severity is Severity.INFO)
    obj["spec"]["hostIPC"] = False
    assert [f.severity for f in findings(obj, "gpu-shared-memory")] == ([Severity.WARNING] if severity is not None else [])


@pytest.mark.parametrize(
    ("image", "command", "severity"),
    [
        ("busybox:1.36", ["sh", "-c", "sleep 3600"], Severity.INFO),  # KAI-Scheduler's demos
        ("ubuntu", ["bash", "-c", "echo started; sleep 600"], Severity.INFO),
        ("docker.io/library/python:3.11", ["python", "serve.py"], Severity.INFO),
        ("perl", ["/bin/sh"], Severity.INFO),  # a DWS ProvisioningRequest demo (GoogleCloudPlatform/accelerated-platforms)
        # A framework installed or launched at run time needs the shared memory after all.
        ("python:3.11", ["sh", "-c", "pip install torch && torchrun --nproc-per-node 4 train.py"], Severity.WARNING),
        ("ubuntu:22.04", ["mpirun", "-np", "4", "./app"], Severity.WARNING),
        # NVIDIA's CUDA samples: a CUDA base image and the sample binary, no NCCL (NVIDIA/k8s-samples).
        ("ghcr.io/nvidia/k8s-samples:nvbandwidth-v0.7-8d103163", ["/usr/sbin/sshd", "-De"], Severity.INFO),
        ("nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda12.5.0-ubuntu22.04", ["nbody", "-benchmark"], Severity.INFO),
        ("ghcr.io/nvidia/k8s-samples:nvbandwidth-v0.7-8d103163", ["mpirun", "nvbandwidth"], Severity.WARNING),
        # Kubernetes' pause image: one static binary that waits for signals (a Kata genpolicy test pod).
        ("registry.k8s.io/pause:3.6@sha256:3d380ca8864549e74af4b29c10f9cb0956236dfb01c40ca076fb6c37253234db", [],
         Severity.INFO),
        ("k8s.gcr.io/pause:3.2", [], Severity.INFO),
        ("registry.example.com/pause:3.9", [], Severity.WARNING),  # a private image of that name may be anything
        # Ollama's release images up to 0.13.5 hold no NCCL; 0.14.0 brought it in with the MLX backend.
        ("ollama/ollama:0.11.7", [], Severity.INFO),
        ("docker.io/ollama/ollama:0.13.5", ["ollama", "serve"], Severity.INFO),
        ("ollama/ollama:0.14.0", [], Severity.WARNING),
        ("ollama/ollama:latest", [], Severity.WARNING),  # whatever latest is when the pod starts
        ("ollama/ollama", [], Severity.WARNING),
        ("ollama/ollama:0.12.3-rocm", [], Severity.WARNING),  # not a release tag the row covers
        ("ollama/ollama:v0.9.0", [], Severity.INFO),
        # Not a plain base image: NGC PyTorch has NCCL; a private copy of ubuntu is not Docker's.
        ("nvcr.io/nvidia/pytorch:24.05-py3", ["sleep", "3600"], Severity.WARNING),
        ("registry.example.com/library/ubuntu:22.04", ["sleep", "3600"], Severity.WARNING),
    ],
)
def test_shared_memory_on_a_plain_base_image_that_installs_nothing_is_info(
    image: str, command: list[str], severity: Severity
) -> None:
    obj = pod(container(image=image, command=command, resources=limits({"nvidia.com/gpu": 4})))
    [f] = findings(obj, "gpu-shared-memory")
    assert f.severity == severity
    if severity == Severity.INFO:
        assert not f.fix and ("plain OS/language base image" in f.message or "without NCCL or PyTorch" in f.message)
    else:
        assert f.fix and "64 MiB /dev/shm" in f.message


def test_shared_memory_idle_plain_image_keeps_findings_on_a_misconfigured_mount() -> None:
    obj = pod(
        container(image="ubuntu", command=["sleep", "60"], resources=limits({"nvidia.com/gpu": 2}),
                  volumeMounts=[{"name": "shm", "mountPath": "/dev/shm"}]),
        volumes=[{"name": "shm", "emptyDir": {}}],
    )
    [f] = findings(obj, "gpu-shared-memory")
    assert f.severity == Severity.WARNING and "disk-backed" in f.message


def _privileged_pod(gpus: int) -> dict[str, Any]:
    return pod(container(resources=limits({"nvidia.com/gpu": gpus}), securityContext={"privileged": True}))


@pytest.mark.parametrize(
    ("gpus", "node_gpus", "severity"),
    [
        (8, [8, 8], Severity.INFO),  # holds every GPU of each node it can land on
        (8, [8, 16], Severity.ERROR),  # on the 16-GPU node it sees 8 it was not allocated
        (4, [8], Severity.ERROR),
        (8, None, Severity.INFO),  # no facts: a whole 8-GPU server, said as info
        (4, None, Severity.ERROR),
    ],
)
def test_privileged_gpu_pod_is_a_bypass_unless_it_holds_every_gpu_of_its_nodes(
    gpus: int, node_gpus: list[int] | None, severity: Severity
) -> None:
    from tests.support.cluster_objects import node

    facts = None
    if node_gpus is not None:
        facts = facts_from_objects(
            [node(f"n{i}", capacity=n, allocatable=n) for i, n in enumerate(node_gpus)]
        )
    found = [f for f in evaluate(_privileged_pod(gpus), None, facts).findings if f.rule == "gpu-device-access-bypass"]
    assert [f.severity for f in found] == [severity], [f.message for f in found]
    assert found[0].path == "/spec/containers/0/securityContext/privileged"
    if severity == Severity.INFO:
        expected = "all of an 8-GPU server" if node_gpus is None else "requests all of them on every GPU node"
        assert expected in found[0].message


@pytest.mark.parametrize("count", ["<number_of_gpus>", "${GPUS}", "GPU_COUNT_PLACEHOLDER"])
@pytest.mark.parametrize("node_gpus", [None, [8]])
def test_privileged_pod_with_a_placeholder_gpu_count_is_info(count: str, node_gpus: list[int] | None) -> None:
    """A whole-node tool (GKE's COS nvidia-bug-report pod) is written with its GPU count to be filled
    in: how much it sees beyond its allocation is unknown until then, and the placeholder is the
    input error; the same pod with a count below its node's is an error."""
    from tests.support.cluster_objects import node

    facts = None if node_gpus is None else facts_from_objects([node("n0", capacity=8, allocatable=8)])
    obj = pod(container(resources={"limits": {"nvidia.com/gpu": count}, "requests": {"nvidia.com/gpu": count}},
                        securityContext={"privileged": True}))
    ev = evaluate(obj, None, facts)
    (found,) = [f for f in ev.findings if f.rule == "gpu-device-access-bypass"]
    assert found.severity is Severity.INFO and "still a placeholder" in found.message
    assert ev.placeholders, "the placeholder itself is an input error"
    filled = pod(container(resources=limits({"nvidia.com/gpu": 2}), securityContext={"privileged": True}))
    assert [f.severity for f in evaluate(filled, None, facts).findings if f.rule == "gpu-device-access-bypass"] == [
        Severity.ERROR]


def test_privileged_pod_holding_every_gpu_of_another_vendor_is_judged_on_nodes_that_offer_it() -> None:
    """An 8 x amd.com/gpu privileged RCCL worker (Azure/aks-rdma-infiniband) on a cluster of NVIDIA
    nodes: those nodes can never run it, so they do not make it see GPUs it was not allocated (info,
    as without facts); gpu-resource-unknown says it fits nowhere here."""
    from policies.facts_build import facts_from_objects
    from tests.support.cluster_objects import node

    facts = facts_from_objects([node("n0", capacity=8, allocatable=8)])
    obj = pod(container(resources=limits({"amd.com/gpu": 8}), securityContext={"privileged": True}))
    ev = evaluate(obj, None, facts)
    assert [f.severity for f in ev.findings if f.rule == "gpu-device-access-bypass"] == [Severity.INFO]
    assert [f.rule for f in ev.findings if f.severity is Severity.ERROR] == ["gpu-resource-unknown"]


def test_shared_memory_of_a_container_without_an_image_is_info() -> None:
    """A kustomize component that only sets GPUs (kubernetes-sigs/wg-serving's 8-H100 component, a
    Deployment named '*'): the base it patches names the image and may mount /dev/shm."""
    patch: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "*"}, "spec": {"template": {"spec": {
        "containers": [{"name": "inference-server", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}}
    [f] = findings(patch, "gpu-shared-memory")
    assert f.severity == Severity.INFO and "names no image" in f.message and not f.fix
    patch["spec"]["template"]["spec"]["containers"][0]["image"] = "vllm/vllm-openai:v0.11.0"
    [f] = findings(patch, "gpu-shared-memory")
    assert f.severity == Severity.WARNING and f.fix


@pytest.mark.parametrize(("command", "args", "severity"), [
    # dell/omnia's KServe predictor: vLLM's API server on 4 GPUs with no parallel size (vLLM's default is 1).
    (["python3", "-m", "vllm.entrypoints.api_server"], ["--port", "8080", "--model", "m"], Severity.INFO),
    (["vllm", "serve", "m"], [], Severity.INFO),
    (["/usr/local/bin/vllm", "serve"], ["m", "--max-model-len", "4096"], Severity.INFO),
    (["vllm", "serve", "m"], ["--tensor-parallel-size", "4"], Severity.WARNING),
    (["vllm", "serve", "m"], ["-tp=4"], Severity.WARNING),
    (["sh", "-c", "vllm serve m --pipeline-parallel-size 2"], [], Severity.WARNING),
    (["sh", "-c", "vllm serve m $EXTRA_ARGS"], [], Severity.WARNING),  # a variable may add one
    (["vllm", "serve", "m"], ["--config", "/etc/vllm.yaml"], Severity.WARNING),  # the file may set one
    (["python", "train.py"], [], Severity.WARNING),
])
def test_shared_memory_on_a_vllm_server_that_uses_one_gpu_is_info(
    command: list[str], args: list[str], severity: Severity
) -> None:
    obj = pod(container(image="registry.example.com/vllm-rocm:latest", command=command, args=args,
                        resources=limits({"nvidia.com/gpu": 4})))
    [f] = findings(obj, "gpu-shared-memory")
    assert f.severity is severity, f.message
    if severity is Severity.INFO:
        assert "--tensor-parallel-size 4" in f.message and f.fix == ()


@pytest.mark.parametrize(("launch", "severity"), [
    ("mpirun -N 1 /opt/nccl-tests/build/all_reduce_perf -g 1", Severity.INFO),
    ("mpirun --map-by ppr:8:node all_reduce_perf -g 1", Severity.WARNING),
    ("mpirun -N 1 all_reduce_perf -g 8", Severity.WARNING),
    ("mpirun -np 16 python train.py", Severity.WARNING),
])
def test_shared_memory_of_an_mpi_worker_running_one_single_gpu_rank_is_info(launch: str, severity: Severity) -> None:
    gpu = container(image="efa-nccl-tests:latest", resources=limits({"nvidia.com/gpu": 8}))
    launcher = {"replicas": 1, "template": {"spec": {"containers": [
        {"name": "l", "image": "efa-nccl-tests:latest", "command": ["/bin/sh", "-c", launch]}]}}}
    obj = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "j", "namespace": "ml"},
           "spec": {"slotsPerWorker": 8, "mpiReplicaSpecs": {
               "Launcher": launcher, "Worker": {"replicas": 2, "template": {"spec": {"containers": [gpu]}}}}}}
    [f] = findings(obj, "gpu-shared-memory")
    assert f.severity is severity, f.message
    if severity is Severity.INFO:
        assert f.path == "/spec/mpiReplicaSpecs/Worker/template/spec/containers/0"
        assert "one rank per worker on one GPU (mpirun -N 1; all_reduce_perf -t 1 (default) -g 1)" in f.message
        assert "7 of its GPUs idle" in f.message and f.fix == ()

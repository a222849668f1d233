"""What shows that a container runs work that needs more than 64 MiB of /dev/shm (policies.shm_users)."""

from __future__ import annotations

from typing import Any

import pytest

from policies import evaluate
from policies.kserve import NO_VIEW, kserve_objects
from policies.shm_users import shared_memory_user, shm_user_variable
from policies.types import Severity


@pytest.mark.parametrize(("kind", "container", "says"), [
    ("PyTorchJob", {"image": "registry.example.com/team/app:1"}, "its workload is a training job (PyTorchJob)"),
    ("Deployment", {"image": "nvcr.io/nvidia/pytorch:24.05-py3"}, "its image names pytorch"),
    ("Deployment", {"image": "nvcr.io/nvidia/tritonserver:24.06-trtllm-python-py3"}, "its image names tritonserver"),
    ("Deployment", {"image": "ghcr.io/huggingface/text-generation-inference:3.0"},
     "its image names text-generation-inference"),
    ("Deployment", {"image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3"}, "its image names nim"),
    ("Pod", {"image": "riyazhu/mnist:20220420", "name": "pytorch"}, "it is named pytorch"),
    ("Pod", {"image": "example/app", "args": ["--model", "m", "--tensor-parallel-size=4"]},
     "its arguments set --tensor-parallel-size"),
    ("Pod", {"image": "example/app", "command": ["sh", "-c", "python launch.py --world_size 4"]},
     "its arguments set --world_size"),
    ("Pod", {"image": "example/app", "command": ["sh", "-c", "python -m torch.distributed.run x.py"]},
     "its command names torch"),
    ("Pod", {"image": "example/app", "command": ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8"]},
     "its command names perf"),
    ("Pod", {"image": "example/app", "env": [{"name": "NCCL_SOCKET_IFNAME", "value": "eth0"}]},
     "its env sets NCCL_SOCKET_IFNAME"),
    ("Pod", {"image": "example/app", "env": [{"name": "MASTER_ADDR", "value": "m-0"}]}, "its env sets MASTER_ADDR"),
])
def test_what_the_manifest_shows(kind: str, container: dict[str, Any], says: str) -> None:
    assert shared_memory_user(kind, container) == says


@pytest.mark.parametrize("container", [
    {"image": "registry.example.com/team/my-llama:32", "name": "api"},
    {"image": "us-docker.pkg.dev/p/genai/ollama-gemma-3-12b:0.1.0", "name": "ollama"},
    {"image": "quay.io/x/cuda-sample:vectoradd-cuda12.5.0-ubi", "command": ["sh", "-c", "env && /cuda-samples/vectorAdd"]},
    {"image": "example/app", "name": "array-constrained", "env": [{"name": "RANKING", "value": "torch"}]},
    {"image": "example/app", "args": ["-tpx", "--tpx", "-n", "4"]},  # no short flag of a parallel size, no long one
    {"image": 7, "name": None, "command": "torchrun", "args": [None, {"x": 1}], "env": "NCCL_DEBUG"},  # not strings
])
def test_what_shows_nothing(container: dict[str, Any]) -> None:
    assert shared_memory_user("Deployment", container) is None


def test_each_reading_is_bounded() -> None:
    """A word past the bound is not read, however long the command: the work is linear and capped."""
    late = {"image": "example/app", "args": ["x"] * 256 + ["torchrun"]}
    assert shared_memory_user("Pod", late) is None
    huge = {"image": "example/app", "args": ["a" * 65536 + " torchrun"]}
    assert shared_memory_user("Pod", huge) is None
    many = {"image": "example/app", "env": [{"name": f"V{i}", "value": ""} for i in range(256)] + [{"name": "NCCL_X"}]}
    assert shared_memory_user("Pod", many) is None


def test_a_pod_a_training_job_controls_is_judged_as_the_job() -> None:
    """At admission a PyTorchJob's worker is a Pod whose controller reference names the job."""
    assert shared_memory_user("Pod", {"image": "example/app"}, "PyTorchJob") == "its pod belongs to a training job (PyTorchJob)"
    assert shared_memory_user("Pod", {"image": "example/app"}, "ReplicaSet") is None
    pod = _pod({"image": "example/app:1"})
    pod["metadata"]["ownerReferences"] = [
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "j", "uid": "u", "controller": True}]
    [warned] = [f for f in evaluate(pod).findings if f.rule == "gpu-shared-memory"]
    assert warned.severity is Severity.WARNING
    pod["metadata"]["ownerReferences"][0]["controller"] = False  # an owner, but not the controller
    [unknown] = [f for f in evaluate(pod).findings if f.rule == "gpu-shared-memory"]
    assert unknown.severity is Severity.INFO


def test_launcher_variables() -> None:
    assert all(shm_user_variable(n) for n in ("NCCL_DEBUG", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PET_NPROC_PER_NODE"))
    assert not any(shm_user_variable(n) for n in ("RANK", "NCCLX", "HF_TOKEN", "CUDA_VISIBLE_DEVICES"))


def _pod(container: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": [{"name": "c", **container, "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}


def test_the_rule_warns_only_on_evidence() -> None:
    [unknown] = [f for f in evaluate(_pod({"image": "example/app:1"})).findings if f.rule == "gpu-shared-memory"]
    assert unknown.severity is Severity.INFO and not unknown.fix and "nothing in the pod shows" in unknown.message
    shown = _pod({"image": "example/app:1", "env": [{"name": "WORLD_SIZE", "value": "2"}]})
    [warned] = [f for f in evaluate(shown).findings if f.rule == "gpu-shared-memory"]
    assert warned.severity is Severity.WARNING and warned.fix and "and its env sets WORLD_SIZE:" in warned.message
    assert shared_memory_user(["not", "a", "kind"], {"image": "x"}, {"nor": "this"}) is None


def test_a_kserve_runtime_gives_the_program() -> None:
    """A predictor's model runs the ServingRuntime's image: Triton, which serves a model over several GPUs."""
    runtime = {"apiVersion": "serving.kserve.io/v1alpha1", "kind": "ServingRuntime",
               "metadata": {"name": "triton", "namespace": "s"},
               "spec": {"supportedModelFormats": [{"name": "tensorrt"}],
                        "containers": [{"name": "kserve-container", "image": "nvcr.io/nvidia/tritonserver:24.08-py3"}]}}
    isvc = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "m", "namespace": "s"},
            "spec": {"predictor": {"model": {"modelFormat": {"name": "tensorrt"}, "runtime": "triton",
                                             "resources": {"limits": {"nvidia.com/gpu": "4"}}}}}}
    [finding] = [f for f in evaluate(isvc, kserve=NO_VIEW.nearer(kserve_objects([runtime]))).findings
                 if f.rule == "gpu-shared-memory"]
    assert finding.severity is Severity.WARNING

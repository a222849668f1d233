"""Image names whose CUDA a sourced convention determines — and the many that it does not."""

from __future__ import annotations

import pytest

from policies.cuda.conventions import offline_cuda


@pytest.mark.parametrize(
    ("image", "cuda"),
    [
        ("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0", (12, 5, 0)),
        ("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04", (12, 5, 0)),
        ("nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda11.7.1-ubuntu18.04", (11, 7, 1)),
        ("nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubi8", (11, 7, 1)),
        ("vllm/vllm-openai:v0.10.0", (12, 8, 1)),
        ("docker.io/vllm/vllm-openai:v0.8.5", (12, 4, 0)),  # the release pipeline overrides the 12.4.1 default
        ("vllm/vllm-openai:v0.7.3", (12, 1, 0)),
        ("vllm/vllm-openai:v0.20.0", (13, 0, 2)),
        ("vllm/vllm-openai:v0.26.0", (13, 0, 2)),  # 0.21 on: pushed by the release step, publish-release-images.sh
        ("tensorflow/tensorflow:2.13.0-gpu-jupyter", (11, 8)),
        ("tensorflow/tensorflow:2.16.1-gpu", (12, 3)),
        ("tensorflow/tensorflow:1.15.0-gpu", (10, 0)),
        ("rayproject/ray-llm:2.52.0-py311-cu128", (12, 8)),
        ("rayproject/ray:2.9.0-py310-cu118", (11, 8)),
        ("rayproject/ray:2.40.0-extra-py311-cu121-aarch64", (12, 1)),
        ("registry.baidubce.com/paddlepaddle/paddle:2.4.0rc0-gpu-cuda11.2-cudnn8.1-trt8.0", (11, 2)),
        ("ccr-2vdh3abv-pub.cnc.bj.baidubce.com/paddlepaddle/paddle:latest-dev-cuda12.3-cudnn9.0-trt8.6-gcc12.2", (12, 3)),
        ("paddlepaddle/paddle:cuda129-dev", (12, 9)),
        ("us-docker.pkg.dev/deeplearning-platform-release/gcr.io/huggingface-text-generation-inference-cu121.2-1.ubuntu2204.py310",
         (12, 1)),
        ("us-docker.pkg.dev/deeplearning-platform-release/gcr.io/huggingface-pytorch-training-cu121.2-3.transformers.4-42.ubuntu2204.py310",
         (12, 1)),
        ("nvcr.io/nvidia/pytorch:24.05-py3", (12, 4, 1)),
        ("nvcr.io/nvidia/pytorch:25.03-py3", (12, 8, 1)),
        ("nvcr.io/nvidia/pytorch:25.12-py3", (13, 1, 0)),  # its own release notes, not an inference
        ("nvcr.io/nvidia/pytorch:26.02-py3", (13, 1, 1)),  # Triton 26.02's notes, a same-month inference
        ("nvcr.io/nvidia/pytorch:26.03-py3", (13, 2, 0)),  # CUDA DL and vLLM 26.03's notes
        ("nvcr.io/nvidia/tritonserver:26.06-py3", (13, 3, 0)),
        ("nvcr.io/nvidia/vllm:26.03-py3", (13, 2, 0)),  # the NGC vLLM container's own notes
        ("nvcr.io/nvidia/vllm:25.10-py3", (13, 0, 2)),
        # variants: their own month of Triton's compatibility matrix, not the main image's CUDA
        ("nvcr.io/nvidia/tritonserver:24.06-trtllm-python-py3", (12, 4, 0)),  # 24.06-py3 is 12.5.0
        ("nvcr.io/nvidia/tritonserver:25.10-trtllm-python-py3", (12, 9, 1)),  # 25.10-py3 is 13.0.2
        ("nvcr.io/nvidia/tritonserver:24.05-trtllm-python-py3", (12, 3, 2)),
        ("nvcr.io/nvidia/tritonserver:24.06-vllm-python-py3", (12, 5, 0)),
        ("nvcr.io/nvidia/tritonserver:26.02-vllm-python-py3", (13, 1, 1)),
        ("nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3", (13, 1, 0)),
    ],
)
def test_sourced_conventions_resolve(image: str, cuda: tuple[int, ...]) -> None:
    found = offline_cuda(image)
    assert found.status == "cuda" and found.cuda is not None
    assert found.cuda.version == cuda
    assert found.source


def test_inferences_are_labelled() -> None:
    inferred = offline_cuda("nvcr.io/nvidia/pytorch:24.05-py3")
    assert "same-month NGC release inference" in inferred.source
    own = offline_cuda("nvcr.io/nvidia/pytorch:25.12-py3")
    assert own.source == "NGC pytorch 25.12 release notes"


@pytest.mark.parametrize(
    "image",
    [
        "ubuntu",
        "ubuntu:18.04",
        "docker.io/library/debian:bookworm-slim",
        "alpine@sha256:" + "0" * 64,
        "busybox:1.36",
        "python:3.12-slim",
    ],
)
def test_plain_official_images_need_no_cuda(image: str) -> None:
    found = offline_cuda(image)
    assert found.status == "no-cuda" and found.cuda is None and "without CUDA" in found.source


@pytest.mark.parametrize(
    "image",
    [
        "vllm/vllm-openai:latest",  # mutable
        "vllm/vllm-openai:v0.5.4",  # its sdist has no Dockerfile: not read
        "vllm/vllm-openai:v99.0.0",
        "vllm/vllm-openai:v0.21.0-cu129",  # a variant of the release: not in the table
        "lmcache/vllm-openai:2025-05-05-v1",  # another repository
        "tensorflow/tensorflow:2.13.1-gpu",  # patch releases are not in the tested-configurations table
        "tensorflow/tensorflow:2.13.0",  # CPU image
        "tensorflow/tensorflow:latest-gpu",
        "rayproject/ray:2.37.0-gpu",  # alias of a per-release default platform: not known for every release
        "rayproject/ray-ml:2.46.0.0e19ea-py39",
        "rayproject/ray-ml:2.46.0.0e19ea-py39-gpu",
        "rayproject/ray-llm:2.46.0-py311",  # ray-llm is published for CUDA only, never -cpu
        "quay.io/rayproject/ray:2.9.0-py310-cu118",  # not the published repository
        "nvcr.io/nvidia/k8s/cuda-sample:vectoradd",
        "ghcr.io/nvidia/k8s-samples:nbody-v0.7-8d103163",  # git SHA tags
        "nvcr.io/nvidia/pytorch:23.02-py3",  # no statement for 23.02
        "nvcr.io/nvidia/pytorch:24.05-py3-igpu",
        "nvcr.io/nvidia/nemo:24.05",  # NeMo 24.05 is built on PyTorch 24.02: never inferred
        "nvcr.io/nvidia/clara/bionemo-framework:1.7",
        "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.1.0",
        "paddlepaddle/paddle:2.6.0",
        "us-docker.pkg.dev/deeplearning-platform-release/gcr.io/base-cu121.py310",
        "ghcr.io/kyverno/test-busybox:1.35",  # not the official image
        "registry.example.com/library/ubuntu:22.04",  # another registry's copy: unknown
        "quay.io/rocm/pytorch:latest",  # not the repository AMD publishes
        "rocm/dev-ubuntu-22.04:latest",  # not listed
        "registry.k8s.io/e2e-test-images/busybox:1.36",  # not listed
        "nvcr.io/nvidia/tritonserver:24.06-py3-sdk",  # no statement gives the SDK image's CUDA
        "nvcr.io/nvidia/tritonserver:24.06-py3-min",
        "nvcr.io/nvidia/tritonserver:24.06-py3-igpu",  # built on JetPack's CUDA, not the month's
        "nvcr.io/nvidia/tritonserver:24.03-trtllm-python-py3",  # the matrix starts at 24.04
        "nvcr.io/nvidia/tritonserver:24.06-pyt-python-py3",  # a variant no source maps
        "nvcr.io/nvidia/nemo:25.04.01",
        "nvcr.io/nvidia/vllm:26.02-py3",  # no 26.02 vLLM notes found: never bracketed by neighbours
        "nvcr.io/nvidia/pytorch:26.08-py3",
        "$IMAGE_URL",
        "",
    ],
)
def test_names_without_a_sourced_convention_are_unknown(image: str) -> None:
    assert offline_cuda(image).status == "unknown"


@pytest.mark.parametrize(
    "image",
    [
        "rocm/pytorch:latest",
        "docker.io/rocm/vllm:rocm6.2_mi300_ubuntu20.04_py3.9_vllm_0.6.4",
        "rocm/jax:latest",
        "rocm/tensorflow:latest",
        "registry.k8s.io/e2e-test-images/agnhost:2.53",
        "gcr.io/k8s-staging-perf-tests/sleep:latest",
        "registry.k8s.io/pause:3.10",
        "k8s.gcr.io/pause:3.2",
    ],
)
def test_listed_repositories_built_without_cuda_need_none(image: str) -> None:
    found = offline_cuda(image)
    assert found.status == "no-cuda" and found.cuda is None and found.convention == "no-cuda-image"
    assert "built without CUDA" in found.source


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("nvcr.io/nvidia/tritonserver:24.06-py3-sdk", "no release note states the CUDA of the Triton SDK image"),
        ("nvcr.io/nvidia/tritonserver:25.01-py3-sdk-igpu", "Jetson"),
        ("nvcr.io/nvidia/tritonserver:24.06-py3-igpu", "Jetson"),
        ("nvcr.io/nvidia/tritonserver:24.03-trtllm-python-py3", "variants lag the main image"),
        ("nvcr.io/nvidia/nemo:25.04.01", "NeMo 24.05 on PyTorch 24.02"),
        ("nvcr.io/nvidia/vllm:26.02-py3", "NGC vllm 26.02"),
        ("nvcr.io/nvidia/pytorch:23.02-py3", "NGC pytorch 23.02"),
    ],
)
def test_unknown_ngc_images_say_why(image: str, why: str) -> None:
    found = offline_cuda(image)
    assert found.status == "unknown" and found.cuda is None and found.convention == ""
    assert why in found.source


def test_unknown_without_a_known_reason_says_nothing() -> None:
    assert offline_cuda("example.com/team/app:1.0").source == ""
    assert offline_cuda("nvcr.io/nvidia/tritonserver:24.06-pyt-python-py3").source == ""


def test_variant_sources_name_the_variant_and_the_matrix() -> None:
    found = offline_cuda("nvcr.io/nvidia/tritonserver:24.06-trtllm-python-py3")
    assert found.convention == "ngc-variant"
    assert found.source.startswith("NGC tritonserver 24.06-trtllm-python-py3 ")
    assert "docs/introduction/compatibility.md" in found.source


def test_vllm_is_per_architecture() -> None:
    amd64 = offline_cuda("vllm/vllm-openai:v0.11.0", "amd64")
    arm64 = offline_cuda("vllm/vllm-openai:v0.11.0", "arm64")
    assert amd64.cuda is not None and amd64.cuda.version == (12, 8, 1)
    assert arm64.cuda is not None and arm64.cuda.version == (12, 9, 1)
    assert offline_cuda("vllm/vllm-openai:v0.10.0", "arm64").status == "unknown"  # no arm64 release image


def test_tgi_dlc_on_cuda_12_4_carries_the_understatement_caveat() -> None:
    name = "us-docker.pkg.dev/deeplearning-platform-release/gcr.io/huggingface-text-generation-inference-cu124.2-4.ubuntu2204.py311"
    assert "nvidia/cuda:12.1.0-base" in offline_cuda(name).caveat
    older = name.replace("cu124.2-4", "cu121.2-2")
    assert offline_cuda(older).caveat == ""


@pytest.mark.parametrize(
    "image",
    [
        "rayproject/ray:2.37.0",  # no platform: an alias of -cpu for the ray image
        "rayproject/ray:2.9.0-py310",
        "rayproject/ray:latest",
        "rayproject/ray",
        "rayproject/ray:2.40.0-extra-py311-cpu-aarch64",
        "docker.io/rayproject/ray:nightly-py39-cpu",
        "rayproject/ray-ml:2.9.0-cpu",
    ],
)
def test_rays_cpu_images_need_none(image: str) -> None:
    """ray-project/ray ci/ray_ci/docker_container.py: -cpu images are built on Ubuntu, and a ray tag
    without a platform aliases -cpu (ray-ml's aliases -gpu, which stays unknown)."""
    found = offline_cuda(image)
    assert found.status == "no-cuda" and found.cuda is None and found.convention == "ray-cpu"
    assert "CPU platform" in found.source

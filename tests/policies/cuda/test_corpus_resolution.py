"""The offline knowledge over the public corpus: exactly the images a sourced convention determines.

Each expected answer below was read from the convention's source (see policies/data/
image_conventions.json); every other image of a GPU container in the corpus must stay unknown.
"""

from __future__ import annotations

from pathlib import Path

from gpuguard.sources.yamlsafe import InputError, load_all_plain, read_text
from policies.cuda.conventions import offline_cuda
from policies.engine import images_in
from tests.support.paths import CORPUS

EXPECTED: dict[str, tuple[int, ...] | str] = {
    "docker.io/vllm/vllm-openai:v0.10.0": (12, 8, 1),
    "vllm/vllm-openai:v0.8.5": (12, 4, 0),
    # used through DRA claims (NVIDIA's DRA demos), judged since the CUDA rule covers DRA GPUs
    "nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda11.6.0-ubuntu18.04": (11, 6, 0),
    "nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda11.7.1-ubuntu18.04": (11, 7, 1),
    "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda11.7.1-ubuntu20.04": (11, 7, 1),
    "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0": (12, 5, 0),
    "nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0-ubuntu22.04": (12, 5, 0),
    "nvcr.io/nvidia/tritonserver:22.01-py3": (11, 6, 0),
    "nvidia/cuda:12.2.0-devel-ubi8": (12, 2, 0),
    "nvidia/cuda:12.3.1-devel-ubuntu20.04": (12, 3, 1),
    "rayproject/ray-llm:2.52.0-py311-cu128": (12, 8),
    "registry.baidubce.com/paddlepaddle/paddle:2.4.0rc0-gpu-cuda11.2-cudnn8.1-trt8.0": (11, 2),
    "tensorflow/tensorflow:2.13.0-gpu-jupyter": (11, 8),
    "us-docker.pkg.dev/deeplearning-platform-release/gcr.io/huggingface-text-generation-inference-cu121.2-1.ubuntu2204.py310":
        (12, 1),
    "us-docker.pkg.dev/deeplearning-platform-release/gcr.io/huggingface-text-generation-inference-cu124.2-3.ubuntu2204.py311":
        (12, 4),
    "ubuntu": "no-cuda",
    "ubuntu:18.04": "no-cuda",
    "ubuntu:22.04": "no-cuda",
    "ubuntu:24.04": "no-cuda",
    # repositories built without CUDA (policies/data/no_cuda_images.json): AMD's ROCm images and
    # Kubernetes test images (used by the corpus's AMD and DRA examples)
    "rocm/jax:latest": "no-cuda",
    "rocm/pytorch:latest": "no-cuda",
    "rocm/tensorflow:latest": "no-cuda",
    "rocm/vllm:rocm6.2_mi300_ubuntu20.04_py3.9_vllm_0.6.4": "no-cuda",
    "registry.k8s.io/e2e-test-images/agnhost:2.53": "no-cuda",
    "gcr.io/k8s-staging-perf-tests/sleep:latest": "no-cuda",
}


def _corpus_images(corpus: Path) -> set[str]:
    found: set[str] = set()
    for path in sorted(corpus.iterdir()):
        try:
            documents = list(load_all_plain(read_text(path), path.name))
        except InputError:
            continue
        for doc in documents:
            if isinstance(doc, dict):
                found.update(use.image for use in images_in(doc, rules=("gpu-cuda-driver-mismatch",)))
    return found


def test_corpus_images_resolve_exactly_as_their_sources_say() -> None:
    images = _corpus_images(CORPUS / "real")
    assert len(images) >= 60 and set(EXPECTED) <= images
    for image in sorted(images):
        found = offline_cuda(image)
        expected = EXPECTED.get(image)
        if expected is None:
            assert found.status == "unknown", (image, found)
        elif expected == "no-cuda":
            assert found.status == "no-cuda", image
        else:
            assert found.cuda is not None and found.cuda.version == expected, (image, found)

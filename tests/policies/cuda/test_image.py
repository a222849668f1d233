"""Image references → CUDA versions, and the resolution order (annotations, rules, tag)."""

from __future__ import annotations

import pytest

from policies.cuda.image import cuda_from_image, parse_image
from policies.cuda.resolve import ANNOTATION, parse_image_rules, resolve


@pytest.mark.parametrize(
    ("ref", "registry", "repository", "tag", "digest"),
    [
        ("nvidia/cuda:12.4.1-base-ubuntu22.04", "docker.io", "nvidia/cuda", "12.4.1-base-ubuntu22.04", None),
        ("busybox", "docker.io", "library/busybox", None, None),
        ("nvcr.io/nvidia/pytorch:24.05-py3", "nvcr.io", "nvidia/pytorch", "24.05-py3", None),
        ("localhost:5000/nvidia/cuda:12.2.2-devel", "localhost:5000", "nvidia/cuda", "12.2.2-devel", None),
        ("localhost/x/y", "localhost", "x/y", None, None),
        ("nvidia/cuda@sha256:abc", "docker.io", "nvidia/cuda", None, "sha256:abc"),
        ("nvidia/cuda:12.4.1-base@sha256:abc", "docker.io", "nvidia/cuda", "12.4.1-base", "sha256:abc"),
    ],
)
def test_parse_image(ref: str, registry: str, repository: str, tag: str | None, digest: str | None) -> None:
    parsed = parse_image(ref)
    assert parsed is not None
    assert (parsed.registry, parsed.repository, parsed.tag, parsed.digest) == (registry, repository, tag, digest)


@pytest.mark.parametrize("ref", ["", "nvidia/cuda:", "Nvidia/CUDA:12.4.1-base", "a b"])
def test_parse_image_rejects_malformed(ref: str) -> None:
    assert parse_image(ref) is None


@pytest.mark.parametrize(
    ("ref", "version"),
    [
        ("nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04", (12, 4, 1)),
        ("docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04", (12, 4, 1)),
        ("nvcr.io/nvidia/cuda:13.0.2-runtime-ubuntu24.04", (13, 0, 2)),
        ("mirror.example.com:8443/dockerhub/nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04", (11, 8, 0)),
        ("nvidia/cuda:10.0-cudnn7-runtime-ubuntu16.04", (10, 0)),
        ("nvidia/cuda:12.3.2-cudnn9-devel-ubuntu22.04", (12, 3, 2)),
        ("nvidia/cuda:9.2-base", (9, 2)),
        ("nvidia/cuda:12.2.2-devel-ubi9", (12, 2, 2)),
        ("nvidia/cuda:12.4.1-base-ubuntu22.04@sha256:0123", (12, 4, 1)),
        ("nvcr.io/nvidia/tritonserver:24.10-py3", (12, 6, 2)),
        ("nvcr.io/nvidia/tensorflow:23.01-tf2-py3", (12, 0, 1)),
        ("nvcr.io/nvidia/pytorch:25.12-py3", (13, 1, 0)),
        ("pytorch/pytorch:2.7.0-cuda12.8-cudnn9-devel", (12, 8)),
        ("pytorch/pytorch:2.2.0-cuda12.1-cudnn8-runtime", (12, 1)),
    ],
)
def test_cuda_from_image(ref: str, version: tuple[int, ...]) -> None:
    found = cuda_from_image(ref)
    assert found is not None and found.version == version


@pytest.mark.parametrize(
    "ref",
    [
        "nvidia/cuda:latest",
        "nvidia/cuda",
        "nvidia/cuda@sha256:0123456789abcdef",
        "nvidia/cuda:12.4.1",  # not a published tag shape
        "nvidia/cudagl:11.4.2-base-ubuntu20.04",
        "nvcr.io/nvidia/tritonserver:24.05-trtllm-python-py3",  # built on a different CUDA
        "nvcr.io/nvidia/pytorch:24.05-py3",  # release not in the table: no guess
        "pytorch/pytorch:latest",
        "vllm/vllm-openai:v0.11.0",
        "tensorflow/tensorflow:2.15.0-gpu",
        "example.com/nvidia/cuda-tools:12.4.1-base",
    ],
)
def test_unknown_images_give_no_guess(ref: str) -> None:
    assert cuda_from_image(ref) is None


def test_ngc_images_carry_their_datacenter_driver_list() -> None:
    found = cuda_from_image("nvcr.io/nvidia/tritonserver:24.01-py3")
    assert found is not None and found.datacenter_drivers == ((470, 57), (525, 85), (535, 86), (545, 23))


def test_resolution_order() -> None:
    rules, problems = parse_image_rules([{"pattern": r"^registry\.example\.com/ml/", "cudaVersion": "12.2"}])
    assert problems == [] and len(rules) == 1
    image = "registry.example.com/ml/nvidia/cuda:12.4.1-base-ubuntu22.04"
    per_container = {f"{ANNOTATION}.train": "11.8", ANNOTATION: "12.6"}
    by_container = resolve(image, "train", per_container, rules)
    assert by_container is not None and by_container.version == (11, 8)
    by_pod = resolve(image, "other", per_container, rules)
    assert by_pod is not None and by_pod.version == (12, 6) and by_pod.source == f"annotation {ANNOTATION}"
    by_rule = resolve(image, "train", {}, rules)
    assert by_rule is not None and by_rule.version == (12, 2) and "imageRules" in by_rule.source
    by_tag = resolve(image, "train", {}, ())
    assert by_tag is not None and by_tag.version == (12, 4, 1)
    assert resolve("busybox", "train", {ANNOTATION: "not-a-version"}, rules) is None


def test_invalid_image_rules_are_reported_and_skipped() -> None:
    rules, problems = parse_image_rules(
        [{"pattern": "(", "cudaVersion": "12.4"}, {"pattern": "x", "cudaVersion": "twelve"}, "x",
         {"pattern": "ok", "cudaVersion": "12.4"}]
    )
    assert len(rules) == 1 and len(problems) == 3

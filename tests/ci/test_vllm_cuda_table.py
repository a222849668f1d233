""".ci/vllm_cuda_table.py: which build of a vLLM release is the published image, and its CUDA."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from tests.support.paths import ROOT

_spec = importlib.util.spec_from_file_location("vllm_cuda_table", ROOT / ".ci" / "vllm_cuda_table.py")
assert _spec is not None and _spec.loader is not None
vllm_cuda_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vllm_cuda_table)
final_base = vllm_cuda_table.final_base
release_builds = vllm_cuda_table.release_builds

PIPELINE = """
steps:
  - label: "Build wheel - CUDA 12.1"
    agents: {queue: cpu_queue_postmerge}
    commands:
      - "docker build --build-arg CUDA_VERSION=12.1.0 --tag vllm-ci:build-image --target build -f docker/Dockerfile ."
  - group: release
    steps:
      - label: "Build release image (x86)"
        agents: {queue: cpu_queue_postmerge}
        commands:
          - "docker build --build-arg CUDA_VERSION=12.8.1 --tag public.ecr.aws/q9t5s3a7/vllm-release-repo:$BUILDKITE_COMMIT-$(uname -m) --target vllm-openai -f docker/Dockerfile ."
      - label: "Build release image (arm64)"
        agents: {queue: arm64_cpu_queue_postmerge}
        commands:
          - "docker build --build-arg CUDA_VERSION=12.9.1 --tag public.ecr.aws/q9t5s3a7/vllm-release-repo:$BUILDKITE_COMMIT-$(uname -m) --target vllm-openai -f docker/Dockerfile ."
      - label: "Build release image - x86_64 - CUDA 12.9"
        commands:
          - "docker build --build-arg CUDA_VERSION=12.9.1 --tag public.ecr.aws/q9t5s3a7/vllm-release-repo:$BUILDKITE_COMMIT-$(uname -m)-cu129 --target vllm-openai -f docker/Dockerfile ."
      - label: "Build CPU release image"
        commands:
          - "docker build --tag public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v1 --target vllm-openai -f docker/Dockerfile.cpu ."
"""

DOCKERFILE = """
ARG CUDA_VERSION=12.8.1
ARG FINAL_BASE_IMAGE=nvidia/cuda:${CUDA_VERSION}-base-ubuntu22.04
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu22.04 AS base
FROM base AS build
FROM ${FINAL_BASE_IMAGE} AS vllm-base
FROM vllm-base AS vllm-openai-base
FROM vllm-openai-base AS vllm-openai
"""


def test_release_builds_pick_the_main_image_per_architecture() -> None:
    builds = release_builds(PIPELINE)
    assert {arch: cuda for arch, (cuda, _) in builds.items()} == {"amd64": "12.8.1", "arm64": "12.9.1"}


def test_final_base_follows_stages_and_arg_defaults() -> None:
    assert final_base(DOCKERFILE) == "nvidia/cuda:${CUDA_VERSION}-base-ubuntu22.04"
    assert final_base("FROM python:3.12 AS vllm-openai") == "python:3.12"
    assert final_base("FROM ubuntu AS other") is None


def test_the_tool_writes_a_row_per_release(tmp_path: Path) -> None:
    release = tmp_path / "0.99.0"
    release.mkdir()
    (release / "docker__Dockerfile").write_text(DOCKERFILE)
    (release / ".buildkite__release-pipeline.yaml").write_text(PIPELINE)
    (release / ".done").write_text(json.dumps({"url": "https://example.invalid/vllm-0.99.0.tar.gz",
                                               "sha256": "ab" * 32}))
    not_cuda = tmp_path / "0.98.0"
    not_cuda.mkdir()
    (not_cuda / "docker__Dockerfile").write_text("FROM python:3.12 AS vllm-openai")
    (not_cuda / ".buildkite__release-pipeline.yaml").write_text(PIPELINE)
    (not_cuda / ".done").write_text(json.dumps({"url": "u/x.tar.gz", "sha256": "cd" * 32}))
    out = subprocess.run([sys.executable, str(ROOT / ".ci" / "vllm_cuda_table.py"), str(tmp_path)],
                         check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)["rows"]
    assert [r["version"] for r in rows] == ["0.99.0"]
    assert rows[0]["cuda"] == {"amd64": "12.8.1", "arm64": "12.9.1"}
    assert rows[0]["source"].endswith("read from the PyPI sdist vllm-0.99.0.tar.gz sha256:" + "ab" * 32)


# From 0.21 the build tags through a metadata script and the step pushes the release image itself
# (vllm-project/vllm v0.21.0 .buildkite/release-pipeline.yaml), and
# .buildkite/scripts/publish-release-images.sh re-tags it as vllm/vllm-openai:v${RELEASE_VERSION}.
PUSHED_PIPELINE = """
steps:
  - group: "Build release Docker images"
    steps:
      - label: "Build release image - x86_64 - CUDA 13.0"
        agents: {queue: cpu_queue_release}
        commands:
          - |
            DOCKER_BUILDKIT=1 docker build \\
              $(bash .buildkite/scripts/docker-build-metadata-args.sh) \\
              --build-arg CUDA_VERSION=13.0.2 \\
              --target vllm-openai \\
              -f docker/Dockerfile .
          - "docker push public.ecr.aws/q9t5s3a7/vllm-release-repo:$BUILDKITE_COMMIT-$(uname -m)"
          - "docker push public.ecr.aws/q9t5s3a7/vllm-release-repo:$BUILDKITE_COMMIT"
      - label: "Build release image - aarch64 - CUDA 13.0"
        agents: {queue: arm64_cpu_queue_release}
        commands:
          - |
            docker build --build-arg CUDA_VERSION=13.0.2 --target vllm-openai -f docker/Dockerfile .
          - "docker push public.ecr.aws/q9t5s3a7/vllm-release-repo:$BUILDKITE_COMMIT-$(uname -m)"
      - label: "Build release image - x86_64 - CUDA 12.9"
        agents: {queue: cpu_queue_release}
        commands:
          - |
            docker build --build-arg CUDA_VERSION=12.9.1 --target vllm-openai -f docker/Dockerfile .
          - "docker push public.ecr.aws/q9t5s3a7/vllm-release-repo:$BUILDKITE_COMMIT-$(uname -m)-cu129"
"""


def test_release_builds_read_the_steps_pushes_when_the_build_names_no_tag() -> None:
    builds = release_builds(PUSHED_PIPELINE)
    assert {arch: cuda for arch, (cuda, _) in builds.items()} == {"amd64": "13.0.2", "arm64": "13.0.2"}


def test_the_publish_script_names_the_published_tag(tmp_path: Path) -> None:
    release = tmp_path / "0.99.0"
    release.mkdir()
    (release / "docker__Dockerfile").write_text(DOCKERFILE)
    (release / ".buildkite__release-pipeline.yaml").write_text(PUSHED_PIPELINE)
    (release / ".buildkite__scripts__publish-release-images.sh").write_text(
        "docker tag public.ecr.aws/q9t5s3a7/vllm-release-repo:${COMMIT}-x86_64 "
        "vllm/vllm-openai:v${RELEASE_VERSION}-x86_64\n"
        "docker manifest create vllm/vllm-openai:v${RELEASE_VERSION} vllm/vllm-openai:v${RELEASE_VERSION}-x86_64\n")
    (release / ".done").write_text(json.dumps({"url": "u/vllm-0.99.0.tar.gz", "sha256": "ef" * 32}))
    out = subprocess.run([sys.executable, str(ROOT / ".ci" / "vllm_cuda_table.py"), str(tmp_path)],
                         check=True, capture_output=True, text=True).stdout
    (row,) = json.loads(out)["rows"]
    assert row["cuda"] == {"amd64": "13.0.2", "arm64": "13.0.2"}
    assert ".buildkite/scripts/publish-release-images.sh tags it vllm/vllm-openai:v${RELEASE_VERSION}" in row["source"]

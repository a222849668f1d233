"""Regenerate ``policies/data/vllm_cuda.json``: the CUDA of each ``vllm/vllm-openai:v<version>`` image.

    python .ci/vllm_cuda_table.py DIR > policies/data/vllm_cuda.json

``DIR`` holds one sub-directory per vLLM release with the files of that release's git tree that
decide the image (``docker/Dockerfile`` or ``Dockerfile``, ``.buildkite/release-pipeline.yaml``,
``.buildkite/scripts/annotate-release.sh`` or, from 0.21, ``.buildkite/scripts/publish-release-images.sh``,
path separators replaced by ``__``) and a ``.done`` JSON
file naming the PyPI sdist they came from (``url``, ``sha256``).  vLLM's sdists are built by
setuptools-scm from the release tag and carry every tracked file, so they are the tag's tree.

The CUDA of a release image is the ``--build-arg CUDA_VERSION=`` of the release pipeline step that
builds ``--target vllm-openai`` from the CUDA Dockerfile into ``vllm-release-repo:$BUILDKITE_COMMIT``
(``[-$(uname -m)]``, no variant suffix), else the Dockerfile's default ``ARG CUDA_VERSION``.  A
release is listed only when the Dockerfile's ``vllm-openai`` stage descends from
``nvidia/cuda:${CUDA_VERSION}-…`` (directly or through ``FINAL_BASE_IMAGE``), so the image's
``CUDA_VERSION`` is that value; the architecture comes from the step's label or agent queue.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

_FROM = re.compile(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?", re.IGNORECASE | re.MULTILINE)
_ARG_DEFAULT = re.compile(r"^ARG\s+(\w+)=(\S+)", re.MULTILINE)


def _steps(node: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if isinstance(node.get("commands"), list) or isinstance(node.get("command"), str):
            out.append(node)
        for value in node.values():
            out.extend(_steps(value))
    elif isinstance(node, list):
        for value in node:
            out.extend(_steps(value))
    return out


def _arch(step: dict[str, Any]) -> str:
    text = f"{step.get('label', '')} {json.dumps(step.get('agents', {}))}".lower()
    return "arm64" if ("arm64" in text or "aarch64" in text) else "amd64"


def release_builds(pipeline: str) -> dict[str, tuple[str | None, str]]:
    """arch → (CUDA_VERSION build-arg or None, the command) of the main release image builds."""
    found: dict[str, tuple[str | None, str]] = {}
    for step in _steps(yaml.safe_load(pipeline)):
        commands = step.get("commands") or [step.get("command")]
        # Later pipelines (0.21 on) tag the build through a metadata script and push the release
        # image in a command of their own: the step's pushes name what it builds.
        pushes = [
            m.group(1) for c in commands if isinstance(c, str)
            for m in re.finditer(r"docker push\s+\S*/vllm-release-repo:\$BUILDKITE_COMMIT((?:-\$\(uname -m\))?\S*)", c)
        ]
        for command in commands:
            if not isinstance(command, str) or "--target vllm-openai" not in command:
                continue
            tag = re.search(r"--tag\s+\S*/vllm-release-repo:\$BUILDKITE_COMMIT((?:-\$\(uname -m\))?\S*)", command)
            dockerfile = re.search(r"\s-f\s+(\S+)", command)
            suffixes = [tag.group(1)] if tag is not None else pushes
            if not suffixes or any(x not in ("", "-$(uname -m)") for x in suffixes):
                continue
            if dockerfile is not None and dockerfile.group(1) not in ("docker/Dockerfile", "Dockerfile"):
                continue
            cuda = re.search(r"--build-arg\s+CUDA_VERSION=(\S+)", command)
            found[_arch(step)] = (cuda.group(1) if cuda else None, command)
    return found


def final_base(dockerfile: str, target: str = "vllm-openai") -> str | None:
    """The external image the ``target`` stage finally derives from, with ARG defaults applied."""
    stages: dict[str, str] = {alias: image for image, alias in _FROM.findall(dockerfile) if alias}
    defaults: dict[str, str] = dict(_ARG_DEFAULT.findall(dockerfile))
    image: str | None = stages.get(target)
    for _ in range(10):
        if image is None:
            return None
        m = re.fullmatch(r"\$\{(\w+)\}", image)
        if m and m.group(1) != "CUDA_VERSION":
            image = defaults.get(m.group(1))
            continue
        if image in stages:
            image = stages[image]
            continue
        return image
    return None


def main() -> int:
    root = Path(sys.argv[1])
    rows = []
    for directory in sorted(root.iterdir(), key=lambda p: [int(x) if x.isdigit() else -1 for x in
                                                           re.split(r"\.|post", p.name)]):
        done = directory / ".done"
        pipeline = directory / ".buildkite__release-pipeline.yaml"
        dockerfile = directory / "docker__Dockerfile"
        if not dockerfile.exists():
            dockerfile = directory / "Dockerfile"
        if not (done.exists() and pipeline.exists() and dockerfile.exists()):
            continue
        sdist = json.loads(done.read_text())
        text = dockerfile.read_text()
        base = final_base(text)
        if base is None or not base.startswith("nvidia/cuda:${CUDA_VERSION}-"):
            continue
        default = dict(_ARG_DEFAULT.findall(text)).get("CUDA_VERSION")
        builds = release_builds(pipeline.read_text())
        if "amd64" not in builds:
            continue
        per_arch = {arch: cuda or default for arch, (cuda, _) in sorted(builds.items())}
        if any(v is None for v in per_arch.values()):
            continue
        published = next((
            script.name.replace("__", "/") for script in (
                directory / ".buildkite__scripts__annotate-release.sh",
                directory / ".buildkite__scripts__publish-release-images.sh",  # 0.21 on
            ) if script.exists() and "vllm/vllm-openai:v${RELEASE_VERSION}" in script.read_text()
        ), None)
        rel_dockerfile = dockerfile.name.replace("__", "/")
        source = (
            f"vllm-project/vllm v{directory.name}: .buildkite/release-pipeline.yaml (release image step: "
            + "; ".join(f"{arch} --build-arg CUDA_VERSION={cuda}" if cuda else f"{arch} no CUDA_VERSION build-arg"
                        for arch, (cuda, _) in sorted(builds.items()))
            + f") and {rel_dockerfile} (vllm-openai stage from {base}"
            + (f", ARG CUDA_VERSION={default}" if default else "")
            + ")"
            + (f"; {published} tags it vllm/vllm-openai:v${{RELEASE_VERSION}}" if published else "")
            + f"; read from the PyPI sdist {sdist['url'].rsplit('/', 1)[-1]} sha256:{sdist['sha256']}"
        )
        rows.append({"version": directory.name, "cuda": per_arch, "source": source})
    doc = {
        "description": (
            "vllm/vllm-openai:v<version> -> the CUDA version of the image per architecture: the CUDA_VERSION its "
            "release pipeline builds the vllm-openai target with (else the Dockerfile's default), whose final stage "
            "is nvidia/cuda:${CUDA_VERSION}-*, so the image's CUDA_VERSION and NVIDIA_REQUIRE_CUDA are those of that "
            "nvidia/cuda image. Generated by .ci/vllm_cuda_table.py from each release's sdist on PyPI (the tag's "
            "tree). Releases whose sdist lacks the Dockerfile (before 0.6.2) are not listed. Rows ordered by version."
        ),
        "rows": rows,
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

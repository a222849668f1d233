"""deploy/requirements.lock matches pyproject.toml; deploy/Dockerfile builds only from pinned inputs.

No Docker engine runs here, so the Dockerfile is checked statically, and its dependency step is
checked for the image's platform with pip itself (``pip download`` for CPython 3.12 on manylinux).
"""

from __future__ import annotations

import copy
import re
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.paths import ROOT

LOCK = ROOT / "deploy" / "requirements.lock"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    hashes: tuple[str, ...]
    via: tuple[str, ...]


def read_lock(text: str) -> dict[str, Pin]:
    pins: dict[str, Pin] = {}
    for block in re.split(r"\n(?=\S)", text):
        if block.startswith("#") or not block.strip():
            continue
        head = block.split("\\", 1)[0].strip()
        req = Requirement(head)
        (spec,) = req.specifier
        assert spec.operator == "==", head
        via = re.findall(r"#[ \t]+via[ \t]+(.+)|#[ \t]{3}(.+)", block)
        name = canonicalize_name(req.name)
        assert name not in pins, f"{name} pinned twice"
        pins[name] = Pin(
            name, spec.version, tuple(re.findall(r"--hash=sha256:([0-9a-f]{64})", block)),
            tuple(v.strip() for pair in via for v in pair if v.strip()),
        )
    return pins


PINS = read_lock(LOCK.read_text())


def lock_problems(pyproject: dict[str, Any], pins: dict[str, Pin]) -> list[str]:
    """Why the lock does not match pyproject's dependencies and build requirements (empty: it does)."""
    problems = []
    direct = [Requirement(r) for r in pyproject["project"]["dependencies"]]
    build = [Requirement(r) for r in pyproject["build-system"]["requires"]]
    for req in direct + build:
        pin = pins.get(canonicalize_name(req.name))
        if pin is None:
            problems.append(f"{req} is not locked")
        elif pin.version not in req.specifier:
            problems.append(f"{req.name}=={pin.version} does not satisfy {req}")
    problems += [f"{pin.name} has no hash" for pin in pins.values() if not pin.hashes]
    direct_names = {canonicalize_name(r.name) for r in direct}
    from_pyproject = {p.name for p in pins.values() if "gpuguard (pyproject.toml)" in p.via}
    problems += [f"{name} is locked for pyproject but not a dependency" for name in sorted(from_pyproject - direct_names)]
    for pin in pins.values():
        problems += [
            f"{pin.name} is needed by {parent}, which is not locked"
            for parent in pin.via if parent != "gpuguard (pyproject.toml)" and canonicalize_name(parent) not in pins
        ]
        if not pin.via and pin.name not in {canonicalize_name(r.name) for r in build}:
            problems.append(f"{pin.name} is locked for no reason")
    return problems


def test_lock_matches_pyproject() -> None:
    assert lock_problems(PYPROJECT, PINS) == [], "run `bash .ci/lock`"


def test_lock_check_sees_drift() -> None:
    changed = copy.deepcopy(PYPROJECT)
    changed["project"]["dependencies"] = [*changed["project"]["dependencies"], "rich>=13", "fastapi>=999"]
    changed["project"]["dependencies"].remove("shtab>=1.13")
    assert lock_problems(changed, PINS) == [
        "rich>=13 is not locked",
        f"fastapi=={PINS['fastapi'].version} does not satisfy fastapi>=999",
        "shtab is locked for pyproject but not a dependency",
    ]


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def dockerfile_instructions(text: str) -> list[Instruction]:
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [
        Instruction(*[*line.strip().split(None, 1), ""][:2])
        for line in joined.splitlines() if line.strip()
    ]


INSTRUCTIONS = dockerfile_instructions(DOCKERFILE.read_text())


def test_base_image_is_pinned_by_digest() -> None:
    (arg,) = [i.args for i in INSTRUCTIONS if i.keyword == "ARG" and i.args.startswith("BASE=")]
    base = arg.split("=", 1)[1]
    assert re.fullmatch(r"python:3\.12-slim@sha256:[0-9a-f]{64}", base), base
    froms = [i.args for i in INSTRUCTIONS if i.keyword == "FROM"]
    assert froms and all(f.split()[0] == "${BASE}" for f in froms)
    assert INSTRUCTIONS[0].keyword == "ARG"  # declared before the first FROM, so every FROM can use it


def test_dependencies_come_only_from_the_lock() -> None:
    runs = [i.args for i in INSTRUCTIONS if i.keyword == "RUN"]
    installs = [cmd for run in runs for cmd in run.split("&&") if "pip install" in cmd]
    assert installs
    for cmd in installs:
        assert "--upgrade" not in cmd and " -U " not in cmd
        assert "--require-hashes" in cmd or "--no-deps" in cmd, cmd
    locked, project = installs
    assert "-r requirements.lock" in locked and "--only-binary :all:" in locked
    assert "--no-deps" in project and "--no-build-isolation" in project and project.rstrip().endswith(" .")
    copies = [i.args.split() for i in INSTRUCTIONS if i.keyword == "COPY" and not i.args.startswith("--from")]
    assert copies[0] == ["deploy/requirements.lock", "./"]  # the lock first: its layer caches apart from the code
    for *sources, _ in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    packages = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {p.rstrip("*") for p in packages} <= {s for *srcs, _ in copies for s in srcs}


def test_dockerfile_and_deployment_agree_with_the_one_version() -> None:
    deployment = next(
        d for d in yaml.safe_load_all((ROOT / "deploy" / "deployment.yaml").read_text()) if d and d["kind"] == "Deployment"
    )
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"ghcr.io/gpuguard/gpuguard:{VERSION}"
    assert VERSION not in DOCKERFILE.read_text()  # the tag is given at build time, never written in the file
    version = subprocess.run([sys.executable, str(ROOT / ".ci" / "version")], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == VERSION


@pytest.mark.integration
def test_lock_installs_on_the_image_platform(tmp_path: Path) -> None:
    """Every pin has a CPython 3.12 manylinux wheel for amd64 and arm64 whose hash is in the lock.

    manylinux_2_28 and older are within the base image's glibc: the image is Debian trixie (per the
    repo-info record cited in the Dockerfile), newer than this machine's Debian 12 with glibc 2.36.
    """
    for arch in ("x86_64", "aarch64"):
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--require-hashes", "--only-binary", ":all:",
             "--python-version", "3.12", "--implementation", "cp", "--abi", "cp312", "--abi", "abi3", "--abi", "none",
             *(f"--platform={p}_{arch}" for p in ("manylinux_2_28", "manylinux_2_17", "manylinux2014")),
             "--dest", str(tmp_path / arch), "-r", str(LOCK)],
            capture_output=True, text=True, timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        wheels = {canonicalize_name(w.name.split("-")[0]) for w in (tmp_path / arch).iterdir()}
        assert wheels == set(PINS), set(PINS) ^ wheels

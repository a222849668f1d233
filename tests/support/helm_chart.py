"""Render gpuguard's Helm chart (deploy/helm/gpuguard) with the real helm binary."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.support.paths import ROOT
from tests.support.tools import tool

CHART = ROOT / "deploy" / "helm" / "gpuguard"
RELEASE = "gpuguard"
NAMESPACE = "gpuguard"


def helm(*args: str, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(tool("helm")), *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def values_file(directory: Path, values: Mapping[str, Any], name: str = "values.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(dict(values), sort_keys=False))
    return path


def template(
    tmp: Path,
    values: Mapping[str, Any] | None = None,
    *extra: str,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
) -> subprocess.CompletedProcess[str]:
    """``helm template RELEASE CHART -n NAMESPACE [-f values] EXTRA…``, not checked."""
    args = ["template", release, str(CHART), "--namespace", namespace]
    if values:
        args += ["--values", str(values_file(tmp, values))]
    return helm(*args, *extra)


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def render(
    tmp: Path,
    values: Mapping[str, Any] | None = None,
    *extra: str,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
) -> list[dict[str, Any]]:
    done = template(tmp, values, *extra, release=release, namespace=namespace)
    assert done.returncode == 0, done.stderr
    return documents(done.stdout)


def only(docs: Sequence[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[d['metadata']['name'] for d in found]}"
    return found[0]


def kinds(docs: Sequence[dict[str, Any]]) -> list[str]:
    return sorted(d["kind"] for d in docs)

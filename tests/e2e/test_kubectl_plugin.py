"""`kubectl gpuguard …` through a real kubectl: plugin discovery finds the `kubectl-gpuguard` script.

kubectl runs any executable named ``kubectl-<name>`` on PATH for ``kubectl <name>`` and hands it
the remaining arguments; no cluster is involved.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from policies.registry import RULES
from tests.support.paths import FIXTURES
from tests.support.tools import tool

BIN = Path(sys.executable).parent
PLUGIN = BIN / "kubectl-gpuguard"

pytestmark = pytest.mark.integration


def _kubectl(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    kubectl = tool("kubectl")
    assert PLUGIN.is_file(), f"{PLUGIN} is missing: reinstall gpuguard (`pip install -e .`) for its console scripts"
    env = {
        "PATH": os.pathsep.join([str(BIN), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(tmp_path),
        "KUBECONFIG": str(tmp_path / "no-kubeconfig"),
        "NO_COLOR": "1",
    }
    return subprocess.run([str(kubectl), *args], capture_output=True, text=True, env=env, timeout=60)


def test_kubectl_discovers_the_plugin(tmp_path: Path) -> None:
    proc = _kubectl(tmp_path, "plugin", "list")
    assert str(PLUGIN) in proc.stdout, proc.stdout + proc.stderr


def test_kubectl_gpuguard_rules(tmp_path: Path) -> None:
    proc = _kubectl(tmp_path, "gpuguard", "rules")
    assert proc.returncode == 0, proc.stderr
    for rule_id in RULES:
        assert rule_id in proc.stdout
    proc = _kubectl(tmp_path, "gpuguard", "--version")
    assert proc.stdout.strip() == f"gpuguard {importlib.metadata.version('gpuguard')}"


def test_kubectl_gpuguard_lint_keeps_the_exit_code(tmp_path: Path) -> None:
    manifest = FIXTURES / "lint" / "pod-limit-missing.yaml"
    proc = _kubectl(tmp_path, "gpuguard", "lint", str(manifest), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    assert "gpu-limit-missing" in {f["rule"] for f in json.loads(proc.stdout)["findings"]}
    proc = _kubectl(tmp_path, "gpuguard", "lint", str(FIXTURES / "lint" / "pod-good.yaml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_kubectl_gpuguard_usage_names_kubectl_gpuguard(tmp_path: Path) -> None:
    proc = _kubectl(tmp_path, "gpuguard", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: kubectl gpuguard [-h] [--version] COMMAND ...")
    proc = _kubectl(tmp_path, "gpuguard", "lint", "--help")
    assert proc.stdout.startswith("usage: kubectl gpuguard lint ")
    proc = _kubectl(tmp_path, "gpuguard", "lint", "--badflag")
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: kubectl gpuguard lint ")
    assert "kubectl gpuguard lint: error: unrecognized arguments: --badflag" in proc.stderr


def test_kubectl_completes_the_plugin_through_kubectl_complete_gpuguard(tmp_path: Path) -> None:
    """kubectl's own completion (``kubectl __complete``, what its bash/zsh/fish scripts call) runs
    ``kubectl_complete-gpuguard`` from PATH with the words after ``kubectl gpuguard``."""
    assert (BIN / "kubectl_complete-gpuguard").is_file()
    proc = _kubectl(tmp_path, "__complete", "gpuguard", "li")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["lint\tlint Kubernetes manifests for GPU problems", ":4"]
    proc = _kubectl(tmp_path, "__complete", "gpuguard", "lint", "--format", "")
    assert proc.stdout.splitlines() == ["text", "json", "sarif", "github", ":4"]
    proc = _kubectl(tmp_path, "__complete", "gpuguard", "lint", "--helm-chart", "")
    assert proc.stdout.splitlines() == [":16"]  # directories only, by the shell

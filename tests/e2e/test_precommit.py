"""The pre-commit hook, run by the real `pre-commit run` against throwaway git repositories whose
`.pre-commit-config.yaml` names this project, as a user's does.

The project is copied (tracked and untracked-but-not-ignored files) into a temporary git
repository, so the hook is tested as it stands in the working tree.  pre-commit installs it into
a fresh virtualenv from PyPI, which takes a while: the copy and PRE_COMMIT_HOME are made once per
test run and shared by every worker (pre-commit keys its environments on repository and rev, so the
hook is installed once; `try-repo` would clone and install it again for every run).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.paths import FIXTURES, ROOT

LINT = FIXTURES / "lint"
PRE_COMMIT = Path(sys.executable).parent / "pre-commit"

# pre-commit is a dev dependency and git is on every machine the README supports: never skip.
pytestmark = pytest.mark.integration


def _git(cwd: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "test",
        "GIT_AUTHOR_EMAIL": "test@example.com",
        "GIT_COMMITTER_NAME": "test",
        "GIT_COMMITTER_EMAIL": "test@example.com",
    }
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> tuple[Path, Path]:
    """(copy of this project as a git repository, PRE_COMMIT_HOME), shared by the workers of a run."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if worker_id != "master":
        root = root.parent  # the run's directory every xdist worker's basetemp is in
    base = root / "precommit-shared"
    project, home = base / "project", base / "pre-commit-home"
    with FileLock(str(root / "precommit-shared.lock")):
        if not (project / ".git").is_dir():
            _snapshot(base / "project.partial")
            (base / "project.partial").rename(project)
    return project, home


def _snapshot(project: Path) -> None:
    shutil.rmtree(project, ignore_errors=True)
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            dest = project / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest)
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "snapshot")


def _run_hook(hook_repo: tuple[Path, Path], repo: Path, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`pre-commit run --all-files` in ``repo`` (a git repository), configured for this project's hook."""
    from filelock import FileLock

    project, home = hook_repo
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, check=True, capture_output=True,
                         text=True).stdout.strip()
    config = {"repos": [{"repo": str(project), "rev": rev, "hooks": [{"id": "gpuguard"}]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    _git(repo, "add", "-A")
    env = {**os.environ, "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"}
    if extra_path is not None:
        env["PATH"] = os.pathsep.join([str(extra_path), os.environ["PATH"]])
    command = [str(PRE_COMMIT), "run", "--all-files", "--color", "never"]
    # The first run of a test run installs the hook's environment; the others wait for it and reuse it.
    with FileLock(str(home.parent / "install.lock")):
        subprocess.run([str(PRE_COMMIT), "install-hooks"], cwd=repo, env=env, check=True, capture_output=True,
                       timeout=900)
    return subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=900)


def _run_on_manifest(
    hook_repo: tuple[Path, Path], manifest: Path, tmp_path: Path, copies: int = 1
) -> subprocess.CompletedProcess[str]:
    repo = tmp_path / "manifests"
    repo.mkdir()
    shutil.copyfile(manifest, repo / "gpu-pod.yaml")
    for i in range(1, copies):
        shutil.copyfile(manifest, repo / f"gpu-pod-{i}.yaml")
    (repo / "README.md").write_text("not YAML, not checked\n")
    _git(repo, "init", "-q")
    return _run_hook(hook_repo, repo)


def test_a_chart_is_rendered_not_read_raw(hook_repo: tuple[Path, Path], tmp_path: Path) -> None:
    """Issue: the hook failed on any repository with a chart (its templates are no YAML)."""
    from tests.support.tools import tool

    repo = tmp_path / "charts-repo"
    chart = repo / "charts" / "gpuapp"
    shutil.copytree(FIXTURES / "helm" / "gpuapp", chart)
    _git(repo, "init", "-q")
    proc = _run_hook(hook_repo, repo, extra_path=tool("helm").parent)
    out = proc.stdout + proc.stderr
    assert "unrendered" not in out and "input error:" not in out, out
    findings = re.findall(r"^charts/gpuapp/templates/\S+:\d+:\d+ .*$", out, re.MULTILINE)
    assert any(f.startswith("charts/gpuapp/templates/trainer.yaml:") for f in findings), out  # at the template
    assert len(findings) == len(set(findings)), out  # the chart rendered once


def test_hook_fails_on_a_bad_manifest(hook_repo: tuple[Path, Path], tmp_path: Path) -> None:
    proc = _run_on_manifest(hook_repo, LINT / "pod-limit-missing.yaml", tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "gpuguard" in proc.stdout and "Failed" in proc.stdout
    assert "gpu-pod.yaml:" in proc.stdout and "gpu-limit-missing" in proc.stdout


def test_hook_passes_on_a_good_manifest(hook_repo: tuple[Path, Path], tmp_path: Path) -> None:
    proc = _run_on_manifest(hook_repo, LINT / "pod-good.yaml", tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Passed" in proc.stdout


def test_one_report_per_run_findings_only(hook_repo: tuple[Path, Path], tmp_path: Path) -> None:
    """The hook runs `gpuguard lint --quiet` once over every file (require_serial; pre-commit would
    otherwise split them over one process per CPU): each file's finding once, and no notes
    ("no --cluster given: skipped N rules" on every commit) nor summary."""
    copies = 8
    proc = _run_on_manifest(hook_repo, LINT / "pod-limit-missing.yaml", tmp_path, copies)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    names = ["gpu-pod.yaml", *(f"gpu-pod-{i}.yaml" for i in range(1, copies))]
    for name in names:
        assert len(re.findall(rf"^{re.escape(name)}:\d+:\d+ error gpu-limit-missing ", proc.stdout, re.MULTILINE)) == 1
    assert "note:" not in proc.stdout and "skipped" not in proc.stdout, proc.stdout
    assert not re.search(r"^\d+ errors?, \d+ warnings?, \d+ info; ", proc.stdout, re.MULTILINE), proc.stdout
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hooks[0]["entry"] == "gpuguard lint --quiet" and hooks[0]["require_serial"] is True

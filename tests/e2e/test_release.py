"""One version source, the changelog, the release script, and installing the way the README says.

The release test runs `.ci/release` in a throwaway copy of this repository, then installs from a
`git clone --branch` of the tag it made into a fresh virtual environment, and runs the README's
pre-commit example with `repo:` pointing at that copy and the README's own `rev:`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.support.paths import EXAMPLES, FIXTURES, ROOT
from tests.support.project import git, project_files, snapshot_repo

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
REPO_URL = "https://github.com/gpuguard/gpuguard"
INSTALL_REFS = re.compile(r"git\+https://github\.com/gpuguard/gpuguard@(v\d[\w.]*)|rev: (v\d[\w.]*)|uses: gpuguard/gpuguard@(v\d[\w.]*)")
# Files that may name the version: its source, the files the release script rewrites, the changelog.
MAY_NAME_VERSION = {"pyproject.toml", "README.md", "deploy/deployment.yaml", "deploy/helm/gpuguard/Chart.yaml", "CHANGELOG.md"}


def version_problems(root: Path, version: str) -> list[str]:
    problems = []
    readme = (root / "README.md").read_text()
    refs = [next(g for g in m.groups() if g) for m in INSTALL_REFS.finditer(readme)]
    if len(refs) < 3:
        problems.append(f"README.md: expected pipx, pre-commit and Action references, found {refs}")
    problems += [f"README.md names {ref}, not v{version}" for ref in refs if ref != f"v{version}"]
    changelog = (root / "CHANGELOG.md").read_text()
    sections = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", changelog, re.MULTILINE)
    if not sections or sections[0] != ("Unreleased", ""):
        problems.append("CHANGELOG.md must start with an Unreleased section")
    released = [name for name, date in sections[1:] if date]
    if len(released) != len(sections) - 1:
        problems.append("every released section of CHANGELOG.md needs a date")
    if not released or released[0] != version:
        problems.append(f"the latest release in CHANGELOG.md is {released[:1]}, not {version}")
    for name, _ in sections:
        if not re.search(rf"^\[{re.escape(name)}\]: {re.escape(REPO_URL)}/", changelog, re.MULTILINE):
            problems.append(f"CHANGELOG.md has no link for [{name}]")
    return problems


def test_one_version_source() -> None:
    assert version_problems(ROOT, VERSION) == []
    offenders = []
    for rel in project_files():
        if rel in MAY_NAME_VERSION or rel.startswith(("tests/", "deploy/requirements.lock")):
            continue
        try:
            text = (ROOT / rel).read_text()
        except UnicodeDecodeError:
            continue
        if re.search(rf"(?<![\w.]){re.escape(VERSION)}(?![\w.])", text):
            offenders.append(rel)
    assert offenders == [], f"these files hard-code the version {VERSION}; derive it from pyproject.toml"


def test_version_checks_see_a_stale_reference(tmp_path: Path) -> None:
    for name in ("README.md", "CHANGELOG.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace(f"rev: v{VERSION}", "rev: v0.0.9"))
    assert version_problems(tmp_path, VERSION) == [f"README.md names v0.0.9, not v{VERSION}"]
    assert f"the latest release in CHANGELOG.md is ['{VERSION}'], not 9.9.9" in version_problems(tmp_path, "9.9.9")


def _next_minor(version: str) -> str:
    major, minor, _ = (int(x) for x in version.split("."))
    return f"{major}.{minor + 1}.0"


def _release(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(repo / ".ci" / "release"), *args], cwd=repo, capture_output=True, text=True, timeout=120,
        env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"},
    )


def _with_a_change(repo: Path) -> None:
    """Right after a release the Unreleased section is empty; give the copy a change to release."""
    changelog = repo / "CHANGELOG.md"
    text = changelog.read_text()
    head, sep, rest = text.partition("## [Unreleased]\n")
    if rest.lstrip().startswith("## ["):
        changelog.write_text(f"{head}{sep}\n### Fixed\n\n- A change to release.\n\n{rest.lstrip()}")
        git(repo, "commit", "-q", "-am", "A change to release")


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A copy of the repository after `.ci/release <next minor>`: (its path, the new version)."""
    repo = snapshot_repo(tmp_path_factory.mktemp("release") / "gpuguard")
    _with_a_change(repo)
    new = _next_minor(VERSION)
    proc = _release(repo, new, "--date", "2031-02-03")
    assert proc.returncode == 0, proc.stderr
    assert f"tag v{new}" in proc.stdout
    return repo, new


def test_release_bumps_dates_commits_and_tags(released: tuple[Path, str]) -> None:
    repo, new = released
    assert version_problems(repo, new) == []
    assert git(repo, "describe", "--exact-match", "HEAD").strip() == f"v{new}"
    assert git(repo, "log", "-1", "--format=%s").strip() == f"Release {new}"
    assert git(repo, "status", "--porcelain") == ""
    tagged = tomllib.loads(git(repo, "show", f"v{new}:pyproject.toml"))
    assert tagged["project"]["version"] == new
    assert f"ghcr.io/gpuguard/gpuguard:{new}" in git(repo, "show", f"v{new}:deploy/deployment.yaml")
    chart = yaml.safe_load(git(repo, "show", f"v{new}:deploy/helm/gpuguard/Chart.yaml"))
    assert chart["version"] == chart["appVersion"] == new
    changelog = (repo / "CHANGELOG.md").read_text()
    unreleased, rest = changelog.split("## [Unreleased]\n", 1)[1].split(f"## [{new}] - 2031-02-03\n", 1)
    assert unreleased.strip() == ""
    before = git(repo, "show", "HEAD~1:CHANGELOG.md")  # the commit the release was made from
    old_notes = before.split("## [Unreleased]\n", 1)[1].split("\n## [", 1)[0]
    assert old_notes.strip() and rest.startswith(old_notes)
    assert f"[{new}]: {REPO_URL}/compare/v{VERSION}...v{new}" in changelog
    message = git(repo, "tag", "-l", "--format=%(contents)", f"v{new}")
    first_heading = next(line for line in old_notes.splitlines() if line.startswith("### "))
    assert message.startswith(f"gpuguard {new}") and first_heading in message


def test_release_refuses(released: tuple[Path, str]) -> None:
    repo, new = released
    assert "is not above the current version" in _release(repo, new).stderr
    assert "not a version" in _release(repo, "2.0").stderr
    assert "lists no change" in _release(repo, _next_minor(new)).stderr  # Unreleased is empty now
    (repo / "stray.txt").write_text("x")
    try:
        assert "uncommitted changes" in _release(repo, _next_minor(new)).stderr
    finally:
        (repo / "stray.txt").unlink()
    assert git(repo, "describe", "--exact-match", "HEAD").strip() == f"v{new}"  # nothing changed


@pytest.mark.integration
@pytest.mark.slow
def test_readme_pre_commit_example_against_the_tag(released: tuple[Path, str], tmp_path: Path) -> None:
    """The README's pre-commit example, run against the tag: pre-commit clones the repository at the
    tag and `pip install .`s it into a fresh virtualenv (a fresh install from a clone of the tag,
    whose `gpuguard --version` is the new version), then runs the hook."""
    repo, new = released
    readme = (repo / "README.md").read_text()
    block = readme.split("### pre-commit", 1)[1].split("```yaml", 1)[1].split("```", 1)[0]
    config = yaml.safe_load(block)
    (entry,) = config["repos"]
    assert entry["repo"] == REPO_URL and entry["rev"] == f"v{new}"
    entry["repo"] = str(repo)  # the same repository, here
    project = tmp_path / "project"
    (project / "k8s").mkdir(parents=True)
    (project / "ci").mkdir()
    shutil.copy(EXAMPLES / "cluster.yaml", project / "ci" / "cluster-snapshot.yaml")
    shutil.copy(FIXTURES / "lint" / "pod-limit-missing.yaml", project / "k8s" / "train.yaml")
    (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))
    git(project, "init", "-q")
    git(project, "add", "-A")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "NO_COLOR": "1"}
    pre_commit = Path(sys.executable).parent / "pre-commit"
    proc = subprocess.run(
        [str(pre_commit), "run", "--all-files", "--color", "never"],
        cwd=project, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "k8s/train.yaml:" in proc.stdout and "gpu-limit-missing" in proc.stdout
    assert "no --cluster given" not in proc.stdout  # the example's args were used
    # the hook runs lint --quiet, once: each finding once, no summary line and no notes
    assert len(re.findall(r"^k8s/train.yaml:\d+:\d+ error gpu-limit-missing ", proc.stdout, re.MULTILINE)) == 1
    assert re.findall(r"^\d+ errors?, ", proc.stdout, re.MULTILINE) == []
    (installed,) = (tmp_path / "pre-commit-home").glob("repo*/py_env-*/bin/gpuguard")
    version = subprocess.run([str(installed), "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.strip() == f"gpuguard {new}", version.stderr

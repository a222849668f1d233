"""A throwaway git repository holding this project as it stands in the working tree.

Tests of installation, releases and the GitHub Action work on such a copy: tracked files and
untracked ones that are not ignored (so uncommitted work is tested too), committed once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.paths import ROOT

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def git(cwd: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_IDENTITY}, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
    return proc.stdout


def project_files() -> list[str]:
    listed = git(ROOT, "ls-files", "--cached", "--others", "--exclude-standard", "-z")
    return [rel for rel in listed.split("\0") if rel and (ROOT / rel).is_file()]


def snapshot_repo(dest: Path) -> Path:
    """Copy the project into ``dest`` as a git repository with one commit on branch main."""
    for rel in project_files():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, target)
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "snapshot")
    return dest

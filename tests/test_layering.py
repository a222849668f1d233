"""The dependency contracts in pyproject.toml ([tool.importlinter]) hold for the whole tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.slow


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint_imports), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout

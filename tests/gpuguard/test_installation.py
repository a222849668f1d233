"""gpuguard refuses to run when a foreign distribution's package shadows one of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuguard import installation
from tests.support.paths import ROOT


def test_own_packages_sit_together() -> None:
    assert installation.foreign_packages() == []
    assert installation.problem() is None


def test_a_shadowing_package_is_refused(tmp_path: Path) -> None:
    shadow = tmp_path / "certs"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("WHERE = 'someone else'\n")
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from gpuguard.cli import main; sys.exit(main(['rules']))"],
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,  # `python -c` puts the working directory first on sys.path
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 2
    assert "another distribution's package shadows gpuguard's: certs (" in done.stderr
    assert str(shadow) in done.stderr

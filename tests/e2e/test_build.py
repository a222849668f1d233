"""Building gpuguard's wheel, in a child process, as an install does: the license metadata is the
PEP 639 form (``License-Expression``, ``License-File``) and setuptools prints no deprecation
warning about it (it printed "`project.license` as a TOML table is deprecated" three times, once
per build step, for the old ``license = { text = … }``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.integration  # pip fetches the build backend into an isolated environment

SOURCES = ["pyproject.toml", "README.md", "LICENSE", "gpuguard", "policies", "linter", "webhook", "certs", "audit",
           "whypending"]


def test_the_wheel_carries_the_spdx_license_without_a_warning(tmp_path: Path) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in SOURCES:  # a copy: the build writes build/ and *.egg-info beside the sources
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, source / name)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--wheel-dir", str(tmp_path / "dist"), "-v"],
        capture_output=True, text=True, timeout=600,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "running bdist_wheel" in output or "Building wheel" in output  # -v shows the backend's own output
    assert "project.license" not in output and "SetuptoolsDeprecationWarning" not in output, output[-3000:]
    (wheel,) = (tmp_path / "dist").glob("gpuguard-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        license_file = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
        assert archive.read(license_file) == (ROOT / "LICENSE").read_bytes()
    headers = metadata.split("\n\n", 1)[0].splitlines()
    assert "License-Expression: Apache-2.0" in headers
    assert "License-File: LICENSE" in headers
    assert not any(h.startswith("License: ") for h in headers)  # the legacy field is gone
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0, January 2004" in (ROOT / "LICENSE").read_text()

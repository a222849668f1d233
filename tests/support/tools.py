"""Real command-line tools for tests: helm and kubectl from `.ci/get-tools`, others from PATH.

A test that needs a tool asks ``tool(name)``: it gets the binary's path, or the test is skipped
with a reason naming the tool and how to get it — and under CI (``GPUGUARD_CI=1``), where
`.ci/run` installs everything, it fails instead of skipping.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.paths import IN_CI, ROOT

TOOLS_BIN = ROOT / ".cache" / "tools" / "bin"
GET_TOOLS = ".ci/get-tools"
# kubectl is looked up here first: a kubectl on PATH may be another build (Debian's is older).
FROM_GET_TOOLS = ("helm", "kubectl")


def find_tool(name: str) -> Path | None:
    if name in FROM_GET_TOOLS:
        cached = TOOLS_BIN / name
        return cached if cached.is_file() else None
    found = shutil.which(name)
    return Path(found) if found else None


def tool(name: str, how: str | None = None) -> Path:
    """The path of ``name``; skips (fails under CI) when it is missing."""
    found = find_tool(name)
    if found is not None:
        return found
    how = how or (f"run `bash {GET_TOOLS}`" if name in FROM_GET_TOOLS else f"install {name}")
    message = f"requires {name}: not found ({how})"
    if IN_CI:
        pytest.fail(message + " — .ci/run should have installed it")
    pytest.skip(message)

"""Where the tests find the repository, their fixtures and the shared reference material."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
TESTS = ROOT / "tests"
FIXTURES = TESTS / "fixtures"
EXAMPLES = ROOT / "examples"
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus"
REFERENCE = SHARED / "reference"
SARIF_SCHEMA = REFERENCE / "sarif-schema-2.1.0.json"

# CI always has ../shared beside the checkout; there a missing copy is an error, not a skip.
IN_CI = os.environ.get("GPUGUARD_CI") == "1"


def load_yaml_docs(path: Path) -> list[Any]:
    with path.open() as fh:
        return [d for d in yaml.safe_load_all(fh) if d is not None]


def requires_shared(path: Path = SHARED) -> pytest.MarkDecorator:
    """Skip, naming the missing path, when ``../shared`` is not beside the checkout (never in CI)."""
    missing = not path.exists() and not IN_CI
    return pytest.mark.skipif(missing, reason=f"requires_shared: {path} is not present beside the checkout")

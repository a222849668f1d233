"""Where the tests find the repository, their fixtures, the corpus and the reference material.

Everything the tests read lives in the repository: the public manifest corpus (tests/corpus, with
its SOURCES.tsv and licences) and the reference files data tables are checked against
(tests/reference), so a plain clone runs every test.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
TESTS = ROOT / "tests"
FIXTURES = TESTS / "fixtures"
EXAMPLES = ROOT / "examples"
CORPUS = TESTS / "corpus"
REFERENCE = TESTS / "reference"
SARIF_SCHEMA = REFERENCE / "sarif-schema-2.1.0.json"

IN_CI = os.environ.get("GPUGUARD_CI") == "1"


def load_yaml_docs(path: Path) -> list[Any]:
    with path.open() as fh:  # libyaml's safe loader: the same documents, many times faster
        return [d for d in yaml.load_all(fh, Loader=yaml.CSafeLoader) if d is not None]

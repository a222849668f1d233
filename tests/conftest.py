from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.facts import ClusterFacts

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXAMPLES = ROOT / "examples"
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus"


def load_yaml_docs(path: Path) -> list[Any]:
    with path.open() as fh:
        return [d for d in yaml.safe_load_all(fh) if d is not None]


@pytest.fixture(scope="session")
def example_facts() -> ClusterFacts:
    return ClusterFacts.from_objects(load_yaml_docs(EXAMPLES / "cluster.yaml"), source=str(EXAMPLES / "cluster.yaml"))

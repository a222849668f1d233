from __future__ import annotations

import pytest

from policies.facts import ClusterFacts
from tests.support.paths import EXAMPLES, load_yaml_docs


@pytest.fixture(scope="session")
def example_facts() -> ClusterFacts:
    return ClusterFacts.from_objects(load_yaml_docs(EXAMPLES / "cluster.yaml"), source=str(EXAMPLES / "cluster.yaml"))

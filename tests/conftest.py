from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from policies.facts import ClusterFacts
from policies.facts_build import facts_from_objects
from tests.support.paths import EXAMPLES, IN_CI, load_yaml_docs


@pytest.fixture(scope="session")
def example_facts() -> ClusterFacts:
    return facts_from_objects(load_yaml_docs(EXAMPLES / "cluster.yaml"), source=str(EXAMPLES / "cluster.yaml"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    """Under CI (``GPUGUARD_CI=1``, what .ci/run sets) a skipped test is a failure: CI installs every
    tool the tests use and the repository holds every file they read, so a skip there means a test
    that did not run."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped under CI, which must run every test: {reason}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with slow or integration tests first, each module kept whole (its module fixtures are
    set up once): the workers then start on the long tests and end on short ones, instead of one
    worker idling while the other finishes a half-minute test (longest-first scheduling)."""
    heavy = {item.path for item in items
             if item.get_closest_marker("slow") or item.get_closest_marker("integration")}
    items.sort(key=lambda item: item.path not in heavy)

"""Publishing reports through the API with the real ``kubernetes`` client: create, leave alone, update
with optimistic concurrency, empty stale ones; every stored report valid against its CRD."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpuguard.audit.auditor import Auditor
from gpuguard.audit.dumps import DumpReader
from gpuguard.audit.policyreport import REPORT_NAME, build_reports
from gpuguard.audit.publish import Publisher
from gpuguard.sources.snapshot import load_cluster_facts
from policies.config import Config
from policies.facts import ClusterFacts
from tests.support.fake_apiserver import FakeApiServer, api_client, serving
from tests.support.paths import FIXTURES
from tests.support.reports import POLICYREPORT, validate_report

pytestmark = [pytest.mark.integration(POLICYREPORT)]

AUDIT = FIXTURES / "audit"
BEFORE = load_cluster_facts(str(AUDIT / "cluster-before.yaml"))
AFTER = load_cluster_facts(str(AUDIT / "cluster-after.yaml"))


def reports(facts: ClusterFacts, now: float) -> list[dict[str, Any]]:
    auditor = Auditor(Config(), facts)
    DumpReader(auditor).read([str(AUDIT / "workloads.yaml")])
    return build_reports(auditor.finish(), "policyreport", now)


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer(("policyreports", "clusterpolicyreports"))
    state.absent -= {"policyreports", "clusterpolicyreports"}
    with serving(state):
        yield state


def stored(api: FakeApiServer) -> dict[str, dict[str, Any]]:
    out = {key: obj for key, obj in api.objects["policyreports"].items()}
    out.update({f"/{key}": obj for key, obj in api.objects["clusterpolicyreports"].items()})
    return out


def test_reports_are_created_then_left_alone_while_nothing_changes(api: FakeApiServer) -> None:
    with api_client(api) as c:
        first = Publisher(c).publish(reports(BEFORE, 1000.0))
        assert (first.created, first.updated, first.unchanged, first.errors) == (5, 0, 0, [])
        saved = stored(api)
        assert sorted(saved) == ["/gpuguard-audit", "inference/gpuguard-audit", "ml-train/gpuguard-audit",
                                 "notebooks/gpuguard-audit", "research/gpuguard-audit"]
        for report in saved.values():
            validate_report(report)
            assert report["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpuguard"}
        writes = len(api.writes)
        again = Publisher(c).publish(reports(BEFORE, 2000.0))  # same findings, a later audit
    assert (again.created, again.updated, again.unchanged) == (0, 0, 5)
    assert len(api.writes) == writes  # nothing written


def test_a_changed_report_is_updated_and_known_results_keep_their_timestamps(api: FakeApiServer) -> None:
    with api_client(api) as c:
        Publisher(c).publish(reports(BEFORE, 1000.0))
        changed = Publisher(c).publish(reports(AFTER, 2000.0))
    assert (changed.created, changed.updated, changed.errors) == (0, 4, [])
    research = api.objects["policyreports"]["research/gpuguard-audit"]
    validate_report(research)
    stamps = {(r["resources"][0]["name"], r.get("rule")): r["timestamp"]["seconds"] for r in research["results"]}
    assert stamps == {("jupyter", "gpu-cuda-driver-mismatch"): 2000, ("nightly-eval", "gpu-cuda-driver-mismatch"): 2000,
                      ("mig-probe", None): 2000}
    notebooks = api.objects["policyreports"]["notebooks/gpuguard-audit"]
    by_rule = {r["rule"]: r["timestamp"]["seconds"] for r in notebooks["results"]}
    assert by_rule == {"gpu-shared-memory": 1000, "gpu-taint-not-tolerated": 2000}  # the old finding is known since 1000
    assert [m for m, r, _ in api.writes].count("PUT") == 4


def test_namespaces_without_gpu_workloads_any_more_get_an_empty_report(api: FakeApiServer) -> None:
    with api_client(api) as c:
        Publisher(c).publish(reports(BEFORE, 1000.0))
        fewer = [r for r in reports(BEFORE, 1000.0) if r["metadata"].get("namespace") != "notebooks"]
        result = Publisher(c).publish(fewer)
    assert (result.emptied, result.unchanged) == (1, 4)
    notebooks = api.objects["policyreports"]["notebooks/gpuguard-audit"]
    assert notebooks["results"] == [] and notebooks["summary"] == {"pass": 0, "fail": 0, "warn": 0, "error": 0,
                                                                   "skip": 0}
    validate_report(notebooks)


def test_a_concurrent_write_is_retried_with_a_fresh_read(api: FakeApiServer) -> None:
    class Racing(Publisher):
        raced = False

        def _get(self, namespace: str) -> dict[str, Any] | None:
            found = super()._get(namespace)
            if found is not None and namespace == "research" and not self.raced:
                self.raced = True
                api.put("policyreports", api.objects["policyreports"]["research/gpuguard-audit"])  # another replica
            return found

    with api_client(api) as c:
        Publisher(c).publish(reports(BEFORE, 1000.0))
        result = Racing(c).publish(reports(AFTER, 2000.0))
    assert result.errors == [] and result.updated == 4
    assert [key for method, _, key in api.writes if method == "PUT"].count("research/gpuguard-audit") == 1


def test_without_the_crd_every_report_is_an_error_that_says_so(api: FakeApiServer) -> None:
    api.absent |= {"policyreports", "clusterpolicyreports"}
    with api_client(api) as c:
        result = Publisher(c).publish(reports(BEFORE, 1000.0))
    assert result.created == 0 and len(result.errors) == 6  # the list of existing ones, and five reports
    assert all("the report CRD is not installed" in e for e in result.errors)
    assert REPORT_NAME in result.errors[-1]

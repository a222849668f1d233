"""Reports per namespace and for the cluster, valid against the PolicyReport and OpenReports CRDs."""

from __future__ import annotations

from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from gpuguard.audit import policyreport
from gpuguard.audit.auditor import Auditor
from gpuguard.audit.dumps import DumpReader
from gpuguard.audit.model import LIVE, AuditResult
from gpuguard.audit.policyreport import build_reports
from gpuguard.sources.snapshot import load_cluster_facts
from policies.config import Config
from tests.support.paths import FIXTURES
from tests.support.reports import validate_report

AUDIT = FIXTURES / "audit"
BEFORE = load_cluster_facts(str(AUDIT / "cluster-before.yaml"))
AFTER = load_cluster_facts(str(AUDIT / "cluster-after.yaml"))
NOW = 1764504000.0

# A cluster-scoped object with a GPU template: a Kubeflow Trainer ClusterTrainingRuntime.
RUNTIME: dict[str, Any] = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed-gpu", "uid": "c0ffee00-0000-4000-8000-000000000001"},
    "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {
        "spec": {"containers": [{"name": "node", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                 "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}}}}]}}},
}


def audit(after: bool = False) -> AuditResult:
    auditor = Auditor(Config(), BEFORE, AFTER if after else None, cluster="before",
                      cluster_after="after" if after else None)
    DumpReader(auditor).read([str(AUDIT / "workloads.yaml")])
    auditor.feed(RUNTIME, LIVE)
    return auditor.finish()


@pytest.mark.parametrize("flavour", policyreport.FLAVOURS)
@pytest.mark.parametrize("after", [False, True])
def test_every_report_validates_against_its_crd(flavour: policyreport.Flavour, after: bool) -> None:
    reports = build_reports(audit(after), flavour, NOW)
    for report in reports:
        validate_report(report)
    api = policyreport.APIS[flavour]
    assert [r["kind"] for r in reports] == [api.kind] * 4 + [api.cluster_kind]
    # web has no GPU workload, kube-system is exempt: no report there
    assert [r["metadata"].get("namespace") for r in reports] == ["inference", "ml-train", "notebooks", "research",
                                                                 None]
    if flavour == "openreports":
        assert all(r["source"] == "gpuguard" for r in reports)


def test_results_map_findings_and_clean_workloads() -> None:
    by_ns = {r["metadata"].get("namespace", ""): r for r in build_reports(audit(), "policyreport", NOW)}
    research = by_ns["research"]
    assert research["summary"] == {"pass": 0, "fail": 1, "warn": 2, "error": 0, "skip": 0}
    fail = research["results"][0]
    assert fail == {
        "policy": "gpuguard", "rule": "gpu-resource-unknown", "result": "fail", "severity": "high",
        "category": "GPU", "scored": True, "source": "gpuguard", "message": fail["message"],
        "timestamp": {"seconds": 1764504000, "nanos": 0},
        "resources": [{"apiVersion": "batch/v1", "kind": "Job", "name": "mig-probe", "namespace": "research",
                       "uid": "5f0c2a7e-91d3-4b6a-8e2f-000000000040"}],
        "properties": {"path": "spec.template.spec.containers[0].resources.limits[nvidia.com/mig-1g.10gb]",
                       "remediation": fail["properties"]["remediation"]},
    }
    assert {(r["rule"], r["severity"]) for r in research["results"][1:]} == {("gpu-cuda-driver-mismatch", "info")}
    inference = by_ns["inference"]
    assert inference["summary"]["pass"] == 2  # vllm-llama and t4-batch are fine today
    assert {r["resources"][0]["name"] for r in inference["results"]} == {"vllm-llama", "t4-batch"}
    assert "web" not in by_ns
    cluster = by_ns[""]
    assert {(r["rule"], r["resources"][0]["kind"]) for r in cluster["results"]} == {
        ("gpu-taint-not-tolerated", "ClusterTrainingRuntime"), ("gpu-shared-memory", "ClusterTrainingRuntime"),
        ("gpu-memory-limit-missing", "ClusterTrainingRuntime")}
    assert cluster["summary"] == {"pass": 0, "fail": 1, "warn": 2, "error": 0, "skip": 0}
    assert "namespace" not in cluster["results"][0]["resources"][0]


def test_with_a_planned_change_results_describe_the_planned_cluster() -> None:
    by_ns = {r["metadata"].get("namespace", ""): r for r in build_reports(audit(True), "openreports", NOW)}
    research = by_ns["research"]["results"]
    assert "gpu-resource-unknown" not in {r.get("rule") for r in research}  # resolved: no longer reported
    changes = {(r["resources"][0]["name"], r["properties"].get("change"), r["properties"].get("previousSeverity"))
               for r in research if r["result"] != "pass"}
    assert changes == {("jupyter", "introduced", "info"), ("nightly-eval", "introduced", "info")}
    assert [r["result"] for r in research if r["resources"][0]["name"] == "mig-probe"] == ["pass"]


def test_reports_stay_small_and_say_what_they_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policyreport, "MAX_RESULTS", 2)
    monkeypatch.setattr(policyreport, "MAX_MESSAGE", 40)
    by_ns = {r["metadata"].get("namespace", ""): r for r in build_reports(audit(), "policyreport", NOW)}
    research = by_ns["research"]
    assert len(research["results"]) == 2 and research["summary"]["fail"] + research["summary"]["warn"] == 3
    assert research["metadata"]["annotations"] == {"gpuguard.io/results-omitted": "1"}
    assert research["results"][0]["result"] == "fail"  # failures are kept first
    assert all(len(r["message"]) <= 40 for r in research["results"])
    validate_report(research)


def test_the_strict_validator_catches_undeclared_fields() -> None:
    report = build_reports(audit(), "policyreport", NOW)[0]
    report["results"][0]["status"] = "fail"  # v1alpha1's field name, pruned by a v1alpha2 server
    with pytest.raises(jsonschema.ValidationError):
        validate_report(report)
    report = build_reports(audit(), "policyreport", NOW)[0]
    report["results"][0]["severity"] = "error"  # not in the enum
    with pytest.raises(jsonschema.ValidationError):
        validate_report(report)

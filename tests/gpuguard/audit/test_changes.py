"""Introduced, resolved and unchanged: matched by policies.identity, a raised severity is introduced."""

from __future__ import annotations

from gpuguard.audit.changes import classify
from policies.types import Finding, Severity

OBJ = {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}


def finding(rule: str, path: str, severity: Severity = Severity.ERROR, message: str = "m") -> Finding:
    return Finding(rule, severity, message, path, "fix", "Pod", "p", "ml")


def test_each_finding_is_sorted_once() -> None:
    kept = finding("gpu-shared-memory", "/spec/containers/0", Severity.WARNING)
    gone = finding("gpu-resource-unknown", "/spec/containers/1/resources")
    new = finding("gpu-taint-not-tolerated", "/spec/tolerations")
    out = classify(OBJ, [kept, gone], [kept, new])
    assert {(s.finding.rule, s.change, s.previous) for s in out} == {
        ("gpu-shared-memory", "unchanged", None),
        ("gpu-taint-not-tolerated", "introduced", None),
        ("gpu-resource-unknown", "resolved", None),
    }


def test_a_finding_that_gets_worse_is_introduced_and_one_that_eases_is_unchanged() -> None:
    path = "/spec/containers/0/image"
    worse = classify(OBJ, [finding("gpu-cuda-driver-mismatch", path, Severity.INFO)],
                     [finding("gpu-cuda-driver-mismatch", path, Severity.WARNING, "other words")])
    assert [(s.change, s.previous) for s in worse] == [("introduced", Severity.INFO)]
    eased = classify(OBJ, [finding("gpu-cuda-driver-mismatch", path, Severity.ERROR)],
                     [finding("gpu-cuda-driver-mismatch", path, Severity.WARNING)])
    assert [(s.change, s.previous) for s in eased] == [("unchanged", Severity.ERROR)]


def test_the_same_rule_on_two_containers_stays_two_findings() -> None:
    a = finding("gpu-cuda-driver-mismatch", "/spec/containers/0/image")
    b = finding("gpu-cuda-driver-mismatch", "/spec/containers/1/image")
    out = classify(OBJ, [a], [a, b])
    assert sorted((s.finding.path, s.change) for s in out) == [
        ("/spec/containers/0/image", "unchanged"), ("/spec/containers/1/image", "introduced")]

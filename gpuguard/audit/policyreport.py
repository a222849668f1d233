"""An audit as policy reports: one per namespace, and one cluster-wide report for cluster-scoped objects.

Two APIs, both validated against their CRDs (tests/reference/policyreport/, copied unmodified
from kubernetes-sigs/wg-policy-prototypes and openreports/reports-api):

* ``wgpolicyk8s.io/v1alpha2`` PolicyReport / ClusterPolicyReport (Kyverno, Policy Reporter);
* ``openreports.io/v1alpha1`` Report / ClusterReport (their successor), which adds a top-level
  ``source``.

Each finding is a result with policy ``gpuguard``, its rule id, ``fail`` for errors and ``warn`` for
warnings and info (the CRD: "warn … unscored policies whose requirements were not met"), a
severity (error → ``high``, warning → ``medium``, info → ``info``; the CRDs' enum is critical,
high, medium, low, info), the object as a resource reference, ``source: gpuguard``, a timestamp
and, as string properties, the field, the remediation and, with ``--cluster-after``, the change.
Each GPU workload without findings gets one ``pass`` result, so a report also says what was judged
clean.  Summaries count every result; a report holds at most ``MAX_RESULTS`` of them (failures
first) so it stays well under etcd's request size limit, and says how many it left out.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from gpuguard.audit.model import AuditFinding, AuditResult, ObjectRef
from policies import pointer
from policies.types import Severity

Flavour = Literal["policyreport", "openreports"]
FLAVOURS: tuple[Flavour, ...] = ("policyreport", "openreports")
POLICY = "gpuguard"
SOURCE = "gpuguard"
CATEGORY = "GPU"
REPORT_NAME = "gpuguard-audit"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpuguard"}
OMITTED_ANNOTATION = "gpuguard.io/results-omitted"
MAX_RESULTS = 500
MAX_MESSAGE = 1024
RESULT = {Severity.ERROR: "fail", Severity.WARNING: "warn", Severity.INFO: "warn"}
SEVERITY = {Severity.ERROR: "high", Severity.WARNING: "medium", Severity.INFO: "info"}
_ORDER = {"fail": 0, "warn": 1, "error": 2, "skip": 3, "pass": 4}


@dataclass(frozen=True, slots=True)
class ReportApi:
    group: str
    version: str
    kind: str
    cluster_kind: str
    plural: str
    cluster_plural: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


APIS: dict[Flavour, ReportApi] = {
    "policyreport": ReportApi("wgpolicyk8s.io", "v1alpha2", "PolicyReport", "ClusterPolicyReport",
                              "policyreports", "clusterpolicyreports"),
    "openreports": ReportApi("openreports.io", "v1alpha1", "Report", "ClusterReport", "reports", "clusterreports"),
}


def _timestamp(now: float) -> dict[str, int]:
    return {"seconds": int(now), "nanos": 0}


def _message(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def finding_result(f: AuditFinding, now: float) -> dict[str, Any]:
    properties = {"path": pointer.to_dotted(f.finding.path) if f.finding.path else "",
                  "remediation": f.finding.remediation}
    if f.change is not None:
        properties["change"] = f.change
    if f.previous_severity is not None:
        properties["previousSeverity"] = str(f.previous_severity)
    return {
        "policy": POLICY,
        "rule": f.finding.rule,
        "result": RESULT[f.severity],
        "severity": SEVERITY[f.severity],
        "category": CATEGORY,
        "scored": True,
        "source": SOURCE,
        "message": _message(f.finding.message),
        "timestamp": _timestamp(now),
        "resources": [f.ref.to_dict()],
        "properties": properties,
    }


def pass_result(ref: ObjectRef, now: float) -> dict[str, Any]:
    return {
        "policy": POLICY,
        "result": "pass",
        "category": CATEGORY,
        "scored": True,
        "source": SOURCE,
        "message": "gpuguard found no GPU problem",
        "timestamp": _timestamp(now),
        "resources": [ref.to_dict()],
    }


def summary_of(results: Iterable[dict[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(("pass", "fail", "warn", "error", "skip"), 0)
    for r in results:
        counts[r["result"]] += 1
    return counts


def _report(api: ReportApi, flavour: Flavour, namespace: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    results = sorted(results, key=lambda r: (_ORDER[r["result"]], r.get("rule", ""), r["resources"][0]["name"]))
    meta: dict[str, Any] = {"name": REPORT_NAME, "labels": dict(MANAGED_BY)}
    if namespace:
        meta["namespace"] = namespace
    kept = results[:MAX_RESULTS]
    if len(kept) < len(results):
        meta["annotations"] = {OMITTED_ANNOTATION: str(len(results) - len(kept))}
    report: dict[str, Any] = {
        "apiVersion": api.api_version,
        "kind": api.kind if namespace else api.cluster_kind,
        "metadata": meta,
    }
    if flavour == "openreports":
        report["source"] = SOURCE
    report["summary"] = summary_of(results)
    report["results"] = kept
    return report


def empty_report(flavour: Flavour, namespace: str) -> dict[str, Any]:
    return _report(APIS[flavour], flavour, namespace, [])


def build_reports(result: AuditResult, flavour: Flavour = "policyreport", now: float | None = None,
                  namespaces: Iterable[str] = ()) -> list[dict[str, Any]]:
    """One report per namespace with audited GPU workloads (and per name in ``namespaces``, empty if
    need be), then the cluster report for cluster-scoped objects (always, empty if need be)."""
    api = APIS[flavour]
    when = time.time() if now is None else now
    by_namespace: dict[str, list[dict[str, Any]]] = {ns: [] for ns in (*namespaces, "")}
    flagged: set[str] = set()
    for f in result.current():
        by_namespace.setdefault(f.ref.namespace, []).append(finding_result(f, when))
        flagged.add(f.ref.key)
    for ref in result.gpu_objects:
        if ref.key not in flagged:
            by_namespace.setdefault(ref.namespace, []).append(pass_result(ref, when))
    order = sorted(by_namespace, key=lambda ns: (ns == "", ns))
    return [_report(api, flavour, ns, by_namespace[ns]) for ns in order]

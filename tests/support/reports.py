"""Validate policy reports against the CRDs in tests/reference/policyreport (unmodified copies).

The API server validates a custom resource against its CRD's ``openAPIV3Schema`` and silently
prunes fields the schema does not declare.  A pruned field is a field lost, so these validators are
stricter than the server: every object schema that declares ``properties`` gets
``additionalProperties: false`` (except where the CRD allows more), and a report with an undeclared
field fails instead of losing it.
"""

from __future__ import annotations

import copy
from functools import cache
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import yaml

from tests.support.paths import REFERENCE

POLICYREPORT = REFERENCE / "policyreport"
CRD_FILES = {
    ("wgpolicyk8s.io/v1alpha2", "PolicyReport"): "v1alpha2-wgpolicyk8s.io_policyreports.yaml",
    ("wgpolicyk8s.io/v1alpha2", "ClusterPolicyReport"): "v1alpha2-wgpolicyk8s.io_clusterpolicyreports.yaml",
    ("openreports.io/v1alpha1", "Report"): "openreports.io_reports.yaml",
    ("openreports.io/v1alpha1", "ClusterReport"): "openreports.io_clusterreports.yaml",
}


def _strict(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@cache
def validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    crd = yaml.safe_load((POLICYREPORT / CRD_FILES[(api_version, kind)]).read_text())
    assert crd["spec"]["names"]["kind"] == kind
    version = api_version.rpartition("/")[2]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    assert served["served"] is True
    schema = _strict(copy.deepcopy(served["schema"]["openAPIV3Schema"]))
    schema["properties"]["metadata"] = {"type": "object"}  # ObjectMeta: validated by the API server itself
    return jsonschema.Draft7Validator(schema)


def validate_report(report: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError naming the first problem."""
    errors = sorted(validator(report["apiVersion"], report["kind"]).iter_errors(report), key=lambda e: list(e.path))
    if errors:
        raise errors[0]
    meta = report["metadata"]
    assert isinstance(meta.get("name"), str) and meta["name"]
    namespaced = report["kind"] in ("PolicyReport", "Report")
    assert bool(meta.get("namespace")) == namespaced, f"{report['kind']} namespace: {meta.get('namespace')!r}"

"""The issue's JSON: ``{"pods": [{"name", "namespace", "gpus", "reasons": [{"kind", "message",
"nodes"?, "pods"?}]}], "cluster": {"pools": [{"name", "resource", "allocatable", "allocated", "free",
"idle"?}]}}``.  Notes (Prometheus trouble, pods not found) go to stderr, so stdout stays this shape."""

from __future__ import annotations

import json

from whypending.report import Report


def render(report: Report) -> str:
    return json.dumps(report.diagnosis.to_dict(), indent=2, ensure_ascii=False) + "\n"

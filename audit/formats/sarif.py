"""``--format sarif``: SARIF 2.1.0, each result naming the cluster object it is about.

The object is a logical location (``namespace/Kind/name``, kind ``object``); for dumps the result
also points at the file and line the object was read from.  Properties carry the object
reference, the field and, with ``--cluster-after``, the change.  Input errors (and kinds that could
not be listed) are tool execution notifications.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from gpuguard.audit.model import AuditFinding, AuditResult
from gpuguard.sarif import LEVEL, log, rule_index


def _locations(f: AuditFinding) -> dict[str, Any]:
    location: dict[str, Any] = {
        "logicalLocations": [{"fullyQualifiedName": f.ref.qualified(), "name": f.ref.name, "kind": "object"}]
    }
    if f.origin.file is not None:
        location["physicalLocation"] = {
            "artifactLocation": {"uri": f.origin.file},
            "region": {"startLine": max(f.origin.line or 1, 1)},
        }
    return location


def as_dict(result: AuditResult) -> dict[str, Any]:
    index = rule_index()
    results = []
    for f in result.findings:
        props: dict[str, Any] = {
            "path": f.finding.path,
            "remediation": f.finding.remediation,
            "object": f.ref.to_dict(),
        }
        if f.change is not None:
            props["change"] = f.change
        if f.previous_severity is not None:
            props["previousSeverity"] = str(f.previous_severity)
        item: dict[str, Any] = {
            "ruleId": f.finding.rule,
            "level": LEVEL[f.severity],
            "message": {"text": f.finding.message},
            "locations": [_locations(f)],
            "properties": props,
        }
        if f.change == "resolved":
            item["kind"] = "pass"  # SARIF: the rule was evaluated and no problem was found
            item["level"] = "none"
        if f.finding.rule in index:
            item["ruleIndex"] = index[f.finding.rule]
        results.append(item)
    notifications = [
        {"level": "error", "message": {"text": e.message},
         "locations": [{"physicalLocation": {"artifactLocation": {"uri": e.file},
                                             **({"region": {"startLine": e.line}} if e.has_line else {})}}]}
        for e in result.errors
    ]
    return log(results, notifications, {"summary": result.summary()})


def render(result: AuditResult, stream: TextIO) -> None:
    json.dump(as_dict(result), stream, indent=2, default=str)
    stream.write("\n")

"""``--format sarif``: SARIF 2.1.0 for GitHub code scanning and other SARIF consumers.

Rule metadata comes from the registry; every result carries the exact region of its finding and
an artifact URI relative to the working directory.  Input errors are tool execution notifications.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from linter.report import Report
from policies.registry import RULES
from policies.rule import rule_doc
from policies.types import Severity

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
STDIN_URI = "stdin"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpuguard")
    except PackageNotFoundError:
        return "0.0.0"


def artifact_uri(file: str) -> str:
    if file in ("-", "<stdin>"):
        return STDIN_URI
    path = Path(file)
    try:
        rel = os.path.relpath(path.resolve(), Path.cwd())
    except ValueError:  # another drive on Windows
        rel = str(path.resolve())
    return quote(Path(rel).as_posix())


def _rule(rule_id: str) -> dict[str, Any]:
    module = RULES[rule_id]
    doc = rule_doc(module)
    first = doc.split("\n\n", 1)[0].replace("\n", " ")
    return {
        "id": rule_id,
        "name": "".join(part.capitalize() for part in rule_id.split("-")),
        "shortDescription": {"text": module.SUMMARY},
        "fullDescription": {"text": first},
        "help": {"text": f"{doc}\n\nRemediation: {module.REMEDIATION}"},
        "defaultConfiguration": {"level": LEVEL[module.DEFAULT_SEVERITY]},
        "properties": {"needsFacts": module.NEEDS_FACTS, "fixable": bool(module.FIXABLE)},
    }


def as_dict(report: Report) -> dict[str, Any]:
    rule_ids = list(RULES)
    index = {rid: i for i, rid in enumerate(rule_ids)}
    results = []
    for f in report.findings:
        props: dict[str, Any] = {
            "path": f.finding.path,
            "kind": f.finding.kind,
            "name": f.finding.name,
            "namespace": f.finding.namespace,
            "remediation": f.finding.remediation,
        }
        if f.source:
            props["source"] = f.source
        if f.finding.fix:
            props["fix"] = f.finding.fix_dicts()
        result: dict[str, Any] = {
            "ruleId": f.finding.rule,
            "level": LEVEL[f.finding.severity],
            "message": {"text": f.finding.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": artifact_uri(f.file)},
                        "region": {"startLine": f.line, "startColumn": f.column},
                    }
                }
            ],
            "properties": props,
        }
        if f.finding.rule in index:
            result["ruleIndex"] = index[f.finding.rule]
        results.append(result)
    notifications = [
        {
            "level": "error",
            "message": {"text": e.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": artifact_uri(e.file)},
                        "region": {"startLine": max(e.line, 1)},
                    }
                }
            ],
        }
        for e in report.all_errors
    ]
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "gpuguard",
                        "version": _version(),
                        "rules": [_rule(rid) for rid in rule_ids],
                    }
                },
                "invocations": [
                    {
                        "executionSuccessful": not notifications,
                        "toolExecutionNotifications": notifications,
                    }
                ],
                "results": results,
            }
        ],
    }


def render(report: Report, stream: TextIO) -> None:
    json.dump(as_dict(report), stream, indent=2)
    stream.write("\n")

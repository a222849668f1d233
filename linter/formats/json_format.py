"""``--format json``: one object with findings, input errors and a summary."""

from __future__ import annotations

import json
from typing import Any, TextIO

from linter.report import Report


def as_dict(report: Report) -> dict[str, Any]:
    return {
        "findings": [f.to_dict() for f in report.findings],
        "errors": [{"file": e.file, "line": e.json_line(), "message": e.message} for e in report.all_errors],
        "summary": report.summary(),
    }


def render(report: Report, stream: TextIO) -> None:
    """The same text as ``json.dump(as_dict(report), indent=2)``, written one finding at a time so
    that a run with a hundred thousand findings does not build them all as dicts first."""
    rest = json.dumps({
        "findings": [],
        "errors": [{"file": e.file, "line": e.json_line(), "message": e.message} for e in report.all_errors],
        "summary": report.summary(),
    }, indent=2, default=str)
    head = '{\n  "findings": []'
    assert rest.startswith(head)
    findings = report.findings
    if not findings:
        stream.write(rest + "\n")
        return
    stream.write('{\n  "findings": [\n')
    last = len(findings) - 1
    for i, finding in enumerate(findings):
        text = json.dumps(finding.to_dict(), indent=2, default=str)
        stream.write("    " + text.replace("\n", "\n    ") + (",\n" if i < last else "\n"))
    stream.write("  ]" + rest[len(head):] + "\n")

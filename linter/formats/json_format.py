"""``--format json``: one object with findings, input errors and a summary."""

from __future__ import annotations

import json
from typing import Any, TextIO

from linter.report import Report


def as_dict(report: Report) -> dict[str, Any]:
    return {
        "findings": [f.to_dict() for f in report.findings],
        "errors": [{"file": e.file, "line": e.line, "message": e.message} for e in report.all_errors],
        "summary": report.summary(),
    }


def render(report: Report, stream: TextIO) -> None:
    json.dump(as_dict(report), stream, indent=2, default=str)
    stream.write("\n")

"""``--format sarif``: SARIF 2.1.0 for GitHub code scanning and other SARIF consumers.

Rule metadata comes from the registry; every result carries the exact region of its finding and
an artifact URI relative to the working directory.  Input errors are tool execution notifications.
Helm output read from stdin is reported at the chart templates its `# Source:` comments name
(see linter.artifacts): the region is then inside the rendered document, which the result's
message and its ``helm`` property say, with the line in the rendered stream.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from gpuguard.sarif import LEVEL, SCHEMA, log, rule_index
from linter.artifacts import Place, Placer
from linter.report import Report

__all__ = ["LEVEL", "SCHEMA", "artifact_uri", "as_dict", "render"]
STDIN_URI = "stdin"


def artifact_uri(file: str) -> str:
    if file in ("-", "<stdin>"):
        return STDIN_URI
    path = Path(file)
    try:
        rel = os.path.relpath(path.resolve(), Path.cwd())
    except ValueError:  # another drive on Windows
        rel = str(path.resolve())
    return quote(Path(rel).as_posix())


def _location(place: Place) -> dict[str, Any]:
    """The physical location; without a line (a file that cannot be read) the artifact alone,
    which SARIF allows (``region`` is not required in the sarif-2.1.0 schema's physicalLocation)."""
    physical: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(place.file)}}
    if place.line > 0:
        region: dict[str, Any] = {"startLine": place.line}
        if place.column is not None:
            region["startColumn"] = place.column
        physical["region"] = region
    return {"physicalLocation": physical}


def _helm(place: Place) -> dict[str, Any]:
    assert place.rendered is not None
    return {
        "template": place.rendered.template,
        "regionIn": "rendered-document",
        "renderedFrom": place.rendered.stream,
        "renderedLine": place.rendered.line,
    }


def as_dict(report: Report) -> dict[str, Any]:
    index = rule_index()
    placer = Placer(report)
    results = []
    for f in report.findings:
        place = placer.place(f.file, f.line, f.column)
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
        message = f.finding.message
        if place.rendered:
            props["helm"] = _helm(place)
            message += f" ({place.note()})"
        result: dict[str, Any] = {
            "ruleId": f.finding.rule,
            "level": LEVEL[f.finding.severity],
            "message": {"text": message},
            "locations": [_location(place)],
            "properties": props,
        }
        if f.finding.rule in index:
            result["ruleIndex"] = index[f.finding.rule]
        results.append(result)
    notifications = []
    for e in report.all_errors:
        place = placer.place(e.file, e.line, None)
        notification: dict[str, Any] = {
            "level": "error",
            "message": {"text": f"{e.message} ({place.note()})" if place.rendered else e.message},
            "locations": [_location(place)],
        }
        if place.rendered:
            notification["properties"] = {"helm": _helm(place)}
        notifications.append(notification)
    return log(results, notifications)


def render(report: Report, stream: TextIO) -> None:
    json.dump(as_dict(report), stream, indent=2)
    stream.write("\n")

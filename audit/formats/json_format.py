"""``--format json``: ``{"findings": [...], "errors": [...], "summary": {...}}``, the shape of ``lint``'s.

Each finding carries the object's ``kind``, ``name``, ``namespace``, ``uid`` and ``apiVersion``; the
dump file and line it was read from (not for a live cluster); ``owned``, the objects reported
through it (its pods, ReplicaSets…), when there are any; and with ``--cluster-after`` its
``change`` (introduced, resolved or unchanged) and, when the change altered it, its
``previous_severity``.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from gpuguard.audit.model import AuditFinding, AuditResult


def finding_dict(f: AuditFinding, result: AuditResult) -> dict[str, Any]:
    out = f.to_dict()
    owned = result.pods_through(f.ref)
    if owned:
        out["owned"] = owned
    return out


def as_dict(result: AuditResult) -> dict[str, Any]:
    return {
        "findings": [finding_dict(f, result) for f in result.findings],
        "errors": [{"file": e.file, "line": e.json_line(), "message": e.message} for e in result.errors],
        "summary": result.summary(),
    }


def render(result: AuditResult, stream: TextIO) -> None:
    """The text of ``json.dump(as_dict(result), indent=2)``, written one finding at a time."""
    rest = json.dumps({
        "findings": [],
        "errors": [{"file": e.file, "line": e.json_line(), "message": e.message} for e in result.errors],
        "summary": result.summary(),
    }, indent=2, default=str)
    head = '{\n  "findings": []'
    if not result.findings:
        stream.write(rest + "\n")
        return
    stream.write('{\n  "findings": [\n')
    last = len(result.findings) - 1
    for i, f in enumerate(result.findings):
        text = json.dumps(finding_dict(f, result), indent=2, default=str)
        stream.write("    " + text.replace("\n", "\n    ") + (",\n" if i < last else "\n"))
    stream.write("  ]" + rest[len(head):] + "\n")

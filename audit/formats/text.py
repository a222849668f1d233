"""``--format text``: findings per object (with ``--cluster-after``: introduced first), notes, pools, summary.

On a terminal the lines wrap to its width (gpuguard.terminal.width; the pool table never does); in a
pipe every line is whole.  ``quiet`` keeps the findings and input errors only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TextIO

from gpuguard.audit.model import CHANGES, AuditFinding, AuditResult
from gpuguard.terminal import NO_WRAP, SEVERITY_COLOURS, Paint, plural, use_colour, width, wrap
from policies import pointer

_CHANGE_COLOURS = {"introduced": "31", "resolved": "32", "unchanged": "2"}


def _where(f: AuditFinding) -> str:
    if f.origin.file is None:
        return ""
    return f" ({f.origin.file}:{f.origin.line})" if f.origin.line else f" ({f.origin.file})"


def _finding(f: AuditFinding, result: AuditResult, paint: Paint, show_object: bool, cols: int = NO_WRAP) -> list[str]:
    sev = f.severity
    severity = str(sev)
    if f.previous_severity is not None:
        severity += f" (was {f.previous_severity})"
    head = f"  {paint(SEVERITY_COLOURS[sev], severity)} {paint('1', f.finding.rule)}"
    if show_object:
        owned = result.pods_through(f.ref)
        through = f" [+{owned} owned]" if owned else ""
        head += f" {paint('1', f.ref.qualified())}{through}{_where(f)}"
    field = pointer.to_dotted(f.finding.path) if f.finding.path else ""
    lines = wrap(f"at {field}", cols, head + " ", "      ") if field else wrap(head, cols, rest="      ")
    lines += wrap(f.finding.message, cols, "      ", "      ")
    lines += wrap(f.finding.remediation, cols, f"      {paint('2', 'fix:')} ", "           ")
    return lines


def _by_object(findings: Iterable[AuditFinding], result: AuditResult, paint: Paint, cols: int = NO_WRAP) -> list[str]:
    lines: list[str] = []
    current = None
    for f in findings:
        if f.ref.key != current:
            current = f.ref.key
            owned = result.pods_through(f.ref)
            through = f"; {plural(owned, 'owned object')} reported with it" if owned else ""
            lines += wrap(f"{paint('1', f.ref.qualified())}{_where(f)}{paint('2', through)}", cols, rest="    ")
        lines.extend(_finding(f, result, paint, show_object=False, cols=cols))
    return lines


def _diff(result: AuditResult, paint: Paint, cols: int = NO_WRAP) -> list[str]:
    lines = [f"planned change: {result.cluster} -> {result.cluster_after}"]
    for change in CHANGES:
        found = sorted(result.by_change(change),
                       key=lambda f: (-f.severity, f.ref.namespace, f.ref.kind, f.ref.name, f.finding.rule))
        lines.append("")
        lines.append(paint(_CHANGE_COLOURS[change], f"{change.upper()} ({len(found)})"))
        for f in found:
            lines.extend(_finding(f, result, paint, show_object=True, cols=cols))
    return lines


def _pools(result: AuditResult) -> list[str]:
    if not result.pools:
        return []
    idle = any("idle" in p for p in result.pools)
    headers = ["pool", "resource", "nodes", "allocatable", "allocated", "free"] + (["idle"] if idle else [])
    rows = [[str(p["name"]), str(p["resource"]), str(p["nodes"]), str(p["allocatable"]), str(p["allocated"]),
             str(p["free"])] + ([str(p.get("idle", "-"))] if idle else []) for p in result.pools]
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    out = ["", "GPU pools:"]
    for row in [headers, *rows]:
        out.append("  " + "  ".join(cell.ljust(w) if i < 2 else cell.rjust(w)
                                    for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip())
    return out


def render(
    result: AuditResult, stream: TextIO, colour: bool | None = None, quiet: bool = False, cols: int | None = None
) -> None:
    paint = Paint(use_colour(stream) if colour is None else colour)
    cols = width(stream) if cols is None else cols
    lines = _diff(result, paint, cols) if result.compares else _by_object(result.findings, result, paint, cols)
    for e in result.errors:
        where = e.location()
        head = f"{paint('1', where)}: " if where else ""
        lines += wrap(f"{head}{paint('31', 'input error')}: {e.message}", cols, rest="    ")
    if quiet:
        stream.write("".join(line + "\n" for line in lines))
        return
    for note in result.notes:
        lines += wrap(note, cols, f"{paint('2', 'note')}: ", "      ")
    lines.extend(_pools(result))
    c = result.counts
    counts = result.severity_counts()
    tail = (f"{plural(counts['error'], 'error')}, {plural(counts['warning'], 'warning')}, "
            f"{plural(counts['info'], 'info')}")
    if result.compares:
        changes = result.change_counts()
        introduced = result.severity_counts(result.by_change("introduced"))
        tail = (f"{changes['introduced']} introduced ({plural(introduced['error'], 'error')}, "
                f"{plural(introduced['warning'], 'warning')}, {plural(introduced['info'], 'info')}), "
                f"{changes['resolved']} resolved, {changes['unchanged']} unchanged; after the change: " + tail)
    lines += wrap(
        f"{tail}; {plural(len(result.errors), 'input error')} ({plural(c.objects, 'object')} judged, "
        f"{plural(c.gpu_workloads, 'GPU workload')}, {c.through_owners} reported through their owners)",
        cols, rest="    ",
    )
    stream.write("\n".join(lines) + "\n")

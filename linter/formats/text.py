"""``--format text``: one line per finding, the offending source line with a caret, a summary."""

from __future__ import annotations

import os
from typing import TextIO

from linter.lint import Located
from linter.report import Report
from policies.types import Severity

_COLOURS = {Severity.ERROR: "31", Severity.WARNING: "33", Severity.INFO: "36"}


def use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _Paint:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 or word == "info" else f"{n} {word}s"


def _excerpt(f: Located, lines: dict[int, str], paint: _Paint) -> list[str]:
    if f.line not in lines:
        return []
    gutter = str(f.line)
    source = lines[f.line].rstrip("\r\n").expandtabs(1)
    return [
        f"  {paint('2', gutter)} | {source}",
        f"  {' ' * len(gutter)} | {' ' * (f.column - 1)}{paint(_COLOURS[f.finding.severity], '^')}",
    ]


def render(report: Report, stream: TextIO, colour: bool | None = None) -> None:
    paint = _Paint(use_colour(stream) if colour is None else colour)
    for result in report.results:
        lines = result.excerpts
        for f in result.findings:
            sev = f.finding.severity
            head = f"{f.file}:{f.line}:{f.column}"
            stream.write(
                f"{paint('1', head)} {paint(_COLOURS[sev], str(sev))} {paint('1', f.finding.rule)} "
                f"{f.finding.message}\n"
            )
            if f.source:
                stream.write(f"  {paint('2', 'from Helm template')} {f.source}\n")
            for line in _excerpt(f, lines, paint):
                stream.write(line + "\n")
    for e in report.all_errors:
        where = f"{e.file}:{e.line}" if e.line > 0 else e.file
        stream.write(f"{paint('1', where)}: {paint('31', 'input error')}: {e.message}\n")
    for cluster_note in report.cluster_notes():
        stream.write(f"{paint('2', 'note')}: cluster: {cluster_note}\n")
    note = report.skipped_note()
    if note:
        stream.write(f"{paint('2', 'note')}: {note}\n")
    if report.fixed_files:
        stream.write(f"fixed {_plural(len(report.fixed_files), 'file')}: {', '.join(report.fixed_files)}\n")
    s = report.summary()
    counts = s["by_severity"]
    stream.write(
        f"{_plural(counts['error'], 'error')}, {_plural(counts['warning'], 'warning')}, "
        f"{_plural(counts['info'], 'info')}; {_plural(s['input_errors'], 'input error')} "
        f"({_plural(s['files'], 'file')}, {_plural(s['documents'], 'document')}, "
        f"{_plural(s['objects'], 'object')} checked)\n"
    )

"""Which file a SARIF result or GitHub annotation names, and where in it.

A finding in a file is reported at that file's own line and column.  Helm output read from stdin
(`helm template … | gpuguard lint -`) exists in no repository, so a document headed by Helm's
`# Source: chart/templates/x.yaml` comment is reported at that template instead, as Helm prints
its path (with ``--helm-chart DIR``: the first path segment, the chart's name, becomes DIR, so the
path is the template's path in the repository).  Its line and column are the position inside the
rendered document, counted from the line after the `# Source:` comment: they equal the
template's own line only where no directive (`{{- include … | nindent }}`, `{{- if }}`, a range)
changed the line count before it, and Helm keeps no trace that would map them back.  Reports say
so, and give the position in the rendered stream beside it.  Other stdin documents are named by
``--stdin-filename`` (default ``<stdin>``).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import PurePosixPath

from linter.report import Report


@dataclass(frozen=True, slots=True)
class Rendered:
    """Where a finding reported at a Helm template sits in the rendered stream it was read from."""

    stream: str  # the stdin name
    line: int  # 1-based line in the whole stream
    template: str  # the `# Source:` path as Helm printed it


@dataclass(frozen=True, slots=True)
class Place:
    file: str
    line: int
    column: int | None
    rendered: Rendered | None = None

    def note(self) -> str:
        """What the line refers to, for messages; empty for a file's own position."""
        if self.rendered is None:
            return ""
        return (
            f"line {self.line} of the document rendered from Helm template {self.rendered.template}, "
            f"{self.rendered.stream} line {self.rendered.line}; the template's own line may differ"
        )


@dataclass(frozen=True, slots=True)
class _Origin:
    start: int  # 0-based lines [start, end) of the document's segment
    end: int
    source_line: int  # 0-based line of its `# Source:` comment
    template: str


class Placer:
    """Places the findings and input errors of one report."""

    def __init__(self, report: Report) -> None:
        self._stdin = report.stdin_name
        self._chart = report.helm_chart.rstrip("/") if report.helm_chart else None
        self._origins: list[_Origin] = []
        for result in report.results:
            if result.file == self._stdin:
                self._origins.extend(
                    _Origin(o.start, o.end, o.source_line, o.template) for o in result.helm_origins
                )
        self._starts = [o.start for o in self._origins]

    def template_path(self, template: str) -> str:
        if self._chart is None:
            return template
        parts = PurePosixPath(template).parts
        return str(PurePosixPath(self._chart, *parts[1:])) if len(parts) > 1 else template

    def place(self, file: str, line: int, column: int | None) -> Place:
        if file != self._stdin or not self._origins or line < 1:
            return Place(file, line, column)
        i = bisect.bisect_right(self._starts, line - 1) - 1
        if i < 0:
            return Place(file, line, column)
        origin = self._origins[i]
        if not origin.source_line < line - 1 < origin.end:  # outside the document the comment heads
            return Place(file, line, column)
        relative = line - 1 - origin.source_line
        return Place(
            self.template_path(origin.template), relative, column, Rendered(file, line, origin.template)
        )

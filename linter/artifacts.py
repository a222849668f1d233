"""Which file a finding or an input error is reported at, and where in it.

A finding in a file is reported at that file's own line and column.  Helm output — a chart that
``gpuguard lint`` rendered itself, or ``helm template … | gpuguard lint -`` — exists in no
repository, so a document headed by Helm's ``# Source: chart/templates/x.yaml`` comment is
reported at that template instead: Helm prints the path under the chart's name, which becomes
the chart's directory (the rendered directory, or ``--helm-chart DIR`` for stdin), so the path is
the template's path in the repository.

The line: where the finding's rendered line occurs exactly once in the template's own text, that
is its line in the template — sure.  Otherwise (the line came out of ``{{ }}``, or repeats) the
position is the one inside the rendered document, counted from the line after the ``# Source:``
comment: it equals the template's line only where no directive (``{{- include … | nindent }}``,
``{{- if }}``, a range) changed the line count before it, and Helm keeps no trace that would map it
back.  Reports then say so, and give the position in the rendered stream beside it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from gpuguard.sources.yamlsafe import MAX_FILE_BYTES
from linter.report import Report


@dataclass(frozen=True, slots=True)
class Rendered:
    """Where a finding reported at a Helm template sits in the rendered stream it was read from."""

    stream: str  # the rendered input's name (the chart directory, or stdin)
    line: int  # 1-based line in the whole stream
    template: str  # the `# Source:` path as Helm printed it


@dataclass(frozen=True, slots=True)
class Place:
    file: str
    line: int
    column: int | None
    rendered: Rendered | None = None  # set when the line is the rendered document's, not the template's

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
        self._charts = {file: chart.rstrip("/") if chart else None for file, chart in report.charts().items()}
        self._origins: dict[str, list[_Origin]] = {}
        self._lines: dict[str, dict[int, str]] = {}
        for result in report.results:
            if result.file in self._charts and result.helm_origins:
                self._origins[result.file] = [
                    _Origin(o.start, o.end, o.source_line, o.template) for o in result.helm_origins
                ]
                self._lines[result.file] = result.excerpts
        self._starts = {file: [o.start for o in origins] for file, origins in self._origins.items()}
        self._templates: dict[str, list[str] | None] = {}

    def template_path(self, template: str, chart: str | None) -> str:
        if chart is None:
            return template
        parts = PurePosixPath(template).parts
        if len(parts) <= 1:
            return template
        path = PurePosixPath(chart, *parts[1:])
        return str(path) if chart not in ("", ".") else str(PurePosixPath(*parts[1:]))

    def place(self, file: str, line: int, column: int | None) -> Place:
        origins = self._origins.get(file)
        if not origins or line < 1:
            return Place(file, line, column)
        i = bisect.bisect_right(self._starts[file], line - 1) - 1
        if i < 0:
            return Place(file, line, column)
        origin = origins[i]
        if not origin.source_line < line - 1 < origin.end:  # outside the document the comment heads
            return Place(file, line, column)
        chart = self._charts[file]
        path = self.template_path(origin.template, chart)
        sure = self._template_line(path, self._lines[file].get(line)) if chart is not None else None
        if sure is not None:
            return Place(path, sure, column)
        return Place(path, line - 1 - origin.source_line, column, Rendered(file, line, origin.template))

    def _template_line(self, path: str, rendered: str | None) -> int | None:
        """The 1-based line of ``path`` that is ``rendered`` when exactly one is (None otherwise)."""
        if rendered is None or not rendered.strip():
            return None
        if path not in self._templates:
            self._templates[path] = _read_lines(Path(path))
        lines = self._templates[path]
        if lines is None:
            return None
        wanted = rendered.rstrip("\r\n")
        found = [n for n, text in enumerate(lines, 1) if text == wanted]
        return found[0] if len(found) == 1 else None


def _read_lines(path: Path) -> list[str] | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None

"""``--format text``: one line per finding, the offending source line with a caret, a summary.

Helm output is reported at the chart template a document came from (linter.artifacts), as in the
other formats; where the line is the rendered document's, not the template's, the report says so.
On a terminal, findings, errors and notes wrap to its width (gpuguard.terminal.width; the source
excerpts never do); in a pipe every line is whole.  ``quiet`` keeps the findings and input errors
and drops the notes and the summary.
"""

from __future__ import annotations

from typing import TextIO

from gpuguard.terminal import SEVERITY_COLOURS, Paint, plural, use_colour, width, wrap
from linter.artifacts import Placer
from linter.lint import Located
from linter.report import Report


def _excerpt(f: Located, lines: dict[int, str], paint: Paint, shown: int) -> list[str]:
    """The finding's source line with a caret; ``shown`` is the line number the report gives it
    (a Helm template's, where linter.artifacts placed it there)."""
    if f.line not in lines:
        return []
    gutter = str(shown)
    source = lines[f.line].rstrip("\r\n").expandtabs(1)
    return [
        f"  {paint('2', gutter)} | {source}",
        f"  {' ' * len(gutter)} | {' ' * (f.column - 1)}{paint(SEVERITY_COLOURS[f.finding.severity], '^')}",
    ]


def render(
    report: Report, stream: TextIO, colour: bool | None = None, quiet: bool = False, cols: int | None = None
) -> None:
    paint = Paint(use_colour(stream) if colour is None else colour)
    cols = width(stream) if cols is None else cols
    out: list[str] = []
    placer = Placer(report)
    for result in report.results:
        lines = result.excerpts
        for f in result.findings:
            sev = f.finding.severity
            place = placer.place(f.file, f.line, f.column)
            head = f"{place.file}:{place.line}:{place.column}"
            # the location, severity and rule stay together on the first line; the message wraps
            lead = f"{paint('1', head)} {paint(SEVERITY_COLOURS[sev], str(sev))} {paint('1', f.finding.rule)} "
            out += wrap(f.finding.message, cols, lead, "    ")
            if place.rendered:
                out += wrap(paint("2", place.note()), cols, "  ", "    ")
            elif f.source and place.file == f.file:
                out += wrap(f"{paint('2', 'from Helm template')} {f.source}", cols, "  ", "    ")
            out += _excerpt(f, lines, paint, place.line)
    for e in report.all_errors:
        place = placer.place(e.file, e.line, None)
        if place.line > 0:
            where: str | None = f"{place.file}:{place.line}"
        else:  # no line: the file, unless the message names it ("cannot read FILE: …")
            where = None if place.file in e.message else place.file
        head = f"{paint('1', where)}: " if where else ""
        rendered = f" ({place.note()})" if place.rendered else ""
        out += wrap(f"{head}{paint('31', 'input error')}: {e.message}{rendered}", cols, rest="    ")
    if not quiet:
        notes = [*report.notes, *(f"cluster: {n}" for n in report.cluster_notes())]
        skipped = report.skipped_note()
        for note_text in [*notes, *([skipped] if skipped else [])]:
            out += wrap(note_text, cols, f"{paint('2', 'note')}: ", "      ")
    if report.fixed_files:
        out += wrap(f"fixed {plural(len(report.fixed_files), 'file')}: {', '.join(report.fixed_files)}", cols,
                    rest="    ")
    if not quiet:
        s = report.summary()
        counts = s["by_severity"]
        out += wrap(
            f"{plural(counts['error'], 'error')}, {plural(counts['warning'], 'warning')}, "
            f"{plural(counts['info'], 'info')}; {plural(s['input_errors'], 'input error')} "
            f"({plural(s['files'], 'file')}, {plural(s['documents'], 'document')}, "
            f"{plural(s['objects'], 'object')} checked)", cols, rest="    ",
        )
    stream.write("".join(line + "\n" for line in out))

"""``--format github``: GitHub Actions workflow commands that annotate the files in a pull request.

Escaping follows actions/toolkit packages/core/src/command.ts: in the message ``%``, CR and LF are
percent-encoded; in property values ``:`` and ``,`` are as well.  Helm output read from stdin is annotated at the
chart templates its `# Source:` comments name (see linter.artifacts), and the message says that
the line is inside the rendered document.
"""

from __future__ import annotations

from typing import TextIO

from linter.artifacts import Placer
from linter.report import Report
from policies.types import Severity
from policies.wording import plural

COMMAND = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str, **props: object) -> str:
    rendered = ",".join(f"{k}={escape_property(str(v))}" for k, v in props.items() if v is not None)
    return f"::{name} {rendered}::{escape_data(message)}" if rendered else f"::{name}::{escape_data(message)}"


def render(report: Report, stream: TextIO) -> None:
    placer = Placer(report)
    for f in report.findings:
        place = placer.place(f.file, f.line, f.column)
        message = f.finding.message
        if place.rendered:
            message += f" ({place.note()})"
        elif f.source:
            message += f" (source: {f.source})"
        stream.write(
            command(
                COMMAND[f.finding.severity], message, file=place.file, line=place.line, col=place.column,
                title=f.finding.rule,
            )
            + "\n"
        )
    for e in report.all_errors:
        place = placer.place(e.file, e.line, None)
        message = f"{e.message} ({place.note()})" if place.rendered else e.message
        line = place.line if place.line > 0 else None  # an annotation of the whole file
        stream.write(command("error", message, file=place.file, line=line, title="gpuguard input error") + "\n")
    note = report.skipped_note()
    if note:
        stream.write(command("notice", note, title="gpuguard") + "\n")
    for problem in report.node_problems:
        stream.write(command("notice", f"cluster: {problem}", title="gpuguard") + "\n")
    counts = report.counts()
    stream.write(f"gpuguard: {plural(counts['error'], 'error')}, {plural(counts['warning'], 'warning')}, "
                 f"{plural(counts['info'], 'info')}\n")

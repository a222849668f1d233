"""The line layout of a YAML text: document segments between `---`/`...` markers, lines by number.

Lines are counted as libyaml counts them (CR, LF, CRLF, NEL, LS and PS end a line), so that line
numbers here agree with the parser's marks.  Nothing here splits the whole text into a list of
lines: a 64 MiB input would cost several times its size as line strings.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass

BREAKS = "\r\n\x85\u2028\u2029"
_EXOTIC = ("\x85", "\u2028", "\u2029")
# YAML forbids `---`/`...` at column 0 inside any scalar, and libyaml takes them as document
# markers wherever they appear at column 0; a marker line starts a new segment.
_MARKER = re.compile(
    r"(?:^|(?<=[\r\n\x85\u2028\u2029]))(---|\.\.\.)(?=[ \t\r\n\x85\u2028\u2029]|\Z)([^\r\n\x85\u2028\u2029]*)"
)
# The same at a known line start, for text whose only line breaks are LF and CRLF (nearly all).
_MARKER_AT = re.compile(r"(---|\.\.\.)(?=[ \t\r\n]|\Z)([^\r\n]*)")
_LINE = re.compile(r"[^\r\n\x85\u2028\u2029]*")
_SOURCE = re.compile(r"^#\s*Source:\s*(\S.*?)\s*$")
_TEMPLATE = re.compile(r"\{\{")


@dataclass(frozen=True, slots=True)
class Segment:
    """Lines [start, end) (0-based) of one document's text, after its ``---`` marker line; ``begin``
    and ``stop`` are the character offsets of lines ``start`` and ``end``."""

    start: int
    end: int
    inline: bool  # content begins on the marker line itself (``--- {a: 1}``)
    begin: int = 0
    stop: int = 0


def _markers_after_lf(text: str) -> Iterator[re.Match[str]]:
    """Marker lines of a text whose lines end in LF or CRLF; str.find is far faster than `^` in a
    multi-line regex."""
    starts = []
    for needle in ("---", "..."):
        if text.startswith(needle):
            starts.append(0)
        i = text.find("\n" + needle)
        while i >= 0:
            starts.append(i + 1)
            i = text.find("\n" + needle, i + 1)
    for pos in sorted(starts):
        m = _MARKER_AT.match(text, pos)
        if m is not None:
            yield m


def _after_break(text: str, pos: int) -> int:
    if text.startswith("\r\n", pos):
        return pos + 2
    return pos + 1 if pos < len(text) and text[pos] in BREAKS else pos


class Layout:
    """Segments of a text and the markers that separate them."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._exotic = any(c in text for c in _EXOTIC)
        lone_cr = "\r" in text and text.count("\r") != text.count("\r\n")
        markers = _MARKER.finditer(text) if self._exotic or lone_cr else _markers_after_lf(text)
        self.segments: list[Segment] = []
        self.marker_lines: list[int] = []
        self.marker_offsets: list[int] = []
        start_line, start_off, inline = 0, 0, False
        line, pos = 0, 0
        for m in markers:
            line += self.breaks(pos, m.start())
            pos = m.start()
            self.segments.append(Segment(start_line, line, inline, start_off, pos))
            self.marker_lines.append(line)
            self.marker_offsets.append(pos)
            rest = m.group(2).strip()
            inline = m.group(1) == "---" and bool(rest) and not rest.startswith("#")
            if inline:
                start_line, start_off = line, pos
            else:
                start_line, start_off = line + 1, _after_break(text, m.end())
        self.line_count = line + self.breaks(pos, len(text)) + (0 if text.endswith(tuple(BREAKS)) else 1)
        self.segments.append(Segment(start_line, self.line_count, inline, start_off, len(text)))
        self._starts = [s.start for s in self.segments]

    def breaks(self, start: int, stop: int) -> int:
        """Line breaks in text[start:stop]; both ends at line starts or outside a CRLF pair."""
        text = self.text
        n = text.count("\n", start, stop) + text.count("\r", start, stop) - text.count("\r\n", start, stop)
        if self._exotic:
            n += sum(text.count(c, start, stop) for c in _EXOTIC)
        return n

    def segment_of(self, line: int) -> Segment:
        """The segment holding 0-based ``line`` (a document's first node)."""
        return self.segments[max(0, bisect.bisect_right(self._starts, line) - 1)]

    def next_marker_after(self, line: int) -> tuple[int, int] | None:
        """(line, offset) of the first marker line after 0-based ``line``, where parsing can resume."""
        i = bisect.bisect_right(self.marker_lines, line)
        if i == len(self.marker_lines):
            return None
        return self.marker_lines[i], self.marker_offsets[i]

    def lines(self, start: int, stop: int | None = None) -> Iterator[str]:
        """The lines of text[start:stop] (without their breaks); ``start`` at a line start."""
        text = self.text
        stop = len(text) if stop is None else stop
        pos = start
        while pos < stop:
            m = _LINE.match(text, pos, stop)
            assert m is not None  # the pattern matches the empty string
            yield m.group()
            pos = _after_break(text, m.end())
            if pos == m.end():  # end of text without a final break
                return

    def helm_source(self, seg: Segment) -> str | None:
        """The Helm `# Source:` comment heading a segment, if any."""
        found = self.helm_source_line(seg)
        return found[1] if found else None

    def helm_source_line(self, seg: Segment) -> tuple[int, str] | None:
        """(0-based line, template) of the Helm `# Source:` comment heading a segment, if any."""
        for i, line in enumerate(self.lines(seg.begin, seg.stop)):
            stripped = line.strip()
            if not stripped:
                continue
            if not stripped.startswith("#"):
                return None
            m = _SOURCE.match(stripped)
            if m:
                return seg.start + i, m.group(1)
        return None

    def first_template_line(self, seg: Segment | None = None, last: int | None = None) -> int | None:
        """1-based line of the first `{{` outside a comment line (an unrendered Helm/Go template), in
        ``seg`` or in the whole text, at or before 1-based line ``last``."""
        text = self.text
        begin, stop, first = (seg.begin, seg.stop, seg.start + 1) if seg is not None else (0, len(text), 1)
        pos = text.find("{{", begin, stop)
        while pos >= 0:
            line_start = max(text.rfind(c, begin, pos) for c in BREAKS) + 1
            line_start = max(line_start, begin)
            number = first + self.breaks(begin, line_start)
            if last is not None and number > last:
                return None
            if not text[line_start:pos].lstrip().startswith("#"):
                return number
            m = _LINE.match(text, pos)
            assert m is not None
            pos = text.find("{{", m.end(), stop)
        return None


class LineCursor:
    """Texts of 1-based line numbers, walking forward from the nearest known line start."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.line, self.pos = 0, 0  # 0-based line number at offset pos

    def get(self, number: int) -> str | None:
        target = number - 1
        layout = self.layout
        if target < self.line:
            self.line, self.pos = 0, 0
        i = bisect.bisect_right(layout.marker_lines, target) - 1
        if i >= 0 and layout.marker_lines[i] > self.line:
            self.line, self.pos = layout.marker_lines[i], layout.marker_offsets[i]
        text = layout.text
        while self.line < target:
            m = _LINE.match(text, self.pos)
            assert m is not None
            nxt = _after_break(text, m.end())
            if nxt == m.end():
                return None  # past the last line
            self.line, self.pos = self.line + 1, nxt
        m = _LINE.match(text, self.pos)
        return m.group() if m is not None else None

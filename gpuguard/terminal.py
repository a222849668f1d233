"""Text for a terminal, shared by the text reports of every face: ANSI colour (``--color``,
``NO_COLOR``, ``FORCE_COLOR``), severity colours, lines wrapped to the terminal's width (only on a
terminal), the ``--quiet``/``--color`` flags, and counted nouns.

Colour, as CPython decides it for its own output (``_colorize.can_colorize``, Lib/_colorize.py):
``NO_COLOR`` set to any non-empty value turns it off (https://no-color.org), else ``FORCE_COLOR``
set to any non-empty value turns it on, else ``TERM=dumb`` turns it off, else it is on when the
stream is a terminal.  ``--color always|never`` overrides all of them; ``auto`` is the default.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
from typing import TextIO

from policies.types import Severity

SEVERITY_COLOURS = {Severity.ERROR: "31", Severity.WARNING: "33", Severity.INFO: "36"}
COLOR_CHOICES = ("auto", "always", "never")

MIN_WIDTH, MAX_WIDTH = 80, 160
NO_WRAP = 1 << 20  # the width of a pipe or a file: every line kept whole, for grep

_SGR = re.compile(r"\x1b\[[0-9;]*m")


def _isatty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def use_colour(stream: TextIO, choice: str = "auto") -> bool:
    if choice == "always":
        return True
    if choice == "never":
        return False
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    if os.environ.get("TERM") == "dumb":
        return False
    return _isatty(stream)


def width(stream: TextIO) -> int:
    """The terminal's width (within MIN_WIDTH and MAX_WIDTH; ``COLUMNS`` first, as
    shutil.get_terminal_size reads it), or NO_WRAP when ``stream`` is not a terminal."""
    if not _isatty(stream):
        return NO_WRAP
    columns = 0
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = shutil.get_terminal_size((100, 24)).columns
    return max(MIN_WIDTH, min(MAX_WIDTH, columns))


def visible_length(text: str) -> int:
    return len(_SGR.sub("", text))


def wrap(text: str, cols: int, first: str = "", rest: str = "") -> list[str]:
    """``first + text`` as lines of at most ``cols`` visible characters (SGR colour codes count
    for nothing), continued after ``rest``; words longer than a line are kept whole.  A text that
    fits is returned as it is, and so is every text when ``cols`` is NO_WRAP (not a terminal)."""
    if cols >= NO_WRAP:
        return [first + text]
    out: list[str] = []
    for n, paragraph in enumerate(text.split("\n")):
        lead = first if n == 0 else rest
        if visible_length(lead) + visible_length(paragraph) <= cols:
            out.append(lead + paragraph)
            continue
        # a lead with words of its own (a finding's location) is a word: the text may go on below it
        line, used, empty = lead, visible_length(lead), not _SGR.sub("", lead).strip()
        for word in paragraph.split():
            size = visible_length(word)
            gap = 0 if empty or line.endswith(" ") else 1
            if not empty and used + gap + size > cols:
                out.append(line.rstrip(" "))
                line, used, empty = rest + word, visible_length(rest) + size, False
            else:
                line, used, empty = line + " " * gap + word, used + gap + size, False
        out.append(line)
    return out


def add_output_arguments(parser: argparse.ArgumentParser, colour: bool = True) -> None:
    """``-q/--quiet`` and (where the output has colour) ``--color``."""
    parser.add_argument(
        "-q", "--quiet", action="store_true",
        help="text output: the findings only, without notes and summary",
    )
    if colour:
        parser.add_argument(
            "--color", choices=COLOR_CHOICES, default="auto",
            help="colour the text output: auto (a terminal, unless NO_COLOR is set; FORCE_COLOR forces it), "
            "always or never (default: auto)",
        )


class Paint:
    """``paint(code, text)``: ``text`` in the SGR ``code`` when enabled, else as it is."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text


def plural(n: int, word: str) -> str:
    """``1 error``, ``2 errors``; ``info`` is not counted as a noun."""
    return f"{n} {word}" if n == 1 or word == "info" else f"{n} {word}s"

"""Text for a terminal, shared by the text reports of every face: ANSI colour only on a TTY (and
never with ``NO_COLOR``, https://no-color.org), severity colours, and counted nouns."""

from __future__ import annotations

import os
from typing import TextIO

from policies.types import Severity

SEVERITY_COLOURS = {Severity.ERROR: "31", Severity.WARNING: "33", Severity.INFO: "36"}


def use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Paint:
    """``paint(code, text)``: ``text`` in the SGR ``code`` when enabled, else as it is."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text


def plural(n: int, word: str) -> str:
    """``1 error``, ``2 errors``; ``info`` is not counted as a noun."""
    return f"{n} {word}" if n == 1 or word == "info" else f"{n} {word}s"

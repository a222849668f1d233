"""Regular expressions over strings taken from objects: RE2 only, so matching is linear time.

A review whose strings meet a backtracking regular expression can cost seconds: a 32 KiB image
``pytorch/pytorch:111…1-`` against the PyTorch tag pattern took 6–14 s with Python's ``re``
(quadratic backtracking), and under ``failurePolicy: Ignore`` a review that outlives its timeout is
an admission.  RE2 (google-re2, the engine behind Go's ``regexp`` and cel-go) matches in time
linear in the input for every pattern; its syntax is Go's (no lookaround, no backreferences, and
``\\d``/``\\w``/``\\s`` are ASCII).  Every engine pattern that meets object data is compiled here;
``tests/policies/test_patterns.py`` fails on any other ``re`` pattern in the engine, and times every
pattern against adversarial input.

``compile`` caches nothing itself: callers compile constants at import time, and patterns from
configuration once per config.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print every bad pattern to stderr


class Match(Protocol):
    def group(self, name: int | str = 0, /) -> Any: ...

    def groups(self) -> tuple[Any, ...]: ...

    def groupdict(self) -> dict[str, str | None]: ...

    def start(self, group: int | str = 0) -> int: ...

    def end(self, group: int | str = 0) -> int: ...


class Pattern(Protocol):
    @property
    def pattern(self) -> str: ...

    def match(self, text: str) -> Match | None: ...

    def search(self, text: str) -> Match | None: ...

    def fullmatch(self, text: str) -> Match | None: ...

    def finditer(self, text: str) -> Iterator[Match]: ...

    def sub(self, repl: str, text: str) -> str: ...


class PatternError(ValueError):
    """The pattern is not valid RE2 (Go ``regexp``) syntax."""


def compile(pattern: str) -> Pattern:
    """``pattern`` compiled by RE2; raises PatternError (with RE2's reason) when it is not valid."""
    try:
        compiled: Pattern = re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else exc
        reason = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        raise PatternError(reason) from None
    return compiled

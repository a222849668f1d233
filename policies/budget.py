"""A time budget for one evaluation, checked cooperatively where the engine's work can grow.

Under ``failurePolicy: Ignore`` a review that outlives the webhook's timeout is an admission, and
on one event loop a slow review delays every other.  A face sets a deadline around an evaluation
(``within``); the engine calls ``check()`` between units of work whose cost grows with the input
(each template, each rule, each CEL selector, each allocation step), and past the deadline
``check`` raises ``Overtime``.  ``Overtime`` is a ``BaseException``: the engine's own fault
handling (a rule that raises becomes ``gpu-check-failed``) must not swallow it, since the face
answers it (the webhook with its ``failureMode``), and memoised values are only stored once
computed, so an interrupted evaluation leaves nothing half-done behind.

The deadline lives in a context variable, so each thread (and each evaluation) has its own; without
``within`` there is no deadline and ``check`` costs one lookup.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_deadline: ContextVar[float | None] = ContextVar("gpuguard_deadline", default=None)


class Overtime(BaseException):
    """The evaluation ran past its deadline."""


def check() -> None:
    deadline = _deadline.get()
    if deadline is not None and time.perf_counter() > deadline:
        raise Overtime


def remaining() -> float | None:
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.perf_counter()


@contextmanager
def within(seconds: float | None = None, *, until: float | None = None) -> Iterator[None]:
    """Evaluate with a deadline ``seconds`` from now, or at the ``time.perf_counter()`` value
    ``until`` (the earlier of the two and of an enclosing deadline wins)."""
    deadline = _deadline.get()
    for candidate in (None if seconds is None else time.perf_counter() + seconds, until):
        if candidate is not None and (deadline is None or candidate < deadline):
            deadline = candidate
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)

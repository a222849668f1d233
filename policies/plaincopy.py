"""Deep copies of plain parsed data (what a JSON or YAML loader gives), without ``copy.deepcopy``'s cost.

``copy.deepcopy`` keeps a memo of every object it visits and dispatches per type; for the small
dicts and lists a fix copies out of a pod spec that is most of an evaluation's copying time.
``plain_copy`` copies ``dict`` and ``list`` containers and shares what cannot change (``str``,
``int``, ``float``, ``bool``, ``None``), which is exactly what ``copy.deepcopy`` returns for them.
Anything else (a loader's own mapping type, a date, bytes), and data nested deeper than
``MAX_PLAIN_DEPTH``, is handed to ``copy.deepcopy`` whole, so the result — or the error — is the
one ``copy.deepcopy`` gives.  Shared sub-objects (YAML aliases) are copied once per use rather
than once: the copy is equal, only not aliased alike, and nothing compares patches by identity.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

T = TypeVar("T")

MAX_PLAIN_DEPTH = 64  # pod-spec data nests about 10 deep; deeper data goes to copy.deepcopy
_ATOMIC = frozenset({str, int, float, bool, type(None)})


class _NotPlain(Exception):
    """The data holds something plain_copy leaves to copy.deepcopy."""


def plain_copy(value: T) -> T:
    """A deep copy of ``value``, equal to ``copy.deepcopy(value)``."""
    try:
        copied: T = _copy(value, 0)
    except _NotPlain:
        return copy.deepcopy(value)
    return copied


def _copy(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if depth >= MAX_PLAIN_DEPTH:
        raise _NotPlain
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) not in _ATOMIC:
                raise _NotPlain
            out[key] = item if type(item) in _ATOMIC else _copy(item, depth + 1)
        return out
    if kind is list:
        return [item if type(item) in _ATOMIC else _copy(item, depth + 1) for item in value]
    raise _NotPlain

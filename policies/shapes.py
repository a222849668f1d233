"""Defensive accessors: objects reach the engine unvalidated, so any field may hold any JSON type."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty list (a scalar where a list belongs is ignored)."""
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a mapping, else an empty dict."""
    return value if isinstance(value, dict) else {}


def as_mapping(value: Any) -> Mapping[str, Any]:
    """``value`` if it is any mapping (plain or a loader's own type), else an empty one."""
    return value if isinstance(value, Mapping) else {}


def small_int(value: str, digits: int = 18) -> int | None:
    """``value`` as a non-negative integer when it is 1 to ``digits`` ASCII digits, else None
    (``"²".isdigit()`` is true, and ``int()`` of thousands of digits raises)."""
    if not value or len(value) > digits or not value.isascii() or not value.isdigit():
        return None
    return int(value)


def index_of(token: str, size: int) -> int | None:
    """An array-index token (RFC 6901) that names an element of a list of ``size`` items."""
    index = small_int(token)
    return index if index is not None and index < size else None


def text(value: Any, limit: int = 120) -> str:
    """``value`` shown in a message, in at most about ``limit`` characters, whatever it is.

    ``str()`` of an integer with more than 4,300 digits raises (Python's int-string limit), and a
    megabyte of annotation has no place in a message: both are shortened, never raised on.
    """
    if isinstance(value, bool) or value is None or isinstance(value, float):
        shown = str(value)
    elif isinstance(value, int):
        shown = str(value) if value.bit_length() <= 3 * limit else f"<integer of {value.bit_length()} bits>"
    elif isinstance(value, str):
        shown = value
    else:
        shown = f"<{type(value).__name__}>"
    return shown if len(shown) <= limit else shown[: max(limit - 1, 1)] + "…"

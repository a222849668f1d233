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

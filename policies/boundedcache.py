"""Caches keyed by strings from objects, bounded by what they hold rather than by their entries.

``functools.lru_cache(maxsize=4096)`` over image references or resource names holds 4,096 keys
of any length: 500 reviews with megabyte-long images grew the webhook from 76 to 560 MiB.  Here a
cache has a budget of *weight* (the characters of its keys, or a caller's estimate of a value's
size); an entry heavier than a fraction of the budget is computed and not kept, so no single
hostile value can push the useful ones out.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, ParamSpec, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
P = ParamSpec("P")
R = TypeVar("R")

# An entry may use at most this share of its cache's budget.
MAX_ENTRY_SHARE = 16


class WeightedLRU(Generic[K, V]):
    """Least-recently-used entries dropped first, while the total weight exceeds ``budget``."""

    __slots__ = ("_entries", "budget", "weight")

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.weight = 0
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: K, value: V, weight: int) -> None:
        """Keep ``value`` unless it alone would take more than 1/MAX_ENTRY_SHARE of the budget."""
        if weight * MAX_ENTRY_SHARE > self.budget:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self.weight -= old[1]
        self._entries[key] = (value, weight)
        self.weight += weight
        while self.weight > self.budget and self._entries:
            _, (_, dropped) = self._entries.popitem(last=False)
            self.weight -= dropped

    def clear(self) -> None:
        self._entries.clear()
        self.weight = 0


def key_chars(value: Any) -> int:
    """The characters of the strings in a key (tuples and frozensets walked; others count 8)."""
    kind = type(value)
    if kind is str:
        return len(value)
    if kind is not tuple and kind is not frozenset:
        return 8
    total = 8
    for item in value:
        kind = type(item)
        total += len(item) if kind is str else key_chars(item) if kind is tuple or kind is frozenset else 8
    return total


def small_key_cache(maxsize: int, max_key_chars: int) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``functools.lru_cache(maxsize)`` for calls whose arguments hold at most ``max_key_chars``
    characters; longer ones are computed afresh (they are rare, and a real value is never that
    long), so the cache holds at most ``maxsize × max_key_chars`` characters of keys."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        cached: Any = functools.lru_cache(maxsize=maxsize)(fn)
        plain: Any = fn

        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            if kwargs:
                return fn(*args, **kwargs)
            first = args[0] if len(args) == 1 else None
            if type(first) is str:  # the usual call: one string
                chosen = cached if len(first) <= max_key_chars else plain
            else:
                chosen = cached if key_chars(args) <= max_key_chars else plain
            result: R = chosen(*args)
            return result

        call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        call.cache_info = cached.cache_info  # type: ignore[attr-defined]
        return call

    return decorate

"""HeapKeeper: survivors are frozen out of full collections; a refresh reclaims frozen cycles."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from webhook.heap import HeapKeeper


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_settle_freezes_what_survives_and_full_collections_skip_it() -> None:
    keeper = HeapKeeper(refresh_seconds=60, clock=Clock())
    kept = [Node() for _ in range(1000)]
    a, b = Node(), Node()
    a.other, b.other = b, a
    keeper.settle()
    assert gc.get_freeze_count() >= len(kept)
    # the cycle was alive when frozen: once unreachable, a full collection no longer sees it
    ref = weakref.ref(a)
    del a, b
    gc.collect()
    assert ref() is not None


def test_young_cyclic_garbage_is_collected_before_freezing() -> None:
    keeper = HeapKeeper(refresh_seconds=60, clock=Clock())
    ref = cycle()  # already unreachable when settle runs
    keeper.settle()
    assert ref() is None


def test_a_refresh_reclaims_cycles_frozen_by_accident() -> None:
    clock = Clock()
    keeper = HeapKeeper(refresh_seconds=60, clock=clock)
    a, b = Node(), Node()
    a.other, b.other = b, a
    keeper.settle()  # frozen while alive
    ref = weakref.ref(a)
    del a, b
    clock.now = 59
    keeper.settle()
    assert ref() is not None and keeper.refreshes == 0
    clock.now = 61
    keeper.settle()
    assert ref() is None and keeper.refreshes == 1
    assert gc.get_freeze_count() > 0  # frozen again after the refresh
    assert keeper.settles == 3


def test_settle_is_a_facts_callback() -> None:
    keeper = HeapKeeper(clock=Clock())
    keeper.settle(object())  # on_update passes the new snapshot
    assert keeper.settles == 1

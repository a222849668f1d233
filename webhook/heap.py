"""Keeping the garbage collector's full collections off the review path.

A 5,000-node fleet's facts are hundreds of thousands of objects the cyclic garbage collector
tracks (about 800,000 with DRA: each GPU a device with its attributes).  CPython's full
(generation 2) collection walks every one of them while holding the GIL: 276 ms measured on the
DRA fleet of bench/churn_bench.py, during which no review is answered — under a steady 120 reviews/s
that one pause alone puts dozens of reviews past the p99.  The facts are immutable snapshots that
reference counting frees when the next one replaces them, so walking them finds nothing.

``HeapKeeper.settle`` runs after each snapshot is published (and once after a static snapshot is
loaded): it collects the young generations (cheap: only what was allocated since) and moves every
survivor to the permanent generation (``gc.freeze``), which collections skip.  Objects there are
still freed by reference counting; only cyclic garbage that happens to be alive-looking when frozen
would be kept, so once every ``refresh_seconds`` ``settle`` runs a full collection first (one pause
of the size above per refresh instead of one every few thousand allocations) and freezes again.

The Python documentation describes ``gc.freeze`` for this use: a process that builds a large,
long-lived heap and then works on it ("Freeze all the objects tracked by the garbage collector;
move them to a permanent generation and ignore them in all the future collections",
https://docs.python.org/3/library/gc.html#gc.freeze).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

REFRESH_SECONDS = 3600.0


class HeapKeeper:
    def __init__(self, refresh_seconds: float = REFRESH_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.refresh_seconds = refresh_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._refreshed = clock()
        self.settles = 0
        self.refreshes = 0

    def settle(self, *_: object) -> None:
        """Freeze what survives a young collection; a full collection first once per refresh.

        Takes (and ignores) any arguments, so it can be a facts ``on_update`` callback."""
        with self._lock:
            now = self._clock()
            if now - self._refreshed >= self.refresh_seconds:
                gc.unfreeze()
                gc.collect()
                self._refreshed = now
                self.refreshes += 1
            else:
                gc.collect(1)
            gc.freeze()
            self.settles += 1

"""Where the webhook evaluates a review, and how long and how much memory it may take.

The API server calls the webhook with ``failurePolicy: Ignore`` and a timeout (5 s in the shipped
configurations): a review answered late is an admission, and every review shares one event loop.
So no review may take long, and none may delay the others:

* **Inline**: a small review (the usual 2–10 KB pod) is evaluated on the event loop, where a thread
  hop would only add latency, under a short budget (``inline_seconds``).
* **Heavy lane**: a large body, a body with CEL selectors (DRA claims, whose compilation is slow
  by nature), or a review that overran its inline budget is evaluated on a small pool of worker
  threads (``heavy_workers``); the event loop keeps answering the others meanwhile (a CPU-bound
  thread gives up the interpreter every few milliseconds), and at most that many heavy reviews
  run at once, so a client sending many cannot crowd out the rest.
* **Deadline**: every review is answered by ``deadline`` seconds after it arrived.  The engine
  checks it cooperatively (``policies.budget``) and stops; a review still waiting for a lane or for
  memory then, or not finished, gets the configured ``failureMode`` answer, logged and counted
  (``gpuguard_admission_errors_total{reason="deadline"}``).
* **Memory**: the bodies of reviews being read or evaluated may hold at most ``inflight_body_bytes``
  together (a parsed review takes about ten times its body), so a burst of large reviews waits for
  its turn instead of growing the server past its memory limit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from policies import budget

T = TypeVar("T")


@dataclass(frozen=True)
class LaneLimits:
    deadline: float = 4.0  # seconds from arrival to answer; below the webhooks' timeoutSeconds
    inline_seconds: float = 0.025
    inline_body_bytes: int = 32 * 1024
    heavy_workers: int = 2
    inflight_body_bytes: int = 48 * 1024 * 1024


class Lanes:
    """The evaluation lanes of one server (one event loop)."""

    def __init__(self, limits: LaneLimits | None = None) -> None:
        self.limits = limits or LaneLimits()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.limits.heavy_workers, thread_name_prefix="gpuguard-heavy"
        )
        self._slots: asyncio.Semaphore | None = None
        self._memory: asyncio.Condition | None = None
        self.inflight_bytes = 0

    def _loop_primitives(self) -> tuple[asyncio.Semaphore, asyncio.Condition]:
        if self._slots is None or self._memory is None:
            self._slots = asyncio.Semaphore(self.limits.heavy_workers)
            self._memory = asyncio.Condition()
        return self._slots, self._memory

    def deadline_for(self, arrived: float) -> float:
        """The ``time.perf_counter()`` value by which a review that arrived at ``arrived`` is answered."""
        return arrived + self.limits.deadline

    def is_heavy(self, body: bytes) -> bool:
        return len(body) > self.limits.inline_body_bytes or b'"cel"' in body

    async def reserve(self, size: int, deadline: float) -> bool:
        """Hold ``size`` bytes of the in-flight budget; False when the deadline passes first.  A
        body larger than the whole budget waits until nothing else is in flight."""
        _, memory = self._loop_primitives()
        size = min(size, self.limits.inflight_body_bytes)
        async with memory:
            try:
                await asyncio.wait_for(
                    memory.wait_for(lambda: self.inflight_bytes + size <= self.limits.inflight_body_bytes),
                    timeout=max(deadline - time.perf_counter(), 0),
                )
            except TimeoutError:
                return False
            self.inflight_bytes += size
            return True

    async def release(self, size: int) -> None:
        _, memory = self._loop_primitives()
        size = min(size, self.limits.inflight_body_bytes)
        async with memory:
            self.inflight_bytes -= size
            memory.notify_all()

    async def evaluate(self, work: Callable[[], T], heavy: bool, deadline: float) -> T | None:
        """``work()`` in its lane, under the deadline; None when the deadline passed first."""
        if not heavy:
            try:
                with budget.within(self.limits.inline_seconds, until=deadline):
                    return work()
            except budget.Overtime:
                if time.perf_counter() >= deadline:
                    return None  # the whole deadline is gone, not only the inline budget
        return await self._heavy(work, deadline)

    async def _heavy(self, work: Callable[[], T], deadline: float) -> T | None:
        slots, _ = self._loop_primitives()
        try:
            await asyncio.wait_for(slots.acquire(), timeout=max(deadline - time.perf_counter(), 0))
        except TimeoutError:
            return None

        def run() -> T | None:
            try:
                with budget.within(until=deadline):
                    return work()
            except budget.Overtime:
                return None

        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, run)
        # The slot is free only when the thread is: a thread past its deadline still finishes its
        # current step (the engine checks the deadline between steps).
        future.add_done_callback(lambda _: slots.release())
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout=max(deadline - time.perf_counter(), 0))
        except TimeoutError:
            return None

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

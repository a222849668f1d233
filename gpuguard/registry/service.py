"""Image lookups for the admission webhook: asynchronous, bounded, never blocking a review long.

``prepare(pairs)`` answers from memory at once for images looked up before, starts lookups for
the others (each image once, however many reviews ask), waits for them at most the review budget,
and returns a fixed ``ResolvedImages`` view: a lookup still running is ``pending`` (the engine
judges the image by its offline knowledge and the webhook warns); a later review gets the result.
A found result whose tag is older than the tag TTL is refreshed; until the refresh completes,
reviews past the budget keep using the old result rather than "pending".

Everything runs on the server's event loop, so the maps need no locks.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuguard.registry.auth import CredentialStore
from gpuguard.registry.cache import MemoryStore
from gpuguard.registry.client import ClientOptions, RegistryClient
from gpuguard.registry.facts import Pair, ResolvedImages
from gpuguard.registry.reference import ReferenceError, parse
from gpuguard.registry.resolver import Resolver
from policies.images import ImageLookup
from policies.registry_config import RegistrySettings

MAX_IN_FLIGHT = 64
# kube-apiserver cuts every warning of a request past 4096 runes in all to 256 runes, without a mark
# (k8s.io/apiserver pkg/endpoints/filters/warning.go; see webhook/admission.py WARNING_LIMIT):
# within 256 a failed lookup keeps its reason.
WARNING_LIMIT = 256

Counter = Callable[[str], None]  # called with "hit", "miss", "failure" or "pending"


@dataclass(slots=True)
class _Entry:
    lookup: ImageLookup
    fresh_until: float


class ImageLookupService:
    def __init__(
        self,
        resolver: Resolver,
        settings: RegistrySettings,
        count: Counter | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.resolver = resolver
        self.settings = settings
        self.count = count or (lambda _result: None)
        self.clock = clock
        self._results: OrderedDict[Pair, _Entry] = OrderedDict()
        self._in_flight: dict[Pair, asyncio.Task[ImageLookup]] = {}

    @classmethod
    def from_settings(cls, settings: RegistrySettings, count: Counter | None = None) -> ImageLookupService:
        client = RegistryClient(ClientOptions.from_settings(settings), CredentialStore.load())
        store = MemoryStore(settings.cache_entries, settings.tag_ttl, settings.negative_ttl)
        return cls(Resolver(client, store, settings.timeout), settings, count)

    def __len__(self) -> int:
        return len(self._results)

    def _ttl(self, image: str, lookup: ImageLookup) -> float:
        if lookup.status != "found":
            return self.settings.negative_ttl
        try:
            pinned = parse(image).digest is not None
        except ReferenceError:
            pinned = False
        return float("inf") if pinned else self.settings.tag_ttl

    def _store(self, pair: Pair, lookup: ImageLookup) -> None:
        self._results[pair] = _Entry(lookup, self.clock() + self._ttl(pair[0], lookup))
        self._results.move_to_end(pair)
        while len(self._results) > self.settings.cache_entries:
            self._results.popitem(last=False)

    async def _run(self, pair: Pair) -> ImageLookup:
        try:
            lookup = await self.resolver.lookup(*pair)
        finally:
            self._in_flight.pop(pair, None)
        self._store(pair, lookup)
        if lookup.status == "failed":
            self.count("failure")
        return lookup

    def _start(self, pair: Pair) -> asyncio.Task[ImageLookup] | None:
        task = self._in_flight.get(pair)
        if task is None and len(self._in_flight) < MAX_IN_FLIGHT:
            task = self._in_flight[pair] = asyncio.create_task(self._run(pair))
        return task

    async def prepare(self, pairs: Sequence[Pair], budget: float | None = None) -> ResolvedImages:
        budget = self.settings.review_budget if budget is None else budget
        now = self.clock()
        view: dict[Pair, ImageLookup] = {}
        stale: dict[Pair, ImageLookup] = {}
        waiting: dict[Pair, asyncio.Task[ImageLookup] | None] = {}
        for pair in pairs:
            entry = self._results.get(pair)
            if entry is not None and entry.fresh_until > now:
                self._results.move_to_end(pair)
                view[pair] = entry.lookup
                self.count("hit")
                continue
            self.count("miss")
            if entry is not None and entry.lookup.status == "found":
                stale[pair] = entry.lookup
            waiting[pair] = self._start(pair)
        tasks = {t for t in waiting.values() if t is not None}
        if tasks and budget > 0:
            await asyncio.wait(tasks, timeout=budget)
        for pair, task in waiting.items():
            if task is not None and task.done() and not task.cancelled():
                view[pair] = task.result()
            elif pair in stale:
                view[pair] = stale[pair]
            else:
                self.count("pending")
                why = "lookup still running" if task is not None else "too many lookups running"
                view[pair] = ImageLookup("pending", detail=f"registry {why} after {budget * 1000:.0f} ms")
        return ResolvedImages(view)

    async def aclose(self) -> None:
        for task in list(self._in_flight.values()):
            task.cancel()
        await self.resolver.client.aclose()


def _fit(prefix: str, image: str, suffix: str) -> str:
    room = WARNING_LIMIT - len(prefix) - len(suffix)
    if len(image) > room:
        image = "…" + image[len(image) - room + 1 :]
    return (prefix + image + suffix)[:WARNING_LIMIT]


def warnings_for(view: ResolvedImages) -> list[str]:
    """One admission warning per image whose registry facts are missing: pending or failed."""
    out: dict[str, None] = {}
    for (image, _arch), lookup in view.items():
        if image.strip() in view.quiet:
            continue
        if lookup.status == "pending":
            out[_fit("gpuguard: image ", image, ": registry lookup pending; judged by offline knowledge")] = None
        elif lookup.status == "failed":
            reason = lookup.detail.split(": ", 1)[-1]
            text = f"gpuguard: image {image}: registry lookup failed ({reason}); judged by offline knowledge"
            if len(text) > WARNING_LIMIT:
                text = _fit("gpuguard: image ", image, ": registry lookup failed; judged by offline knowledge")
            out[text] = None
    return list(out)

"""Which devices a DeviceClass (and a request's selectors) select, answered once per snapshot.

A device matches when every selector is true (k8s.io/dynamic-resource-allocation allocator
``selectorsMatch``).  The answer is True, False, or None when gpuguard cannot tell (a selector it
does not evaluate, a CEL runtime error, the evaluation budget spent): callers never count None as a
match and never as a proof of absence.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping

from policies.dra import signature
from policies.dra.cel import MAX_COST, compile_selector
from policies.dra.objects import Device, DeviceID, Selector

MatchCache = MutableMapping[tuple[tuple[str, ...], DeviceID], "bool | None"]
CACHE_LIMIT = 200_000


def selectors_match(selectors: Iterable[Selector], device: Device) -> bool | None:
    verdict: bool | None = True
    for selector in selectors:
        compiled = compile_selector(selector.expression)
        if not compiled.ok:
            return None
        result = signature.evaluate(compiled, device, MAX_COST)
        if result.matched is False:
            return False
        if result.matched is None:
            verdict = None
    return verdict


def cached_match(
    selectors: tuple[Selector, ...], device_id: DeviceID, device: Device, cache: MatchCache
) -> bool | None:
    key = (tuple(s.expression for s in selectors), device_id)
    if key in cache:
        return cache[key]
    verdict = selectors_match(selectors, device)
    if len(cache) >= CACHE_LIMIT:
        cache.clear()
    cache[key] = verdict
    return verdict

"""The KServe objects of the inputs being checked: what an InferenceService's ServingRuntime and an
LLMInferenceService's configs resolve to before the cluster's (policies.kserve).

A manifest set often carries its ServingRuntimes beside the InferenceServices that use them (NVIDIA's
nim-deploy keeps them in a sibling directory, a chart renders both into one stream).
``KServeCollector`` picks ServingRuntimes, ClusterServingRuntimes and LLMInferenceServiceConfigs out
of texts — only texts that mention ``serving.kserve.io`` are parsed — with the streaming parser,
keeping at most ``MAX_OBJECTS`` of them.  Input errors are left to the linter, which reports them when
it reads the same text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuguard.sources.yamlsafe import InputError
from gpuguard.sources.yamlstream import ListEnd, stream
from policies.kserve import GROUP, NO_VIEW, KServeView, is_kserve_object, kserve_objects

MAX_OBJECTS = 10_000


def kserve_objects_in(text: str, name: str, limit: int = MAX_OBJECTS) -> list[dict[str, Any]]:
    """The ServingRuntimes, ClusterServingRuntimes and LLMInferenceServiceConfigs in ``text`` (Lists
    flattened)."""
    if GROUP not in text:
        return []
    found: list[dict[str, Any]] = []
    for item in stream(text, name):
        if isinstance(item, (InputError, ListEnd)):
            continue
        data = item.data
        items = data.get("items") if isinstance(data, dict) else None
        candidates: list[Any] = items if isinstance(items, list) else [data]
        for obj in candidates:
            if isinstance(obj, dict) and is_kserve_object(obj):
                found.append(obj)
                if len(found) >= limit:
                    return found
    return found


@dataclass(slots=True)
class KServeCollector:
    """The KServe objects of a whole run, gathered text by text."""

    objects: list[dict[str, Any]] = field(default_factory=list)

    def add(self, text: str, name: str) -> None:
        room = MAX_OBJECTS - len(self.objects)
        if room > 0:
            self.objects.extend(kserve_objects_in(text, name, room))

    def view(self) -> KServeView:
        return NO_VIEW.nearer(kserve_objects(self.objects))


def with_file(run: KServeView, text: str, name: str) -> KServeView:
    """The run's objects with ``text``'s own nearest."""
    return run.nearer(kserve_objects(kserve_objects_in(text, name)))

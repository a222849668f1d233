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

from typing import Any

from gpuguard.sources.picked import MAX_OBJECTS, Collector, objects_in
from policies.kserve import GROUP, NO_VIEW, KServeView, is_kserve_object, kserve_objects


def kserve_objects_in(text: str, name: str, limit: int = MAX_OBJECTS) -> list[dict[str, Any]]:
    """The ServingRuntimes, ClusterServingRuntimes and LLMInferenceServiceConfigs in ``text`` (Lists
    flattened)."""
    return objects_in(text, name, GROUP, is_kserve_object, limit)


class KServeCollector(Collector):
    """The KServe objects of a whole run, gathered text by text."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(kserve_objects_in)

    def view(self) -> KServeView:
        return NO_VIEW.nearer(kserve_objects(self.objects))


def with_file(run: KServeView, text: str, name: str) -> KServeView:
    """The run's objects with ``text``'s own nearest."""
    return run.nearer(kserve_objects(kserve_objects_in(text, name)))

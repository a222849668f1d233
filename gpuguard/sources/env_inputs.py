"""The ConfigMaps and Secrets of the inputs being checked, which containers' ``envFrom`` read
(policies.env_sources): a chart or an overlay often renders them beside the workload.  Only texts
that mention ``ConfigMap`` or ``Secret`` are parsed, with the streaming parser, keeping at most
``MAX_OBJECTS`` of them; input errors are left to the linter, which reports them when it reads the
same text."""

from __future__ import annotations

from typing import Any

from gpuguard.sources.picked import MAX_OBJECTS, Collector, objects_in
from policies.env_sources import EnvSources, env_sources, is_env_source


def env_objects_in(text: str, name: str, limit: int = MAX_OBJECTS) -> list[dict[str, Any]]:
    """The v1 ConfigMaps and Secrets in ``text`` (Lists flattened)."""
    if "ConfigMap" not in text and "Secret" not in text:
        return []
    return objects_in(text, name, "", is_env_source, limit)


class EnvCollector(Collector):
    """The ConfigMaps and Secrets of a whole run, gathered text by text."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(env_objects_in)

    def sources(self) -> EnvSources:
        return env_sources(self.objects)


def with_file(run: EnvSources, text: str, name: str) -> EnvSources:
    """The run's sources with ``text``'s own nearest (a stream read once has only its own)."""
    return run.nearer(env_objects_in(text, name))

"""Objects of some kinds picked out of the texts of a run, for what the inputs resolve before the
cluster (DRA claims and classes, KServe runtimes and configs): only texts that mention the API
group are parsed, with the streaming parser (bounded memory), Lists flattened, at most
``MAX_OBJECTS`` kept.  Input errors are left to the linter, which reports them when it reads the
same text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuguard.sources.yamlsafe import InputError
from gpuguard.sources.yamlstream import ListEnd, stream

MAX_OBJECTS = 10_000


def objects_in(
    text: str, name: str, marker: str, wanted: Callable[[Any], bool], limit: int = MAX_OBJECTS
) -> list[dict[str, Any]]:
    """The objects of ``text`` that ``wanted`` accepts, Lists flattened; none unless ``marker`` (the
    API group) occurs in the text."""
    if marker not in text:
        return []
    found: list[dict[str, Any]] = []
    for item in stream(text, name):
        if isinstance(item, (InputError, ListEnd)):
            continue
        data = item.data
        items = data.get("items") if isinstance(data, dict) else None
        candidates: list[Any] = items if isinstance(items, list) else [data]
        for obj in candidates:
            if isinstance(obj, dict) and wanted(obj):
                found.append(obj)
                if len(found) >= limit:
                    return found
    return found


@dataclass(slots=True)
class Collector:
    """The objects a picker finds in a whole run, gathered text by text."""

    pick: Callable[[str, str, int], list[dict[str, Any]]]
    objects: list[dict[str, Any]] = field(default_factory=list)

    def add(self, text: str, name: str) -> None:
        room = MAX_OBJECTS - len(self.objects)
        if room > 0:
            self.objects.extend(self.pick(text, name, room))

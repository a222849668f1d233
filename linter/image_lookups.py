"""``gpuguard lint --registry``: look up the images of every input before any is evaluated."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

from gpuguard.registry.cli import failure_notes, prefetch
from gpuguard.registry.facts import ResolvedImages, gpu_node_arches, pairs_in
from gpuguard.sources.yamlstream import Unit, stream
from linter.lint import objects_in
from policies.config import Config
from policies.facts import ClusterFacts
from policies.registry_config import RegistrySettings


def _objects(texts: Iterable[tuple[str, str]]) -> Iterable[dict[str, Any]]:
    for name, text in texts:
        for item in stream(text, name):
            if isinstance(item, Unit):
                yield from objects_in(item, name)


def look_up_images(
    texts: Iterable[tuple[str, str]], config: Config, facts: ClusterFacts, settings: RegistrySettings
) -> ResolvedImages:
    """Resolve every GPU container image of ``texts`` (name, text); notes go to stderr."""
    pairs, quiet = pairs_in(_objects(texts), config, gpu_node_arches(facts, config))
    view, cache_problem = prefetch(settings, pairs)
    view.quiet = quiet
    for note in [*failure_notes(view), *([cache_problem] if cache_problem else [])]:
        sys.stderr.write(f"gpuguard lint: note: {note}\n")
    return view

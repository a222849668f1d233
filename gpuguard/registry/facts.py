"""``ImageFacts`` for the faces: a fixed view of resolved lookups, and what to look up.

Which architectures: those the engine looks images up for on the nodes that offer GPUs in the
cluster facts (``policies.images.node_arch``: the ``kubernetes.io/arch`` label, ``amd64`` on a
node without it); ``amd64`` when the facts have no GPU node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from policies.config import Config
from policies.engine import images_in
from policies.facts import ClusterFacts
from policies.image_uses import ImageUse
from policies.images import DEFAULT_ARCH, ImageLookup, node_arch
from policies.memo import GpuNodeArchesKey

DEFAULT_ARCHES = (DEFAULT_ARCH,)

Pair = tuple[str, str]  # (image as written, arch)


class ResolvedImages:
    """What the face knows, fixed before evaluation: lookups never do I/O."""

    def __init__(self, results: Mapping[Pair, ImageLookup], quiet: frozenset[str] = frozenset()) -> None:
        self._results = dict(results)
        # Images only gpu-device-access-bypass reads: no note or warning when their lookup fails.
        self.quiet = quiet

    def lookup(self, image: str, arch: str) -> ImageLookup | None:
        return self._results.get((image.strip(), arch))

    def items(self) -> Iterable[tuple[Pair, ImageLookup]]:
        return self._results.items()

    def __len__(self) -> int:
        return len(self._results)


def gpu_node_arches(facts: ClusterFacts, config: Config) -> tuple[str, ...]:
    def compute() -> tuple[str, ...]:
        arches = set()
        for group in facts.groups:
            node = group.representative
            if any(config.is_gpu(name) and q > 0 for name, q in node.allocatable.items()):
                arches.add(node_arch(node.labels))
        return tuple(sorted(arches)) or DEFAULT_ARCHES

    return facts.memoised(GpuNodeArchesKey(id(config)), compute, owner=config, pinned=True)


def pairs_in(
    objects: Iterable[dict[str, Any]], config: Config, arches: tuple[str, ...]
) -> tuple[list[Pair], frozenset[str]]:
    """(image, arch) of every image the engine would look up in ``objects``, each once, in order;
    and the images among them that only ``gpu-device-access-bypass`` reads (``ImageUse.quiet``)."""
    return pairs_of((use for obj in objects for use in images_in(obj, config)), arches)


def pairs_of(uses: Iterable[ImageUse], arches: tuple[str, ...]) -> tuple[list[Pair], frozenset[str]]:
    """``pairs_in`` for image uses already found (``policies.engine.Prepared.image_uses``)."""
    seen: dict[Pair, None] = {}
    loud: set[str] = set()
    quiet: set[str] = set()
    for use in uses:
        (quiet if use.quiet else loud).add(use.image.strip())
        for arch in arches:
            seen.setdefault((use.image, arch), None)
    return list(seen), frozenset(quiet - loud)

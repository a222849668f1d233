"""Image facts: what registries say about the images a pod runs.

Like cluster facts, image facts are a lookup the engine is *given*: the faces fetch image configs
(outside ``policies/``, with their own network, auth and cache) before they evaluate, and pass an
``ImageFacts`` view of what they know.  Nothing here does I/O.

``policies.engine.images_in`` lists the images the engine would judge in an object, so a face
can prefetch exactly those; ``lookup_archs`` names the node architectures to fetch them for.  This
module holds only the types, so that rules may use them without importing the engine.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from policies.facts import ClusterFacts


@dataclass(frozen=True, slots=True)
class ImageConfig:
    """What a registry says about one image for one platform (the OCI image config)."""

    env: tuple[tuple[str, str], ...]  # config.Env in order, each split at the first "="
    labels: Mapping[str, str] = field(default_factory=dict)  # config.Labels
    digest: str = ""  # the platform manifest's digest ("sha256:…")
    source: str = ""  # provenance for messages, e.g. "registry nvcr.io, sha256:ab12…"


LookupStatus = Literal["found", "pending", "failed"]


@dataclass(frozen=True, slots=True)
class ImageLookup:
    status: LookupStatus
    config: ImageConfig | None = None  # set iff status == "found"
    detail: str = ""  # why pending/failed, shown in notes and warnings


class ImageFacts(Protocol):
    def lookup(self, image: str, arch: str) -> ImageLookup | None:
        """What is known now about ``image`` (as written in the pod) for linux/``arch``.

        None: no registry knowledge was consulted (offline); judge by offline knowledge only.
        Must be fast and never do I/O on the caller's thread (faces prefetch before evaluating).
        """
        ...


class NoImageFacts:
    """The default: nothing is known from registries."""

    def lookup(self, image: str, arch: str) -> ImageLookup | None:
        return None


# Set by the kubelet on every node (https://kubernetes.io/docs/reference/labels-annotations-taints/
# #kubernetes-io-arch: "the Go runtime.GOARCH value").  Only hand-written snapshots lack it; their
# nodes are looked up as amd64, the architecture of every node in the bundled examples.
ARCH_LABEL = "kubernetes.io/arch"
DEFAULT_ARCH = "amd64"


def node_arch(labels: Mapping[str, str]) -> str:
    return labels.get(ARCH_LABEL) or DEFAULT_ARCH


def lookup_archs(facts: ClusterFacts) -> tuple[str, ...]:
    """The architectures of the cluster's nodes, to prefetch image configs for (amd64 without facts)."""
    archs = sorted({node_arch(g.representative.labels) for g in facts.groups})
    return tuple(archs) or (DEFAULT_ARCH,)


def lookup_key(images: ImageFacts, pairs: tuple[tuple[str, str], ...]) -> Hashable:
    """What ``images`` knows about each (image, arch) pair, as a hashable memo key part."""
    key: list[Hashable] = []
    for image, arch in pairs:
        found = images.lookup(image, arch)
        if found is None:
            key.append(None)
        elif found.config is None:
            key.append((found.status, found.detail))
        else:
            key.append((found.status, found.detail, found.config.env, found.config.digest, found.config.source))
    return tuple(key)

"""Image facts: what registries say about the images a pod runs.

Like cluster facts, image facts are a lookup the engine is *given*: the faces fetch image configs
(outside ``policies/``, with their own network, auth and cache) before they evaluate, and pass an
``ImageFacts`` view of what they know.  Nothing here does I/O.

``images_in`` lists the images the engine would judge in an object (the GPU containers of its
GPU-related pod templates), so a face can prefetch exactly those; ``lookup_archs`` names the node
architectures to fetch them for.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from policies.config import Config
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


@dataclass(frozen=True, slots=True)
class ImageUse:
    """One container image the engine would judge, and where it is written."""

    image: str  # as written in the pod
    pointer: str  # RFC 6901 pointer to the container's "image" field in the object
    container: str


def images_in(obj: dict[str, Any], config: Config | None = None) -> tuple[ImageUse, ...]:
    """Every image of a GPU container the CUDA rule would judge in ``obj``, in document order.

    Skips what the engine skips: exempt namespaces, templates that are not GPU-related, templates
    or objects that ignore the rule, and the rule switched off in ``config``.
    """
    from policies import pointer as jsonpointer
    from policies.config import Config
    from policies.cuda.containers import RULE_ID, gpu_containers
    from policies.engine import ignored_rules, is_gpu_related
    from policies.podspec import extract

    config = config or Config()
    if config.settings(RULE_ID).severity is None:
        return ()
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    if str(meta.get("namespace") or "") in config.exempt_namespaces:
        return ()
    found: list[ImageUse] = []
    for pod in extract(obj, config.workload_index):
        if not is_gpu_related(pod, config):
            continue
        ignored = ignored_rules(obj, pod)
        if "all" in ignored or RULE_ID in ignored:
            continue
        for c in gpu_containers(pod, config.is_gpu):
            image = c.container.get("image")
            if isinstance(image, str) and image.strip():
                found.append(ImageUse(image, jsonpointer.join(pod.spec_pointer, (*c.path, "image")), c.name))
    return tuple(found)


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

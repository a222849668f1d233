"""Image facts: what registries say about container images, given to the engine like cluster facts.

Pure types, no I/O.  Faces (the linter, the webhook) resolve the images ``images_in()`` returns
before evaluating, then hand the engine an ``ImageFacts`` view of what they know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from policies.config import Config


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


@dataclass(frozen=True, slots=True)
class ImageUse:
    """A container image the engine would judge, with the pointer of its pod template's spec."""

    image: str
    template: str  # RFC 6901 pointer to the pod spec, e.g. "/spec/template/spec"
    container: str


CUDA_RULE = "gpu-cuda-driver-mismatch"


def images_in(obj: dict[str, Any], config: Config) -> list[ImageUse]:
    """Every image of a GPU-requesting container in ``obj`` that the CUDA rule would judge.

    Minimal version written by the registry work; the engine work owns the final one.
    """
    from policies.podresources import container_requests
    from policies.podspec import extract

    if config.settings(CUDA_RULE).severity is None:
        return []
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, dict) else None
    if isinstance(namespace, str) and namespace in config.exempt_namespaces:
        return []
    out: list[ImageUse] = []
    for pod in extract(obj, config.workload_index):
        for c in pod.containers:
            if c.kind == "ephemeralContainer":
                continue
            image = c.container.get("image")
            if isinstance(image, str) and image.strip() and container_requests(c, config.is_gpu):
                out.append(ImageUse(image.strip(), pod.spec_pointer, c.name))
    return out

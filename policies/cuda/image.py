"""Image references and the CUDA version their tags reveal.

Reference grammar (distribution/reference): ``[registry[:port]/]path[:tag][@digest]``; the first
path component is a registry when it contains ``.`` or ``:`` or is ``localhost``.  Recognised tags:

* ``nvidia/cuda`` on any registry or mirror: ``<X.Y[.Z]>[-cudnn[N]]-<base|runtime|devel>[-<os>]``
  (e.g. ``12.4.1-cudnn-devel-ubuntu22.04``, ``10.0-cudnn7-runtime-ubuntu16.04``, ``9.2-base``);
* NGC frameworks ``nvidia/<framework>:YY.MM[-py3|-py2|-tf1-py3|-tf2-py3]`` via ngc_cuda.json;
* ``pytorch/pytorch:<torch>-cuda<X.Y>-cudnn<N>-<runtime|devel>`` (major.minor only).

Anything else — ``latest``, digest-only references, vLLM or TensorFlow tags whose CUDA is not
documented — resolves to nothing: the version is never invented.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies import patterns
from policies.boundedcache import small_key_cache
from policies.cuda.knowledge import knowledge
from policies.cuda.versions import Version, parse_version

# The longest valid reference: a 255-character name (distribution/reference reference.go,
# ``RepositoryNameTotalLengthMax``), ``:`` and a 128-character tag (regexp.go ``[\w][\w.-]{0,127}``),
# ``@sha512:`` and 128 hex digits.  Longer strings are no image any registry serves; they are
# judged but not cached.
MAX_REFERENCE_CHARS = 255 + 1 + 128 + 8 + 128

_CUDA_TAG = patterns.compile(
    r"^(?P<version>\d+\.\d+(?:\.\d+)?)(?:-cudnn\d*)?-(?:base|runtime|devel)(?:-[a-z]+\d+(?:\.\d+)?)?$"
)
NGC_TAG = patterns.compile(r"^(?P<release>\d{2}\.\d{2})(?:-(?:py3|py2|tf1-py3|tf2-py3))?$")  # NGC plain tags
_PYTORCH_TAG = patterns.compile(r"^\d+(?:\.\d+)*(?:[a-z0-9]*)?-cuda(?P<version>\d+\.\d+)-cudnn\d+-(?:runtime|devel)$")


@dataclass(frozen=True, slots=True)
class ImageRef:
    registry: str
    repository: str  # without registry; Docker Hub official images carry "library/"
    tag: str | None
    digest: str | None

    def path_endswith(self, suffix: str) -> bool:
        return self.repository == suffix or self.repository.endswith("/" + suffix)


@small_key_cache(maxsize=4096, max_key_chars=MAX_REFERENCE_CHARS)
def parse_image(reference: str) -> ImageRef | None:
    ref = reference.strip()
    if not ref or len(ref.split(None, 1)) != 1:  # whitespace inside: no reference
        return None
    name, _, digest = ref.partition("@")
    tag: str | None = None
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
        if not tag:
            return None
    if not name:
        return None
    first, sep, rest = name.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        registry, repository = first, rest
    else:
        registry, repository = "docker.io", name
    if registry == "docker.io" and "/" not in repository:
        repository = "library/" + repository
    if not repository or repository != repository.lower():  # path components are lowercase
        return None
    return ImageRef(registry, repository, tag, digest or None)


@dataclass(frozen=True, slots=True)
class ImageCuda:
    """The CUDA version an image tag reveals, where it came from, and NGC's own forward-compat list."""

    version: Version
    source: str
    datacenter_drivers: tuple[Version, ...] | None = None


@small_key_cache(maxsize=2048, max_key_chars=MAX_REFERENCE_CHARS)
def cuda_from_image(reference: str) -> ImageCuda | None:
    ref = parse_image(reference)
    if ref is None or ref.tag is None:
        return None
    if ref.path_endswith("nvidia/cuda"):
        m = _CUDA_TAG.match(ref.tag)
        version = parse_version(m.group("version")) if m else None
        return ImageCuda(version, "nvidia/cuda image tag") if version else None
    if ref.path_endswith("pytorch/pytorch"):
        m = _PYTORCH_TAG.match(ref.tag)
        version = parse_version(m.group("version")) if m else None
        return ImageCuda(version, "pytorch/pytorch image tag") if version else None
    kb = knowledge()
    for framework in kb.ngc_frameworks():
        if ref.path_endswith("nvidia/" + framework):
            m = NGC_TAG.match(ref.tag)
            row = kb.ngc_release(framework, m.group("release")) if m else None
            if row is None:
                return None
            return ImageCuda(
                row.cuda,
                f"NGC {framework} {row.release} release notes",
                row.datacenter_drivers or None,
            )
    return None

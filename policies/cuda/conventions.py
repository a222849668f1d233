"""Offline knowledge: what an image's name says about the CUDA it carries.

Each convention is sourced in ``policies/data/image_conventions.json`` (cited here by id) and the
per-release tables in ``policies/data``.  ``offline_cuda`` answers one of

* ``cuda`` — the name determines the CUDA version (with where that came from);
* ``no-cuda`` — a plain OS/language image: no CUDA in the image, so no driver requirement;
* ``unknown`` — anything else (``latest``, dates, SHAs, product versions, unknown repositories):
  never guessed; where the knowledge base knows why an image cannot be resolved (an NGC variant or
  month no source states), ``source`` says so.

Conventions, in the order they are tried:

* ``nvidia-cuda``, ``pytorch``, ``ngc-framework`` — see ``policies.cuda.image``;
* ``ngc-same-month`` — ``nvcr.io/nvidia/pytorch:YY.MM`` without notes of its own: the CUDA of the
  NGC YY.MM release, labelled as an inference;
* ``ngc-variant`` — ``nvcr.io/nvidia/tritonserver:YY.MM-trtllm-python-py3`` and ``-vllm-python-py3``:
  that month's variant, from Triton's compatibility matrix (variants lag the main image, so never the
  release's CUDA); ``-py3-sdk``, ``-py3-min``, ``-py3-igpu`` and NeMo tags stay unknown, saying why;
* ``k8s-cuda-sample`` — ``nvcr.io/nvidia/k8s/cuda-sample:<sample>-cuda<X.Y.Z>[-<os>]``;
* ``vllm`` — ``vllm/vllm-openai:v<version>`` (per architecture);
* ``tensorflow`` — ``tensorflow/tensorflow:<version>-gpu[-jupyter]``;
* ``ray-cu`` — ``rayproject/{ray,ray-ml,ray-llm}:…-cuXY[-<arch>]`` (``-gpu`` and ray-ml's bare tags
  alias a per-release default platform that is not known for every release: not resolved);
* ``ray-cpu`` — ``rayproject/{ray,ray-ml}:…-cpu[-<arch>]`` and ``rayproject/ray`` tags without a
  platform (an alias of ``-cpu``): ``no-cuda``;
* ``paddle``, ``paddle-dev`` — ``paddlepaddle/paddle:…-cudaX.Y-…`` and ``:cudaXYZ-dev``;
* ``gcp-hf-dlc`` — Google Cloud's Hugging Face DLCs ``huggingface-<product>-cuXYZ.<version>…``;
* ``plain-os`` — Docker Official Images of operating systems and Python: ``no-cuda``;
* ``no-cuda-image`` — listed repositories built without CUDA (AMD's ROCm framework images,
  Kubernetes test images): ``no-cuda``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from policies import patterns
from policies.boundedcache import small_key_cache
from policies.cuda.image import MAX_REFERENCE_CHARS, NGC_TAG, ImageCuda, ImageRef, cuda_from_image, parse_image
from policies.cuda.knowledge import knowledge
from policies.cuda.tables import no_nccl_tag_matches, tables
from policies.cuda.versions import format_version, parse_version

OfflineStatus = Literal["cuda", "no-cuda", "unknown"]

_DOCKER_HUB = ("docker.io", "index.docker.io", "registry-1.docker.io")
_NGC_TAG = patterns.compile(r"^(?P<release>\d{2}\.\d{2})(?:-py3)?$")
_NGC_VARIANT_TAG = patterns.compile(r"^(?P<release>\d{2}\.\d{2})-(?P<variant>[a-z0-9]+(?:-[a-z0-9]+)*)$")
_SAMPLE_TAG = patterns.compile(r"^[a-z0-9][a-z0-9_.]*-cuda(?P<version>\d+\.\d+\.\d+)(?:-[a-z]+\d+(?:\.\d+)?)?$")
_VLLM_TAG = patterns.compile(r"^v(?P<version>\d+(?:\.\d+)+(?:\.post\d+)?)$")
_TF_TAG = patterns.compile(r"^(?P<version>\d+\.\d+\.\d+)-gpu(?:-jupyter)?$")
_RAY_CU = patterns.compile(r"^cu(?P<major>1\d)(?P<minor>\d)$")
_PADDLE_CUDA = patterns.compile(r"(?:^|-)cuda(?P<version>\d+\.\d+)(?:-|$)")
_PADDLE_DEV = patterns.compile(r"^cuda(?P<major>1\d)(?P<minor>\d)-dev$")
_DLC_NAME = patterns.compile(r"^huggingface-[a-z0-9-]+?-cu(?P<major>1\d)(?P<minor>\d)\.\d")
_DLC_TGI_CU124_FROM = (12, 4)


@dataclass(frozen=True, slots=True)
class Offline:
    status: OfflineStatus
    cuda: ImageCuda | None = None
    source: str = ""  # for "cuda" the same as cuda.source; for "no-cuda" why; for "unknown" why, when known
    convention: str = ""  # the id in image_conventions.json (empty when unknown: no convention applied)
    caveat: str = ""  # a known way the image's own NVIDIA_REQUIRE_CUDA understates the need


UNKNOWN = Offline("unknown")


def _found(version: tuple[int, ...] | None, source: str, convention: str, caveat: str = "") -> Offline:
    if version is None:
        return UNKNOWN
    return Offline("cuda", ImageCuda(version, source), source, convention, caveat)


def _on_docker_hub(ref: ImageRef) -> bool:
    return ref.registry in _DOCKER_HUB


def _ngc_same_month(ref: ImageRef) -> Offline | None:
    tb = tables()
    for framework in sorted(tb.ngc_infer_for):
        if not (ref.registry == "nvcr.io" and ref.repository == f"nvidia/{framework}"):
            continue
        m = _NGC_TAG.match(ref.tag or "")
        row = tb.ngc_releases.get(m.group("release")) if m else None
        if row is None:
            return _ngc_month_unknown(ref) or UNKNOWN
        release = m.group("release") if m else ""
        source = (
            f"NGC {release} release, a same-month NGC release inference for {framework} "
            f"(NGC {release} framework containers are built on CUDA {format_version(row.cuda)}: "
            f"{row.source.split(';', 1)[0]})"
        )
        return _found(row.cuda, source, "ngc-same-month")
    return None


def _ngc_month_unknown(ref: ImageRef) -> Offline | None:
    """An NGC framework's plain ``YY.MM[-py3]`` tag whose month no statement in the tables covers."""
    m = NGC_TAG.match(ref.tag or "")
    if m is None:
        return None
    for framework in sorted(knowledge().ngc_frameworks() | tables().ngc_infer_for):
        if ref.path_endswith("nvidia/" + framework):
            release = m.group("release")
            return Offline(
                "unknown",
                source=f"no release statement in gpuguard's tables gives the CUDA of NGC {framework} {release}",
            )
    return None


def _ngc_variant(ref: ImageRef) -> Offline | None:
    """``nvidia/<framework>:YY.MM-<variant>``: the variant's own month row, else why it stays unknown."""
    tb = tables()
    for framework in tb.ngc_variant_frameworks:
        if not ref.path_endswith("nvidia/" + framework):
            continue
        m = _NGC_VARIANT_TAG.match(ref.tag or "")
        if m is not None:
            release, variant = m.group("release"), m.group("variant")
            row = tb.ngc_variants.get((framework, variant, release))
            if row is not None:
                listed = row.source.split(" (", 1)[0]
                return _found(row.cuda, f"NGC {framework} {release}-{variant} (listed in {listed})", "ngc-variant")
            if (framework, variant) in tb.ngc_mapped_variants:
                return Offline(
                    "unknown",
                    source=f"no statement gives the CUDA of NGC {framework} {release}-{variant}: the variant's months "
                    "are mapped one by one, and variants lag the main image",
                )
            why = tb.ngc_unresolved.get((framework, variant))
            if why is not None:
                return Offline("unknown", source=why.reason)
        why = tb.ngc_unresolved.get((framework, ""))
        return Offline("unknown", source=why.reason) if why is not None else None
    return None


def _k8s_sample(ref: ImageRef) -> Offline | None:
    if not (ref.registry == "nvcr.io" and ref.repository == "nvidia/k8s/cuda-sample"):
        return None
    m = _SAMPLE_TAG.match(ref.tag or "")
    if m is None:
        return UNKNOWN
    version = m.group("version")
    return _found(
        parse_version(version),
        f"cuda-sample tag convention (NVIDIA/k8s-samples: <sample>-cuda{version} is built FROM nvidia/cuda:{version})",
        "k8s-cuda-sample",
    )


def _vllm(ref: ImageRef, arch: str) -> Offline | None:
    if not (_on_docker_hub(ref) and ref.repository == "vllm/vllm-openai"):
        return None
    m = _VLLM_TAG.match(ref.tag or "")
    rows = tables().vllm.get(m.group("version")) if m else None
    row = rows.get(arch) if rows else None
    if row is None:
        return UNKNOWN
    cuda = format_version(row.cuda)
    return _found(
        row.cuda,
        f"vLLM {ref.tag} release image for {arch} (its release pipeline builds it FROM nvidia/cuda:{cuda})",
        "vllm",
    )


def _tensorflow(ref: ImageRef) -> Offline | None:
    if not (_on_docker_hub(ref) and ref.repository == "tensorflow/tensorflow"):
        return None
    m = _TF_TAG.match(ref.tag or "")
    row = tables().tensorflow.get(m.group("version")) if m else None
    if row is None or m is None:
        return UNKNOWN
    return _found(
        row.cuda,
        f"TensorFlow {m.group('version')} tested build configuration (CUDA {format_version(row.cuda)})",
        "tensorflow",
    )


def _ray(ref: ImageRef) -> Offline | None:
    if not (_on_docker_hub(ref) and ref.repository in ("rayproject/ray", "rayproject/ray-ml", "rayproject/ray-llm")):
        return None
    tokens = (ref.tag or "latest").split("-")
    for token in tokens:
        m = _RAY_CU.match(token)
        if m:
            return _found(
                (int(m.group("major")), int(m.group("minor"))),
                f"Ray image tag -{token} (Ray's -cuXY platform tag: an NVIDIA CUDA {m.group('major')}."
                f"{m.group('minor')} base image)",
                "ray-cu",
            )
    platform = "cpu" if "cpu" in tokens[1:] else "gpu" if "gpu" in tokens[1:] else None
    # Ray's tags without a platform alias -cpu for the ray image only; ray-llm is built for CUDA only.
    if (platform == "cpu" and ref.repository != "rayproject/ray-llm") or (
        platform is None and ref.repository == "rayproject/ray"
    ):
        return Offline(
            "no-cuda",
            source=(
                f"Ray image {ref.repository}:{ref.tag or 'latest'}: Ray's CPU platform, built on Ubuntu without CUDA"
            ),
            convention="ray-cpu",
        )
    return UNKNOWN


def _paddle(ref: ImageRef) -> Offline | None:
    if not ref.path_endswith("paddlepaddle/paddle"):
        return None
    tag = ref.tag or ""
    m = _PADDLE_CUDA.search(tag)
    if m:
        return _found(
            parse_version(m.group("version")),
            f"PaddlePaddle image tag -cuda{m.group('version')} (PaddlePaddle's docker image list)",
            "paddle",
        )
    d = _PADDLE_DEV.match(tag)
    if d:
        return _found(
            (int(d.group("major")), int(d.group("minor"))),
            f"PaddlePaddle image tag {tag} (PaddlePaddle's docker image list)",
            "paddle-dev",
        )
    return UNKNOWN


def _gcp_dlc(ref: ImageRef) -> Offline | None:
    if not (ref.registry.endswith("-docker.pkg.dev") and ref.repository.startswith("deeplearning-platform-release/")):
        return None
    name = ref.repository.rsplit("/", 1)[-1]
    m = _DLC_NAME.match(name)
    if m is None:
        return UNKNOWN
    version = (int(m.group("major")), int(m.group("minor")))
    caveat = ""
    if name.startswith("huggingface-text-generation-inference-") and version >= _DLC_TGI_CU124_FROM:
        caveat = (
            "this TGI image builds PyTorch and its kernels on CUDA 12.4 but its final stage is "
            "nvidia/cuda:12.1.0-base, so its own NVIDIA_REQUIRE_CUDA (cuda>=12.1) understates the need"
        )
    return _found(
        version,
        f"Google Cloud Hugging Face DLC name -cu{m.group('major')}{m.group('minor')} "
        f"(huggingface/Google-Cloud-Containers: built on CUDA {version[0]}.{version[1]})",
        "gcp-hf-dlc",
        caveat,
    )


def _plain(ref: ImageRef) -> Offline | None:
    if not _on_docker_hub(ref) or not ref.repository.startswith("library/"):
        return None
    name = ref.repository[len("library/") :]
    if name in tables().plain:
        return Offline(
            "no-cuda",
            source=f"Docker Official Image {name}: an OS/language base image without CUDA",
            convention="plain-os",
        )
    return None


def _repository_key(ref: ImageRef) -> str:
    """``registry/repository``, as the repository tables key images (Docker Hub as docker.io)."""
    return f"{'docker.io' if _on_docker_hub(ref) else ref.registry}/{ref.repository}"


def _no_cuda_image(ref: ImageRef) -> Offline | None:
    entry = tables().no_cuda.get(_repository_key(ref))
    if entry is None:
        return None
    return Offline("no-cuda", source=f"{entry[0]}: an image built without CUDA", convention="no-cuda-image")


def without_nccl(reference: str) -> str | None:
    """What the image is, when it is known to carry neither NCCL nor PyTorch: a plain OS/language
    base image (no CUDA at all) or a CUDA sample built on a CUDA base image; else None."""
    ref = parse_image(reference)
    if ref is None:
        return None
    if _plain(ref) is not None:
        return "a plain OS/language base image (no CUDA, so no NCCL or PyTorch)"
    entry = tables().no_nccl.get(_repository_key(ref))
    if entry is None or not no_nccl_tag_matches(entry, ref.tag):
        return None
    return f"{entry.what}, built without NCCL or PyTorch"


DIGEST_NOTE = "by its tag; the runtime pulls the pinned digest, whose config a registry lookup reads"


@small_key_cache(maxsize=4096, max_key_chars=MAX_REFERENCE_CHARS + 16)
def offline_cuda(reference: str, arch: str = "amd64") -> Offline:
    """What the image reference alone says, for linux/``arch``.  A reference pinned by digest as
    well (``repo:tag@sha256:…``) is judged by its tag, and says so: the runtime pulls the digest."""
    found = _offline_cuda(reference, arch)
    ref = parse_image(reference) if found.status != "unknown" and "@" in reference else None
    if ref is None or ref.digest is None or ref.tag is None:
        return found
    source = f"{found.source} ({DIGEST_NOTE})"
    cuda = dataclasses.replace(found.cuda, source=f"{found.cuda.source} ({DIGEST_NOTE})") if found.cuda else None
    return dataclasses.replace(found, source=source, cuda=cuda)


def _offline_cuda(reference: str, arch: str) -> Offline:
    known = cuda_from_image(reference)
    if known is not None:
        convention = {"nvidia/cuda image tag": "nvidia-cuda", "pytorch/pytorch image tag": "pytorch"}.get(
            known.source, "ngc-framework"
        )
        return Offline("cuda", known, known.source, convention)
    ref = parse_image(reference)
    if ref is None:
        return UNKNOWN
    for attempt in (
        _ngc_variant(ref),
        _ngc_same_month(ref),
        _k8s_sample(ref),
        _vllm(ref, arch),
        _tensorflow(ref),
        _ray(ref),
        _paddle(ref),
        _gcp_dlc(ref),
        _plain(ref),
        _no_cuda_image(ref),
        _ngc_month_unknown(ref),
    ):
        if attempt is not None:
            return attempt
    return UNKNOWN

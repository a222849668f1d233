"""The image-name tables in ``policies/data/``: typed, validated views, loaded once.

* ``image_conventions.json`` — every naming convention ``policies.cuda.conventions`` applies;
* ``ngc_releases.json`` — NGC monthly release → CUDA, for the same-month inference;
* ``ngc_variants.json`` — NGC container variants (tritonserver ``YY.MM-trtllm-python-py3`` …) → CUDA,
  and the variants no source resolves, with the reason;
* ``tensorflow_cuda.json`` — TensorFlow release → CUDA (tested build configurations);
* ``vllm_cuda.json`` — vLLM release → CUDA per architecture (release pipeline and Dockerfile);
* ``plain_images.json`` — Docker Official Images that carry no CUDA;
* ``no_cuda_images.json`` — other image repositories that carry no CUDA (ROCm, Kubernetes test images);
* ``no_nccl_images.json`` — CUDA image repositories that carry neither NCCL nor PyTorch (CUDA samples,
  Ollama's releases before NCCL came in).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from policies.cuda.knowledge import KnowledgeError, _rows, _version
from policies.cuda.versions import Version, parse_version

TABLE_FILES = (
    "image_conventions.json",
    "ngc_releases.json",
    "ngc_variants.json",
    "tensorflow_cuda.json",
    "vllm_cuda.json",
    "plain_images.json",
    "no_cuda_images.json",
    "no_nccl_images.json",
)


@dataclass(frozen=True, slots=True)
class Row:
    cuda: Version
    source: str


@dataclass(frozen=True, slots=True)
class Unresolved:
    reason: str  # why no source determines the CUDA, as a clause for messages
    source: str


@dataclass(frozen=True, slots=True)
class NoNccl:
    what: str
    source: str
    # None: every tag; else only release tags ``X.Y.Z`` up to this one (later releases may add NCCL)
    tags_through: tuple[int, ...] | None


def _release(text: str) -> tuple[int, ...] | None:
    """``X.Y.Z`` (a leading ``v`` allowed) as numbers; None for any other tag (``latest``, ``0.1-rocm``)."""
    version = parse_version(text.removeprefix("v"))
    return version if version is not None and len(version) == 3 else None


def no_nccl_tag_matches(row: NoNccl, tag: str | None) -> bool:
    if row.tags_through is None:
        return True
    release = _release(tag) if tag is not None else None
    return release is not None and release <= row.tags_through


def _no_nccl_row(r: dict[str, Any]) -> NoNccl:
    through = r.get("tagsThrough")
    bound = _release(str(through)) if through is not None else None
    if through is not None and bound is None:
        raise KnowledgeError(f"no_nccl_images.json: tagsThrough {through!r} of {r['image']} is not X.Y.Z")
    return NoNccl(str(r["what"]), str(r["source"]), bound)


@dataclass(frozen=True)
class Tables:
    conventions: dict[str, str]  # id → source
    ngc_releases: dict[str, Row]
    ngc_infer_for: frozenset[str]
    ngc_variants: dict[tuple[str, str, str], Row]  # (framework, variant, release) → row
    ngc_unresolved: dict[tuple[str, str], Unresolved]  # (framework, variant or "" for any tag) → why
    tensorflow: dict[str, Row]
    vllm: dict[str, dict[str, Row]]  # version → arch → row
    plain: dict[str, str]  # Docker Hub library name → source
    no_cuda: dict[str, tuple[str, str]]  # "registry/repository" → (what it is, source)
    no_nccl: dict[str, NoNccl]  # "registry/repository" → row

    def convention(self, convention_id: str) -> str:
        return self.conventions[convention_id]

    @functools.cached_property
    def ngc_variant_frameworks(self) -> tuple[str, ...]:
        """The NGC frameworks with variant rows or unresolved entries, sorted."""
        return tuple(sorted({f for f, _, _ in self.ngc_variants} | {f for f, _ in self.ngc_unresolved}))

    @functools.cached_property
    def ngc_mapped_variants(self) -> frozenset[tuple[str, str]]:
        """(framework, variant) pairs with at least one month in ngc_variants.json."""
        return frozenset((f, v) for f, v, _ in self.ngc_variants)


def _doc(name: str) -> dict[str, Any]:
    doc = json.loads(resources.files("policies").joinpath("data", name).read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise KnowledgeError(f"{name}: expected an object")
    return doc


def _infer_for() -> frozenset[str]:
    names = _doc("ngc_releases.json").get("inferFor")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise KnowledgeError("ngc_releases.json: 'inferFor' must be a list of framework names")
    return frozenset(names)


def _unresolved() -> dict[tuple[str, str], Unresolved]:
    entries = _doc("ngc_variants.json").get("unresolved")
    if not isinstance(entries, list):
        raise KnowledgeError("ngc_variants.json: 'unresolved' must be a list")
    out: dict[tuple[str, str], Unresolved] = {}
    for i, e in enumerate(entries):
        fields = [e.get(k) if isinstance(e, dict) else None for k in ("framework", "variant", "reason", "source")]
        if not all(isinstance(f, str) for f in fields) or not all(fields[j] for j in (0, 2, 3)):
            raise KnowledgeError(f"ngc_variants.json: unresolved[{i}] needs framework, variant, reason and source")
        framework, variant, reason, source = (str(f) for f in fields)
        out[(framework, variant)] = Unresolved(reason, source)
    return out


def _load() -> Tables:
    conventions = {str(r["id"]): r["source"] for r in _rows("image_conventions.json")}
    ngc = {
        str(r["release"]): Row(_version("ngc_releases.json", r, "cuda"), r["source"])
        for r in _rows("ngc_releases.json")
    }
    tensorflow = {
        str(r["version"]): Row(_version("tensorflow_cuda.json", r, "cuda"), r["source"])
        for r in _rows("tensorflow_cuda.json")
    }
    vllm: dict[str, dict[str, Row]] = {}
    for r in _rows("vllm_cuda.json"):
        per_arch = r.get("cuda")
        if not isinstance(per_arch, dict) or not per_arch:
            raise KnowledgeError(f"vllm_cuda.json: version {r.get('version')!r} needs a 'cuda' mapping")
        vllm[str(r["version"])] = {
            str(arch): Row(_version("vllm_cuda.json", {"v": v}, "v"), r["source"]) for arch, v in per_arch.items()
        }
    variants = {
        (str(r["framework"]), str(r["variant"]), str(r["release"])): Row(
            _version("ngc_variants.json", r, "cuda"), r["source"]
        )
        for r in _rows("ngc_variants.json")
    }
    plain = {str(r["name"]): r["source"] for r in _rows("plain_images.json")}
    no_cuda = {str(r["image"]): (str(r["what"]), r["source"]) for r in _rows("no_cuda_images.json")}
    no_nccl = {str(r["image"]): _no_nccl_row(r) for r in _rows("no_nccl_images.json")}
    return Tables(conventions, ngc, _infer_for(), variants, _unresolved(), tensorflow, vllm, plain, no_cuda, no_nccl)


@cache
def tables() -> Tables:
    return _load()

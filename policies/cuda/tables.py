"""The image-name tables in ``policies/data/``: typed, validated views, loaded once.

* ``image_conventions.json`` — every naming convention ``policies.cuda.conventions`` applies;
* ``ngc_releases.json`` — NGC monthly release → CUDA, for the same-month inference;
* ``tensorflow_cuda.json`` — TensorFlow release → CUDA (tested build configurations);
* ``vllm_cuda.json`` — vLLM release → CUDA per architecture (release pipeline and Dockerfile);
* ``plain_images.json`` — Docker Official Images that carry no CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from policies.cuda.knowledge import KnowledgeError, _rows, _version
from policies.cuda.versions import Version

TABLE_FILES = (
    "image_conventions.json",
    "ngc_releases.json",
    "tensorflow_cuda.json",
    "vllm_cuda.json",
    "plain_images.json",
)


@dataclass(frozen=True, slots=True)
class Row:
    cuda: Version
    source: str


@dataclass(frozen=True)
class Tables:
    conventions: dict[str, str]  # id → source
    ngc_releases: dict[str, Row]
    ngc_infer_for: frozenset[str]
    tensorflow: dict[str, Row]
    vllm: dict[str, dict[str, Row]]  # version → arch → row
    plain: dict[str, str]  # Docker Hub library name → source

    def convention(self, convention_id: str) -> str:
        return self.conventions[convention_id]


def _infer_for() -> frozenset[str]:
    import json
    from importlib import resources

    doc = json.loads(resources.files("policies").joinpath("data", "ngc_releases.json").read_text(encoding="utf-8"))
    names = doc.get("inferFor")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise KnowledgeError("ngc_releases.json: 'inferFor' must be a list of framework names")
    return frozenset(names)


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
    plain = {str(r["name"]): r["source"] for r in _rows("plain_images.json")}
    return Tables(conventions, ngc, _infer_for(), tensorflow, vllm, plain)


@cache
def tables() -> Tables:
    return _load()

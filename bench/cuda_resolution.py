"""Offline CUDA resolution rate over the images of GPU containers in a manifest corpus.

    .venv/bin/python bench/cuda_resolution.py [--corpus ../shared/corpus/real] [--format text|json]

Every container the CUDA rule would judge (a container allocated a GPU, in a GPU-related pod
template) is collected from every document of the corpus; for each distinct image reference written
as a string the offline knowledge answers a CUDA version (with its source), "no-cuda" (an image
built without CUDA) or "unknown" (with the reason, where the knowledge base knows one).  Prints one
line per image and the counts — known, none, unknown — per distinct image and per container.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gpuguard.sources.yamlsafe import InputError, load_all_plain, read_text  # noqa: E402
from policies.config import Config  # noqa: E402
from policies.cuda.conventions import offline_cuda  # noqa: E402
from policies.cuda.versions import format_version  # noqa: E402
from policies.engine import images_in  # noqa: E402


def corpus_images(corpus: Path) -> Counter[str]:
    """Image reference → number of GPU containers using it (string references only)."""
    config = Config()
    counts: Counter[str] = Counter()
    for path in sorted(p for p in corpus.iterdir() if p.suffix in (".yaml", ".yml", ".json")):
        try:
            documents = list(load_all_plain(read_text(path), path.name))
        except InputError:
            continue
        for doc in documents:
            if isinstance(doc, dict):
                counts.update(use.image for use in images_in(doc, config, rules=("gpu-cuda-driver-mismatch",)))
    return counts


def resolve_all(counts: Counter[str]) -> list[dict[str, object]]:
    rows = []
    for image in sorted(counts):
        found = offline_cuda(image)
        rows.append(
            {
                "image": image,
                "containers": counts[image],
                "status": found.status,
                "cuda": format_version(found.cuda.version) if found.cuda else None,
                "source": found.source,
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "tests" / "corpus" / "real")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        sys.exit(f"no corpus at {args.corpus}")
    counts = corpus_images(args.corpus)
    rows = resolve_all(counts)
    by_status = Counter(str(r["status"]) for r in rows)
    containers: Counter[str] = Counter()
    for r in rows:
        containers[str(r["status"])] += int(str(r["containers"]))
    summary = {
        "images": len(rows),
        "containers": sum(counts.values()),
        "images_cuda": by_status["cuda"],
        "images_no_cuda": by_status["no-cuda"],
        "images_unknown": by_status["unknown"],
        "containers_cuda": containers["cuda"],
        "containers_no_cuda": containers["no-cuda"],
        "containers_unknown": containers["unknown"],
    }
    if args.format == "json":
        print(json.dumps({"rows": rows, "summary": summary}, indent=2))
        return 0
    width = max(len(str(r["image"])) for r in rows) if rows else 10
    for r in rows:
        answer = f"{r['cuda']}  {r['source']}" if r["status"] == "cuda" else str(r["status"])
        if r["status"] == "unknown" and r["source"]:
            answer = f"unknown  ({r['source']})"
        print(f"{r['image']!s:<{width}}  x{r['containers']}  {answer}")
    print()
    print(
        f"images:     {summary['images_cuda']}/{summary['images']} resolve to a CUDA version, "
        f"{summary['images_no_cuda']} need no CUDA, {summary['images_unknown']} unknown "
        f"({summary['images_cuda'] + summary['images_no_cuda']}/{summary['images']} determined)"
    )
    print(
        f"containers: {summary['containers_cuda']}/{summary['containers']} resolve to a CUDA version, "
        f"{summary['containers_no_cuda']} need no CUDA, {summary['containers_unknown']} unknown"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

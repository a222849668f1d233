"""``gpuguard explain-image IMAGE [--cluster FILE] [--format text|json]``.

Prints the CUDA version gpuguard resolves for an image, where it came from, what the NVIDIA
runtime will check and what driver it needs; with a cluster snapshot (``--cluster sample`` for the
bundled one) also each GPU node's driver and whether it runs the image natively, in a
compatibility mode, or not at all.  ``--format json`` prints one object::

    {"image": …, "cuda": {"version": "12.8.1", "source": "…"} | null,
     "requirement": "<NVIDIA_REQUIRE_CUDA of the image config> | null",
     "nodes": [{"name": …, "driver": "550.90.07" | null,
                "verdict": "native|minor-version|forward|incompatible|unknown"}]}

Exit status: 0, or 2 for bad usage or an unreadable cluster snapshot.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policies.cuda.explain import ImageReport
    from policies.images import ImageConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", help="image reference, e.g. nvcr.io/nvidia/pytorch:24.05-py3")
    parser.add_argument(
        "--cluster",
        metavar="FILE",
        help="cluster snapshot (kubectl get nodes,runtimeclasses -o yaml), or 'sample' for the bundled one",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format")


def report(image: str, cluster: str | None, config: ImageConfig | None = None) -> ImageReport:
    """The report for ``image``; ``config`` is the image config a registry lookup found, if any."""
    from policies.cuda.explain import explain_image

    facts = None
    if cluster is not None:
        from gpuguard.sources.snapshot import load_cluster_facts

        facts = load_cluster_facts(cluster)
    return explain_image(image, facts, config)


def run(args: argparse.Namespace, config: ImageConfig | None = None) -> int:
    from gpuguard.sources.yamlsafe import InputError
    from policies.cuda.explain import render_text

    try:
        result = report(args.image, args.cluster, config)
    except InputError as exc:
        print(f"gpuguard explain-image: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(render_text(result))
    return 0

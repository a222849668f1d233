"""``gpuguard explain-image IMAGE [--cluster FILE] [--format text|json]``.

Prints the CUDA version gpuguard resolves for an image, where it came from, what the NVIDIA
runtime will check and what driver it needs; with a cluster snapshot (``--cluster sample`` for the
bundled one) also each GPU node's driver and whether it runs the image natively, in a
compatibility mode, or not at all.  ``--format json`` prints one object::

    {"image": …, "cuda": {"version": "12.8.1", "source": "…"} | null,
     "cudaStatus": "known|none|unknown", "cudaReason": "…" | null,
     "requirement": "<NVIDIA_REQUIRE_CUDA of the image config> | null",
     "nodes": [{"name": …, "driver": "550.90.07" | null,
                "verdict": "native|minor-version|forward|incompatible|unknown"}]}

``cuda`` is null both for an image built without CUDA (``cudaStatus: none``: it needs no particular
driver) and for one whose CUDA gpuguard cannot determine (``unknown``: never guessed);
``cudaReason`` says which and why (null when ``known``).

Exit status: 0, or 2 for bad usage, an invalid image reference (the message says what is wrong with it)
or an unreadable cluster snapshot.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

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
    parser.add_argument("--config", metavar="FILE", help="gpuguard config (for its registry: settings)")
    from gpuguard.registry.cli import add_arguments as add_registry_arguments

    add_registry_arguments(parser, default_on=False)


def report(image: str, cluster: str | None, config: ImageConfig | None = None) -> ImageReport:
    """The report for ``image``; ``config`` is the image config a registry lookup found, if any."""
    from policies.cuda.explain import explain_image

    facts = None
    if cluster is not None:
        from gpuguard.sources.snapshot import load_cluster_facts

        facts = load_cluster_facts(cluster)
    return explain_image(image, facts, config)


def _registry_section(
    args: argparse.Namespace, image: str, configs: dict[str, ImageConfig]
) -> list[dict[str, Any]] | None:
    """What the image's registry says, per architecture of the GPU nodes; None when off."""
    from gpuguard.registry.cli import effective_settings, prefetch
    from gpuguard.registry.facts import DEFAULT_ARCHES, gpu_node_arches
    from gpuguard.sources.configfile import load_config_file

    config, _ = load_config_file(args.config)
    settings = effective_settings(config.registry, args)
    if settings is None:
        return None
    if args.cluster:
        from gpuguard.sources.snapshot import load_cluster_facts

        arches = gpu_node_arches(load_cluster_facts(args.cluster), config)
    else:
        arches = DEFAULT_ARCHES
    view, cache_problem = prefetch(settings, [(image, arch) for arch in arches])
    if cache_problem:
        print(f"gpuguard explain-image: note: {cache_problem}", file=sys.stderr)
    section = []
    for (_, arch), lookup in view.items():
        entry: dict[str, Any] = {"arch": arch, "status": lookup.status, "detail": lookup.detail or None}
        if lookup.config is not None:
            configs[arch] = lookup.config
            env = dict(lookup.config.env)
            entry.update(
                digest=lookup.config.digest,
                source=lookup.config.source,
                env={k: env[k] for k in ("CUDA_VERSION", "NVIDIA_REQUIRE_CUDA", "NVIDIA_DISABLE_REQUIRE") if k in env},
            )
        section.append(entry)
    return section


def _registry_text(section: list[dict[str, Any]]) -> list[str]:
    lines = []
    for entry in section:
        head = f"registry (linux/{entry['arch']}): "
        if entry["status"] != "found":
            lines.append(head + f"{entry['status']}: {entry['detail']}; judged by offline knowledge")
            continue
        shown = ", ".join(f"{k}={v}" for k, v in entry["env"].items()) or "no CUDA_VERSION or NVIDIA_REQUIRE_* in Env"
        lines.append(head + f"{shown} (from {entry['source']})")
    return lines


def _found_config(
    section: list[dict[str, Any]] | None, configs: dict[str, ImageConfig]
) -> ImageConfig | None:
    """The image config the registry returned (amd64 first, the usual GPU node architecture)."""
    if not section:
        return None
    for arch in ("amd64", *sorted(configs)):
        if arch in configs:
            return configs[arch]
    return None


def run(args: argparse.Namespace, config: ImageConfig | None = None) -> int:
    from gpuguard.registry.cli import RegistryUsageError
    from gpuguard.registry.reference import ReferenceError, parse
    from gpuguard.sources.yamlsafe import InputError
    from policies.cuda.explain import render_text

    try:  # the reference grammar of distribution/reference, as registries and the kubelet read it
        parse(args.image)
    except ReferenceError as exc:
        print(f"gpuguard explain-image: {exc}", file=sys.stderr)
        return 2
    try:
        configs: dict[str, ImageConfig] = {}
        registry = _registry_section(args, args.image, configs)
        result = report(args.image, args.cluster, config or _found_config(registry, configs))
    except (InputError, RegistryUsageError) as exc:
        print(f"gpuguard explain-image: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        shown = result.to_json()
        if registry is not None:
            shown["registry"] = registry
        print(json.dumps(shown, indent=2))
    else:
        lines = [render_text(result)]
        if registry is not None:
            lines.extend(_registry_text(registry))
        print("\n".join(lines))
    return 0

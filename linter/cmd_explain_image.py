"""``gpuguard explain-image IMAGE [--cluster FILE] [--format text|json]``.

Prints the CUDA version gpuguard resolves for an image, where it came from and what driver it
needs; with a cluster snapshot (``--cluster sample`` for the bundled one) also each GPU node
group's driver and whether it runs the image natively, in a compatibility mode, or not at all.
Exit status: 0, or 2 for bad usage or an unreadable cluster snapshot.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


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


def _report(image: str, cluster: str | None) -> dict[str, Any]:
    from policies.cuda.compat import classify, native_cuda_text, requirement
    from policies.cuda.resolve import resolve
    from policies.cuda.versions import format_driver, format_version

    resolution = resolve(image)
    req = requirement(resolution) if resolution else None
    report: dict[str, Any] = {
        "image": image,
        "cuda": format_version(resolution.version) if resolution else None,
        "source": resolution.source if resolution else None,
        "known": req is not None,
        "nativeDriver": req.describe_native() if req else None,
        "minorVersionFloor": format_driver(req.mvc_floor) if req and req.mvc_floor else None,
        "forwardCompatibleDrivers": [format_driver(d) for d in req.forward_drivers] if req else [],
        "nodeGroups": None,
    }
    if cluster is None:
        return report
    from gpuguard.sources.snapshot import load_cluster_facts

    facts = load_cluster_facts(cluster)
    report["cluster"] = facts.source
    groups = []
    for group in facts.groups:
        node = group.representative
        driver = node.driver_version
        offers_nvidia = any(name.startswith("nvidia.com/") and q > 0 for name, q in node.allocatable.items())
        if driver is None and not offers_nvidia:
            continue
        mode = classify(req, driver, node.gpu_product).value if req else None
        groups.append(
            {
                "nodes": [m.name for m in group.members],
                "product": node.gpu_product,
                "driver": format_driver(driver) if driver else None,
                "nativeCuda": native_cuda_text(driver) if driver else None,
                "mode": mode,
            }
        )
    report["nodeGroups"] = groups
    return report


def _registry_section(args: argparse.Namespace, image: str) -> list[dict[str, Any]] | None:
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


def _text(report: dict[str, Any]) -> str:
    lines = [f"image: {report['image']}"]
    if report["cuda"] is None:
        lines.append("CUDA: unknown (no recognised tag; gpuguard does not guess — set the gpuguard.io/cuda-version "
                     "annotation or an imageRules entry)")
    else:
        lines.append(f"CUDA: {report['cuda']} (from {report['source']})")
        if not report["known"]:
            lines.append("driver requirements: not in the knowledge base")
        else:
            lines.append(f"native: driver {report['nativeDriver']}")
            if report["minorVersionFloor"]:
                lines.append(f"minor-version compatibility: driver {report['minorVersionFloor']} or newer "
                             "(PTX JIT and newer features fail)")
            if report["forwardCompatibleDrivers"]:
                lines.append("forward compatibility (data-center GPUs): driver "
                             + ", ".join(report["forwardCompatibleDrivers"]))
    if report["nodeGroups"] is not None:
        lines.append(f"node groups ({report.get('cluster')}):")
        if not report["nodeGroups"]:
            lines.append("  (no GPU nodes)")
        for g in report["nodeGroups"]:
            names = ", ".join(g["nodes"][:3]) + (f" and {len(g['nodes']) - 3} more" if len(g["nodes"]) > 3 else "")
            product = f" ({g['product']})" if g["product"] else ""
            if g["driver"]:
                native = f", CUDA {g['nativeCuda']}" if g["nativeCuda"] else ""
                driver = f"driver {g['driver']}{native}"
            else:
                driver = "no driver labels"
            verdict = g["mode"] or "CUDA version unknown"
            lines.append(f"  {names}{product}: {driver}: {verdict}")
    if report.get("registry") is not None:
        lines.extend(_registry_text(report["registry"]))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from gpuguard.registry.cli import RegistryUsageError
    from gpuguard.sources.yamlsafe import InputError

    try:
        report = _report(args.image, args.cluster)
        registry = _registry_section(args, args.image)
    except (InputError, RegistryUsageError) as exc:
        print(f"gpuguard explain-image: {exc}", file=sys.stderr)
        return 2
    if registry is not None:
        report["registry"] = registry
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        print(_text(report))
    return 0

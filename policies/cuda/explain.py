"""The chain of evidence behind one image's CUDA verdicts, for ``gpuguard explain-image``.

``explain_image(image, facts, config)`` takes an optional ``ImageConfig`` (what a registry said
about the image) so the face that fetches it passes it in; without one, the image name decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from policies.cuda.compat import Mode, Requirement, native_cuda_text, requirement
from policies.cuda.conventions import Offline, offline_cuda
from policies.cuda.need import Need, container_need
from policies.cuda.require import Start
from policies.cuda.tables import tables
from policies.cuda.verdict import VERDICT_NAMES, node_mode
from policies.cuda.versions import format_driver, format_version
from policies.facts import ClusterFacts, NodeGroup
from policies.images import DEFAULT_ARCH, ImageConfig, ImageLookup, node_arch


@dataclass(frozen=True, slots=True)
class GroupReport:
    nodes: tuple[str, ...]
    product: str | None
    driver: str | None
    native_cuda: str | None
    mode: Mode
    runtime: str  # why the runtime refuses it there, else ""


CudaStatus = Literal["known", "none", "unknown"]
CUDA_STATUS: dict[str, CudaStatus] = {"cuda": "known", "no-cuda": "none", "unknown": "unknown"}

# Said of an unknown image when nothing more specific is known about it.
NO_CONVENTION = "no sourced naming convention determines its CUDA version"
NO_CUDA_IN_CONFIG = "its image config declares no CUDA_VERSION or NVIDIA_REQUIRE_CUDA"


@dataclass(frozen=True, slots=True)
class ImageReport:
    image: str
    need: Need
    req: Requirement | None
    convention_source: str  # the full source of the naming convention used, if any
    cluster: str | None
    groups: tuple[GroupReport, ...] | None
    reason: str | None = None  # why the image needs no CUDA, or why its CUDA is unknown; None when known

    @property
    def cuda_status(self) -> CudaStatus:
        """``known`` (a CUDA version), ``none`` (the image carries no CUDA) or ``unknown``."""
        return CUDA_STATUS[self.need.status]

    def to_json(self) -> dict[str, Any]:
        """``{"image", "cuda": {"version", "source"} | null, "cudaStatus", "cudaReason", "requirement",
        "nodes": [...]}``: ``cuda`` is null both when the image needs no CUDA (``cudaStatus: none``) and
        when its CUDA is not known (``unknown``); ``cudaReason`` says why (null when ``known``)."""
        resolution = self.need.resolution
        nodes = [
            {"name": name, "driver": g.driver, "verdict": VERDICT_NAMES[g.mode]}
            for g in self.groups or ()
            for name in g.nodes
        ]
        cuda = {"version": format_version(resolution.version), "source": resolution.source} if resolution else None
        return {
            "image": self.image,
            "cuda": cuda,
            "cudaStatus": self.cuda_status,
            "cudaReason": self.reason,
            "requirement": self.need.image_requirement,
            "nodes": nodes,
        }


def _reason(need: Need, offline: Offline) -> str | None:
    if need.status == "cuda":
        return None
    if need.status == "no-cuda":
        return offline.source
    if need.config is not None:
        return NO_CUDA_IN_CONFIG
    return offline.source or NO_CONVENTION


def _is_gpu_group(group: NodeGroup) -> bool:
    node = group.representative
    offers = any(name.startswith("nvidia.com/") and q > 0 for name, q in node.allocatable.items())
    return node.driver_version is not None or offers


def explain_image(
    image: str, facts: ClusterFacts | None = None, config: ImageConfig | None = None, arch: str = DEFAULT_ARCH
) -> ImageReport:
    lookup = ImageLookup("found", config) if config is not None else None
    needs: dict[str, Need] = {}

    def need_for(node_architecture: str) -> Need:
        if node_architecture not in needs:
            needs[node_architecture] = container_need(image, {}, None, None, (), lookup, node_architecture)
        return needs[node_architecture]

    top = need_for(arch)
    req = requirement(top.resolution) if top.resolution else None
    groups: list[GroupReport] | None = None
    if facts is not None:
        groups = []
        for group in facts.groups:
            if not _is_gpu_group(group):
                continue
            node = group.representative
            need = need_for(node_arch(node.labels))
            node_req = requirement(need.resolution) if need.resolution else None
            mode, runtime = node_mode(node_req, need, node.labels) if node_req else (Mode.UNKNOWN, None)
            driver = node.driver_version
            groups.append(
                GroupReport(
                    nodes=tuple(m.name for m in group.members),
                    product=node.gpu_product,
                    driver=format_driver(driver) if driver else None,
                    native_cuda=native_cuda_text(driver) if driver else None,
                    mode=mode,
                    runtime=runtime.reason if runtime is not None and runtime.start is Start.REFUSED else "",
                )
            )
    offline = offline_cuda(image, arch)
    convention = tables().conventions.get(offline.convention, "") if offline.convention else ""
    return ImageReport(
        image=image,
        need=top,
        req=req,
        convention_source=convention,
        cluster=facts.source if facts is not None else None,
        groups=tuple(groups) if groups is not None else None,
        reason=_reason(top, offline),
    )


def _names(nodes: tuple[str, ...]) -> str:
    return ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")


def render_text(report: ImageReport) -> str:
    need, req = report.need, report.req
    lines = [f"image: {report.image}"]
    if need.resolution is not None:
        lines.append(f"CUDA: {format_version(need.resolution.version)} (from {need.resolution.source})")
        if report.convention_source and need.config is None:
            lines.append(f"  convention source: {report.convention_source}")
    elif need.status == "no-cuda":
        lines.append("CUDA: none — the image carries no CUDA, so it needs no particular driver")
    elif report.reason and report.reason not in (NO_CONVENTION, NO_CUDA_IN_CONFIG):
        lines.append(
            f"CUDA: unknown — {report.reason}; gpuguard does not guess — set the gpuguard.io/cuda-version "
            "annotation or an imageRules entry"
        )
    else:
        lines.append(
            "CUDA: unknown (no recognised tag; gpuguard does not guess — set the gpuguard.io/cuda-version "
            "annotation or an imageRules entry)"
        )
    if need.image_requirement is not None:
        lines.append(f"runtime requirement: NVIDIA_REQUIRE_CUDA={need.image_requirement} (image config)")
    elif need.config is not None:
        lines.append("runtime requirement: none in the image config (the NVIDIA runtime checks nothing)")
    else:
        lines.append("runtime requirement: not known without the image config")
    if need.resolution is not None and req is None:
        lines.append("driver requirements: not in the knowledge base")
    if req is not None:
        lines.append(f"native: driver {req.describe_native()}")
        if req.mvc_floor:
            lines.append(
                f"minor-version compatibility: driver {format_driver(req.mvc_floor)} or newer "
                "(PTX JIT and newer features fail)"
            )
        if need.informative:
            lines.append("forward compatibility (data-center GPUs): the driver branches its NVIDIA_REQUIRE_CUDA lists")
        elif req.forward_drivers:
            drivers = ", ".join(format_driver(d) for d in req.forward_drivers)
            lines.append(f"forward compatibility (data-center GPUs): driver {drivers}")
        elif not req.forward_stated:
            lines.append("forward compatibility (data-center GPUs): the accepted driver branches are stated by no "
                         "source gpuguard has, so older drivers may or may not start it")
    for note in need.notes:
        lines.append(f"note: {note}")
    if report.groups is not None:
        lines.append(f"node groups ({report.cluster}):")
        if not report.groups:
            lines.append("  (no GPU nodes)")
        for g in report.groups:
            product = f" ({g.product})" if g.product else ""
            if g.driver:
                native = f", CUDA {g.native_cuda}" if g.native_cuda else ""
                driver = f"driver {g.driver}{native}"
            else:
                driver = "no driver labels"
            verdict = g.mode.value if req is not None else "CUDA version unknown"
            refusal = g.runtime.removeprefix("requirement error: ")
            why = f" — the NVIDIA runtime refuses it: {refusal}" if g.runtime else ""
            lines.append(f"  {_names(g.nodes)}{product}: {driver}: {verdict}{why}")
    return "\n".join(lines)

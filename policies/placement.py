"""Where one pod template can run: a verdict per node group, with the CUDA verdict there.

The audit's node-pool matrix (rows: workloads, columns: node groups) is built from this.  The
scheduling part is the scheduler model's own verdicts (``policies.scheduling``, memoised per
snapshot through ``policies.memo``); the CUDA part classes each GPU container's image on the
group's GPU Feature Discovery driver labels exactly as ``gpu-cuda-driver-mismatch`` does
(``policies.cuda.need``, ``policies.cuda.compat``, ``policies.cuda.verdict``).  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from policies.config import Config
from policies.cuda.compat import Mode, requirement
from policies.cuda.containers import RULE_ID as CUDA_RULE
from policies.cuda.containers import gpu_containers
from policies.cuda.need import container_need
from policies.cuda.require import Start
from policies.cuda.resolve import parse_image_rules
from policies.cuda.verdict import VERDICT_NAMES, node_mode
from policies.cuda.versions import format_driver
from policies.facts import ClusterFacts, NodeGroup
from policies.images import ImageFacts, NoImageFacts, node_arch
from policies.memo import TemplateAnalysis
from policies.podspec import PodTemplate
from policies.scheduling import GroupVerdict
from policies.shapes import as_dict

# fits: the scheduler model admits it and every GPU container runs natively (or its CUDA is unknown);
# compat: admitted, but some container runs only under minor-version or forward compatibility;
# cuda: admitted, but some container's image needs a newer driver than the group runs;
# no: a scheduler filter rules the group out.
CellStatus = Literal["fits", "compat", "cuda", "no"]
# Worst first: what a cell reports when containers differ.
_WORST = (Mode.INCOMPATIBLE, Mode.MINOR, Mode.FORWARD, Mode.NATIVE, Mode.UNKNOWN)


@dataclass(frozen=True, slots=True)
class Cell:
    status: CellStatus
    reasons: tuple[str, ...]  # why not (scheduler filters), or the CUDA detail
    cuda: str | None  # VERDICT_NAMES value of the worst GPU container, None when not judged

    @property
    def runs(self) -> bool:
        return self.status in ("fits", "compat")


_BEST = ("fits", "compat", "cuda", "no")


def merge_cells(cells: list[Cell]) -> Cell:
    """One cell for several node groups shown as one column: the most permissive verdict, saying
    when it does not hold on every group."""
    if not cells:
        return Cell("no", ("not evaluated",), None)
    first = cells[0]
    if all(c == first for c in cells):
        return first
    best = min(cells, key=lambda c: _BEST.index(c.status))
    others = sorted({c.status for c in cells if c.status != best.status}, key=_BEST.index)
    note = f"not on every node of this column (elsewhere: {', '.join(others)})" if others else ""
    reasons = tuple(dict.fromkeys([*best.reasons, *([note] if note else [])]))
    return Cell(best.status, reasons, best.cuda)


def gpu_groups(facts: ClusterFacts, config: Config) -> list[NodeGroup]:
    """Node groups that offer (or may offer) a GPU resource, or carry GPU driver labels."""
    out = []
    for group in facts.groups:
        rep = group.representative
        offers = any(config.is_gpu(name) and q > 0 for name, q in rep.allocatable.items())
        if offers or any(config.is_gpu(n) for n in rep.may_offer) or rep.driver_version is not None:
            out.append(group)
    return out


def _annotations(obj: Mapping[str, Any], pod: PodTemplate) -> dict[str, Any]:
    merged = dict(as_dict(as_dict(obj.get("metadata")).get("annotations")))
    merged.update(pod.annotations)  # the pod template's own annotations win, as in the CUDA rule
    return merged


class Placer:
    """Placement cells of pod templates against one snapshot and config."""

    def __init__(self, facts: ClusterFacts, config: Config, images: ImageFacts | None = None) -> None:
        self.facts = facts
        self.config = config
        self.images = images or NoImageFacts()
        self.groups = gpu_groups(facts, config)
        settings = config.settings(CUDA_RULE)
        self.cuda_on = settings.severity is not None
        self.rules = parse_image_rules(settings.options.get("imageRules"))[0] if self.cuda_on else ()

    def cells(self, obj: Mapping[str, Any], pod: PodTemplate) -> list[Cell] | None:
        """One cell per ``self.groups`` entry; None when the template asks for no GPU device."""
        analysis = TemplateAnalysis(pod, self.facts, self.config.is_gpu)
        if not analysis.gpu_requests():
            return None
        by_group: dict[int, list[GroupVerdict]] = {}
        for verdict in analysis.verdicts():
            by_group.setdefault(id(verdict.group), []).append(verdict)
        annotations = _annotations(obj, pod)
        node_name = pod.spec.get("nodeName")
        bound = node_name if isinstance(node_name, str) and node_name and pod.scheduling_known else None
        return [self._cell(pod, group, by_group.get(id(group), []), annotations, bound) for group in self.groups]

    def _cell(self, pod: PodTemplate, group: NodeGroup, verdicts: list[GroupVerdict], annotations: dict[str, Any],
              bound: str | None) -> Cell:
        if bound is not None:
            # a pod created with spec.nodeName skips the scheduler: only that node counts (as in the engine)
            verdicts = [v for v in verdicts if any(n.name == bound for n in v.nodes)]
            if not verdicts:
                return Cell("no", (f"the pod is bound to node {bound}",), None)
        passing = [v for v in verdicts if v.passes]
        if not pod.scheduling_known:
            passing = [v for v in verdicts if v.offers and v.fits]
        if not passing:
            reasons = tuple(dict.fromkeys(r for v in verdicts for r in v.reasons())) or ("not evaluated",)
            return Cell("no", reasons, None)
        mode, detail = self._cuda(pod, passing[0], annotations)
        if mode is None or mode in (Mode.NATIVE, Mode.UNKNOWN):
            return Cell("fits", detail, VERDICT_NAMES[mode] if mode is not None else None)
        if mode is Mode.INCOMPATIBLE:
            return Cell("cuda", detail, VERDICT_NAMES[mode])
        return Cell("compat", detail, VERDICT_NAMES[mode])

    def _cuda(self, pod: PodTemplate, verdict: GroupVerdict, annotations: dict[str, Any]) -> tuple[
            Mode | None, tuple[str, ...]]:
        if not self.cuda_on:
            return None, ()
        labels = verdict.nodes[0].labels
        arch = node_arch(labels)
        worst: Mode | None = None
        details: list[str] = []
        for c in gpu_containers(pod, self.config.is_gpu):
            image = c.container.get("image")
            text = image if isinstance(image, str) else None
            lookup = self.images.lookup(text, arch) if text else None
            need = container_need(text, c.container, c.name, annotations, self.rules, lookup, arch)
            if need.resolution is None:
                continue
            req = requirement(need.resolution)
            if req is None:
                continue
            mode, check = node_mode(req, need, labels)
            if mode is not Mode.NATIVE and mode is not Mode.UNKNOWN:
                driver = verdict.nodes[0].driver_version
                on = f" on driver {format_driver(driver)}" if driver else ""
                why = (f"container {c.name!r} needs CUDA {req.cuda_text} (native: driver {req.describe_native()}): "
                       f"{mode.value}{on}")
                if check is not None and check.start is Start.REFUSED:
                    why += f" ({check.reason.split(', please update', 1)[0]})"
                details.append(why)
            if worst is None or _WORST.index(mode) < _WORST.index(worst):
                worst = mode
        return worst, tuple(details)

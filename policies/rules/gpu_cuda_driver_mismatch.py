"""gpu-cuda-driver-mismatch: the image's CUDA version needs a newer driver than the candidate nodes run.

For each container that requests a GPU, the CUDA version of its image is resolved (annotation
``gpuguard.io/cuda-version[.<container>]``, then the ``imageRules`` option, then the image config
when a registry lookup found it — its ``CUDA_VERSION`` or ``NVIDIA_REQUIRE_CUDA`` — then the image
name: ``nvidia/cuda``, NGC frameworks and the Triton ``-trtllm-``/``-vllm-python-py3`` variants,
``pytorch/pytorch``, the k8s CUDA samples, vLLM, TensorFlow, Ray ``-cuXY``, PaddlePaddle, Google
Cloud's Hugging Face DLCs; see ``policies.cuda.conventions``).  Unknown images are skipped, never
guessed; images built without CUDA (plain OS images, AMD's ROCm images, Kubernetes test images)
need none.  Each candidate node
group — offering the requested GPU resource and admitted by the pod's selectors, affinity and
tolerations — is classed by its GPU Feature Discovery driver labels as native, minor-version
compatible, forward compatible (data-center GPUs only) or incompatible (see
``policies.cuda.compat`` and ``policies.cuda.verdict``).  Nodes without driver labels are never held
against the pod.  When taints alone keep the pod off every node it selects, the candidates are those
nodes, as if it tolerated them (``policies.scheduling.meant_for``: the ones gpu-taint-not-tolerated's
fix opens): the run that reports the missing toleration also reports the driver those nodes run,
and the fix brings no new finding.

The NVIDIA runtime's own start check is evaluated exactly as libnvidia-container does
(``policies.cuda.require``) on the container's final environment — image config ``Env`` overridden
by the pod's ``env:`` — whenever that environment is known in part (an image config, or variables
the pod sets).  A node where the legacy runtime would refuse the container ("unsatisfied
condition: cuda>=12.8") is incompatible.  Since NVIDIA Container Toolkit 1.18 the default CDI mode
checks nothing, so an image whose need exceeds the driver then starts and fails at ``cuInit``.

Severity is graded by the rule (a severity set in config overrides it):

* error — no candidate node can run it;
* warning — some candidates cannot run it, or it runs only in a compatibility mode everywhere;
* info — native nodes exist and the other candidates run it only in a compatibility mode;
* info — every candidate runs it, but the pod sets ``NVIDIA_DISABLE_REQUIRE`` or its own
  ``NVIDIA_REQUIRE_*``: the finding says the runtime's check is off or replaced.

Findings also say when the runtime's check will not stop an image that needs more than a node's
driver: the pod disables or overrides the requirement, or the image's own requirement asks for less
than it needs (NGC framework images say ``cuda>=9.0``; Google Cloud's TGI images on CUDA 12.4 say
``cuda>=12.1``).  Such notes never raise the severity: the node verdicts decide it.

GPUs from Dynamic Resource Allocation are judged the same way, with the driver read off the devices
instead of node labels (``policies.cuda.dra``): NVIDIA's DRA driver publishes ``driverVersion`` and
``cudaDriverVersion`` (plus ``productName``, ``brand`` and ``cudaComputeCapability``) on every GPU
and MIG device.  A container that uses ``resources.claims`` is checked against the devices its
claim's requests can get on the nodes the pod can land on (the claim resolved in the same input or
the cluster); a container whose ``nvidia.com/gpu`` DRA serves (``extendedResourceName``) is checked
on such nodes against the serving class's devices.  The claim is another object, so its fix is not
a patch: the remediation proposes a CEL selector (``device.attributes["gpu.nvidia.com"]
.driverVersion.compareTo(semver("580.65.6")) >= 0``) that keeps exactly the devices that run the
image, compiled with gpuguard's Kubernetes CEL and checked against those devices first.

Failing (the only untainted GPU node is a Tesla T4 on driver 470, which CUDA 13 images do not
accept)::

    containers:
    - name: train
      image: nvidia/cuda:13.0.2-runtime-ubuntu22.04
      resources: {limits: {nvidia.com/gpu: 1}}

Passing::

    - name: train
      image: nvidia/cuda:11.4.3-runtime-ubuntu20.04    # driver 470.256.02 runs CUDA 11.4 natively

Fix: a required node affinity on ``nvidia.com/cuda.driver-version.{major,minor,revision}``
(plus the deprecated ``nvidia.com/cuda.driver.*`` names when some nodes carry only those) that
admits drivers running the image natively — or, when no candidate does, under minor-version
compatibility.  When only data-center nodes running it through forward compatibility remain, the
fix pins the pod to those GPU products (``nvidia.com/gpu.product``) on those driver branches.  It
is offered only when it removes a candidate and every node it keeps runs every GPU container.

Options: ``imageRules`` — ``[{pattern: "<regex>", cudaVersion: "12.4"}]`` for private images.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from policies.applicability import Applies
from policies.cuda.affinity import affinity_fix, driver_terms
from policies.cuda.compat import Mode, Requirement, native_cuda_text, requirement
from policies.cuda.containers import gpu_containers
from policies.cuda.dra import DraAssessment, assess, dra_driver_labels
from policies.cuda.need import Need, container_need
from policies.cuda.require import Check, Start
from policies.cuda.resolve import parse_image_rules
from policies.cuda.verdict import node_mode
from policies.cuda.versions import Version, format_driver, major_minor, parse_version
from policies.facts import LABEL_DRIVER_FULL, LABEL_DRIVER_NEW, LABEL_DRIVER_OLD, LABEL_PRODUCT, ClusterFacts
from policies.images import node_arch
from policies.memo import CudaJudgementKey, OldDriverLabelsKey
from policies.podresources import pod_requests
from policies.podspec import ContainerRef, runnable_containers
from policies.resources import is_extended
from policies.rule import NeedsFacts, Option, RuleContext
from policies.scheduling import GroupVerdict, meant_for, term_matches
from policies.types import RelOp, Severity, Violation
from policies.wording import sentence

ID = "gpu-cuda-driver-mismatch"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = True
APPLIES: Applies = None
FIXABLE = True
MUTATION_SAFE = True
SUMMARY = "An image's CUDA version needs a newer driver than the nodes it can land on run."
REMEDIATION = "Pin the pod to nodes whose driver runs the image, or use an image built for an older CUDA."
OPTIONS: tuple[Option, ...] = (
    Option(
        "imageRules",
        (list,),
        [],
        "CUDA versions of private images: a list of {pattern: <regular expression searched in the image "
        "reference>, cudaVersion: \"12.4\"}; the first matching entry wins.",
        check=lambda raw: parse_image_rules(raw)[1],
    ),
)

_MODE_ORDER = (Mode.INCOMPATIBLE, Mode.MINOR, Mode.FORWARD, Mode.NATIVE, Mode.UNKNOWN)


@dataclass(frozen=True, slots=True)
class Assessment:
    container: ContainerRef
    image: str
    req: Requirement  # the one with the highest native minimum when architectures differ
    reqs: dict[str, Requirement]  # per node architecture
    needs: dict[str, Need]
    rows: tuple[tuple[GroupVerdict, Mode], ...]
    runtime: dict[int, Check]  # id(GroupVerdict) → the runtime's verdict there
    severity: Severity
    # Texts that depend on the judgement, not on the container: shared by every container judged
    # alike (see _judge); None: computed afresh each time.
    texts: _Texts | None = None

    def with_mode(self, *modes: Mode) -> list[GroupVerdict]:
        return [v for v, m in self.rows if m in modes]

    def fix_minimum(self) -> Version | None:
        """The driver floor a fix should demand, or None when pinning would not help."""
        native = self.with_mode(Mode.NATIVE)
        if native and len(native) < len([m for _, m in self.rows if m is not Mode.UNKNOWN]):
            return self.req.native_min
        if not native and self.with_mode(Mode.INCOMPATIBLE) and self.with_mode(Mode.MINOR):
            return self.req.mvc_floor
        return None


class _Texts:
    """The message tail and remediations of one judgement, computed on first use."""

    __slots__ = ("remediation", "tail")

    def __init__(self) -> None:
        self.tail: str | None = None
        self.remediation: dict[bool, str] = {}


@dataclass(frozen=True, slots=True)
class _Judgement:
    """What the candidate nodes say of a container's needs (an Assessment without the container)."""

    req: Requirement
    reqs: dict[str, Requirement]
    needs: dict[str, Need]
    rows: tuple[tuple[GroupVerdict, Mode], ...]
    runtime: dict[int, Check]
    severity: Severity
    texts: _Texts


def _grade(modes: list[Mode]) -> Severity | None:
    known = [m for m in modes if m is not Mode.UNKNOWN]
    if not known:
        return None
    if not any(m.runs for m in modes):
        return Severity.ERROR if Mode.UNKNOWN not in modes else Severity.WARNING
    if Mode.INCOMPATIBLE in known:
        return Severity.WARNING
    if Mode.NATIVE not in known:
        return Severity.WARNING
    if any(m.compat_only for m in known):
        return Severity.INFO
    return None


def _annotations(ctx: RuleContext) -> dict[str, Any]:
    merged: dict[str, Any] = dict(ctx.object.annotation_map())
    merged.update(ctx.pod.annotations)  # the pod template's own annotations win
    return merged


def _old_labels_only(facts: ClusterFacts) -> bool:
    """Whether some node carries the deprecated GFD driver labels but not the current ones."""
    return facts.memoised(
        OldDriverLabelsKey(),
        lambda: any(
            LABEL_DRIVER_OLD[0] in g.representative.labels
            and LABEL_DRIVER_NEW[0] not in g.representative.labels
            and LABEL_DRIVER_FULL not in g.representative.labels
            for g in facts.groups
        ),
        pinned=True,
    )


def _driver_text(verdict: GroupVerdict) -> str:
    driver = verdict.nodes[0].driver_version
    return format_driver(driver) if driver else "unknown"


def _row_text(a: Assessment, v: GroupVerdict) -> str:
    text = f"{v.describe()} driver {_driver_text(v)}"
    runtime = a.runtime.get(id(v))
    if runtime is not None and runtime.start is Start.REFUSED:
        reason = runtime.reason.split(", please update", 1)[0]
        text += f" (the NVIDIA runtime refuses it: {reason})"
    return text


def _needs_text(a: Assessment) -> str:
    by_text: dict[tuple[str, str], list[str]] = {}
    for arch, req in sorted(a.reqs.items()):
        by_text.setdefault((req.cuda_text, req.source), []).append(arch)
    if len(by_text) == 1:
        (cuda, source), _ = next(iter(by_text.items()))
        return f"needs CUDA {cuda} (from {source}; native driver {a.req.describe_native()})"
    parts = [f"CUDA {cuda} on {'/'.join(archs)} (from {source})" for (cuda, source), archs in by_text.items()]
    return "needs " + ", ".join(parts)


def _notes(a: Assessment) -> list[str]:
    return list(dict.fromkeys(n for need in a.needs.values() for n in need.notes))


def _noted(notes: Sequence[str]) -> str:
    """The notes as one sentence after the verdict ("" without notes)."""
    return f"Note: {'; '.join(notes)}." if notes else ""


def _message(a: Assessment) -> str:
    tail = a.texts.tail if a.texts is not None else None
    if tail is None:
        tail = _message_tail(a)
        if a.texts is not None:
            a.texts.tail = tail
    return f"container {a.container.name!r}: image {a.image} {tail}"


def _message_tail(a: Assessment) -> str:
    by_mode: dict[Mode, list[GroupVerdict]] = {}
    for v, m in a.rows:
        by_mode.setdefault(m, []).append(v)
    parts = []
    for mode in _MODE_ORDER:
        groups = by_mode.get(mode)
        if groups:
            listed = "; ".join(_row_text(a, v) for v in groups)
            parts.append(f"{mode.value}: {listed}")
    if a.severity is Severity.ERROR:
        verdict = "no candidate node can run it"
    elif a.severity is Severity.WARNING:
        verdict = (
            "some candidate nodes cannot run it"
            if Mode.INCOMPATIBLE in by_mode
            else "it runs only in a compatibility mode on every candidate node"
        )
    else:
        verdict = (
            "it runs natively on some candidate nodes, only in a compatibility mode on others"
            if any(m.compat_only for m in by_mode)
            else "it runs on every candidate node"
        )
    notes = _notes(a)
    unstated = sorted({r.cuda_text for r in a.reqs.values() if not r.forward_stated})
    if Mode.FORWARD in by_mode and unstated:
        notes.append(f"no source gpuguard has states which driver branches CUDA {', '.join(unstated)}'s "
                     "forward-compatibility package accepts, so whether it starts on those data-center GPUs is "
                     "not known")
    return sentence(f"{_needs_text(a)}, {verdict} — " + " | ".join(parts), _noted(notes))


def _remediation(a: Assessment, fixed: bool) -> str:
    if a.texts is None:
        return _remediation_text(a, fixed)
    found = a.texts.remediation.get(fixed)
    if found is None:
        found = a.texts.remediation[fixed] = _remediation_text(a, fixed)
    return found


def _remediation_text(a: Assessment, fixed: bool) -> str:
    native = a.req.describe_native()
    if all(m is Mode.NATIVE or m is Mode.UNKNOWN for _, m in a.rows):
        return (
            f"Every candidate node runs it natively; keep the pod on drivers {native}, and set the NVIDIA_* "
            "variables only if you mean to change the runtime's check."
        )
    if fixed:
        head = (
            f"Keep the pod on nodes with driver {native} "
            "(the fix adds a required node affinity on the GFD driver labels)"
        )
    else:
        head = f"Upgrade the driver of the candidate nodes to {native} or schedule the pod on such nodes"
    natives = [
        parse_version(t)
        for v, m in a.rows
        if m is not Mode.UNKNOWN and (drv := v.nodes[0].driver_version) and (t := native_cuda_text(drv))
    ]
    lowest = min((n for n in natives if n), default=None)
    if lowest and lowest < major_minor(a.req.cuda):
        head += f", or use an image built for CUDA {'.'.join(map(str, lowest))} or older"
    return head + "."


def _forward_terms(
    ctx: RuleContext, assessments: list[Assessment], candidates: list[GroupVerdict]
) -> list[list[dict[str, Any]]]:
    """Terms pinning the pod to the GPU products and driver branches where every image runs.

    Used when no candidate runs an image natively or under minor-version compatibility but some
    data-center nodes run it through forward compatibility, which depends on the GPU product as
    well as the driver, so a driver floor alone cannot express it.
    """
    runnable = [
        v for v in candidates if all(dict((id(r), m) for r, m in a.rows)[id(v)].runs for a in assessments)
    ]
    # Each pinned group is matched by the driver label name it actually carries.
    triples = sorted(
        {
            (product, driver[0], LABEL_DRIVER_NEW[0] if LABEL_DRIVER_NEW[0] in labels else LABEL_DRIVER_OLD[0])
            for v in runnable
            if (product := v.nodes[0].gpu_product)
            and (driver := v.nodes[0].driver_version)
            and (labels := v.nodes[0].labels)
        }
    )
    return [
        [
            {"key": LABEL_PRODUCT, "operator": "In", "values": [product]},
            {"key": key, "operator": "In", "values": [str(major)]},
        ]
        for product, major, key in triples
    ]


def _pod_fix(ctx: RuleContext, assessments: list[Assessment], candidates: list[GroupVerdict]) -> tuple[RelOp, ...]:
    minimums = [m for a in assessments if (m := a.fix_minimum()) is not None]
    if minimums:
        terms = driver_terms(max(minimums), _old_labels_only(ctx.facts))
    elif all(a.with_mode(Mode.FORWARD) and a.with_mode(Mode.INCOMPATIBLE) for a in assessments):
        terms = _forward_terms(ctx, assessments, candidates)
    else:
        return ()
    if not terms:
        return ()
    as_terms = [{"matchExpressions": t} for t in terms]
    kept = [v for v in candidates if any(term_matches(t, v.nodes[0]) for t in as_terms)]
    if not kept or len(kept) == len(candidates):
        return ()
    for a in assessments:
        modes = {id(v): m for v, m in a.rows}
        if not all(modes[id(v)].runs for v in kept):
            return ()
    return affinity_fix(ctx.pod.spec, terms)


def _assess(ctx: RuleContext, c: ContainerRef, candidates: list[GroupVerdict], rules: Any,
            annotations: dict[str, Any]) -> Assessment | None:
    image = c.container.get("image")
    image_text = image if isinstance(image, str) else None
    arches = [node_arch(v.nodes[0].labels) for v in candidates]
    needs: dict[str, Need] = {}
    looked_up = False
    for arch in arches:
        if arch not in needs:
            lookup = ctx.images.lookup(image_text, arch) if image_text else None
            looked_up = looked_up or lookup is not None
            needs[arch] = container_need(image_text, c.container, c.name, annotations, rules, lookup, arch)
    # A need judged from image facts is a fresh object each time: memoising on it would only fill
    # the snapshot's memo.
    judged = _judgement(needs, candidates, arches) if looked_up else _judge(ctx, needs, candidates, arches)
    if judged is None:
        return None
    return Assessment(
        c, str(image), judged.req, judged.reqs, judged.needs, judged.rows, judged.runtime, judged.severity,
        judged.texts,
    )


def _judge(
    ctx: RuleContext, needs: dict[str, Need], candidates: list[GroupVerdict], arches: list[str]
) -> _Judgement | None:
    """``_judgement``, memoised per snapshot: containers of a fleet share a handful of images, and
    pods with the same constraints share their candidate verdicts (the same objects, see
    policies.memo.TemplateAnalysis).  The key holds the identities of the needs and candidates, and
    the value holds those objects, so no identity is reused while the entry lives."""
    key = CudaJudgementKey(tuple((arch, id(need)) for arch, need in needs.items()), tuple(map(id, candidates)))
    held = (tuple(needs.values()), tuple(candidates))
    _, judged = ctx.facts.memoised(key, lambda: (held, _judgement(needs, candidates, arches)))
    return judged


def _judgement(needs: dict[str, Need], candidates: list[GroupVerdict], arches: list[str]) -> _Judgement | None:
    reqs: dict[str, Requirement | None] = {}
    for arch, need in needs.items():
        resolution = need.resolution
        reqs[arch] = requirement(resolution) if resolution else None
    rows: list[tuple[GroupVerdict, Mode]] = []
    runtime: dict[int, Check] = {}
    for v, arch in zip(candidates, arches, strict=True):
        req = reqs[arch]
        if req is None:
            rows.append((v, Mode.UNKNOWN))
            continue
        mode, check = node_mode(req, needs[arch], v.nodes[0].labels)
        rows.append((v, mode))
        if check is not None:
            runtime[id(v)] = check
    known = {arch: r for arch, r in reqs.items() if r is not None}
    if not known:
        return None
    modes = [m for _, m in rows]
    severity = _grade(modes)
    if severity is None and any(needs[a].pod_changes_check for a in known):
        severity = Severity.INFO if any(m.runs for m in modes) else None
    if severity is None:
        return None
    primary = max(known.values(), key=lambda r: r.native_min)
    return _Judgement(primary, known, {a: needs[a] for a in known}, tuple(rows), runtime, severity, _Texts())


def check(ctx: RuleContext) -> Iterator[Violation]:
    yield from _by_node_labels(ctx)
    yield from _by_dra_devices(ctx)


def _dra_message(a: DraAssessment, severity: Severity) -> str:
    parts = []
    for mode in _MODE_ORDER:
        rows = [r for r in a.rows if r.mode is mode]
        if rows:
            parts.append(f"{mode.value}: " + "; ".join(r.describe() for r in rows))
    verdict = {
        Severity.ERROR: "no DRA GPU it can get runs it",
        Severity.WARNING: (
            "some DRA GPUs it can get cannot run it"
            if any(r.mode is Mode.INCOMPATIBLE for r in a.rows)
            else "it runs only in a compatibility mode on every DRA GPU it can get"
        ),
        Severity.INFO: "it runs natively on some DRA GPUs it can get, only in a compatibility mode on others",
    }[severity]
    sources = ", ".join(s.what for s in a.sources)
    source = a.req.source
    return sentence(
        f"container {a.container.name!r}: image {a.image} needs CUDA {a.req.cuda_text} (from {source}; "
        f"native driver {a.req.describe_native()}), {verdict} (devices of {sources}, by their driverVersion and "
        f"cudaDriverVersion attributes) — " + " | ".join(parts),
        _noted(a.need.notes),
    )


def _dra_remediation(a: DraAssessment) -> str:
    if a.fix_selector is not None:
        claims = sorted({s.claim.label for s in a.sources if s.claim is not None})
        where = f" of {', '.join(claims)}" if claims else ""
        return (
            f"Add this CEL selector to the request{where} so that only GPUs whose driver runs the image are "
            f"allocated: {a.fix_selector}"
        )
    return (
        f"Upgrade the driver on the nodes with these GPUs to {a.req.describe_native()}, or use an image built "
        "for the CUDA version they support (their cudaDriverVersion)."
    )


def _by_dra_devices(ctx: RuleContext) -> Iterator[Violation]:
    if ctx.dra.inventory is None:
        return
    containers = list(runnable_containers(ctx.pod))
    rules, _problems = parse_image_rules(ctx.options.get("imageRules"))
    assessments = assess(ctx.pod, ctx.namespace, ctx.facts, ctx.dra, ctx.images, containers, rules, _annotations(ctx))
    for a in assessments:
        severity = _grade([r.mode for r in a.rows])
        if severity is None:
            continue
        yield Violation(
            message=_dra_message(a, severity),
            path=(*a.container.path, "image"),
            severity=severity,
            remediation=_dra_remediation(a),
        )


def _with_dra_labels(ctx: RuleContext, v: GroupVerdict) -> GroupVerdict:
    """A candidate whose GPU resource DRA serves, with driver labels read off its devices."""
    first = v.nodes[0]
    labels = dra_driver_labels(first, ctx.gpu_requests(), ctx.dra) if first.dra_served else None
    if labels is None:
        return v
    node = dataclasses.replace(first, labels={**first.labels, **labels})
    return dataclasses.replace(v, nodes=(node, *v.nodes[1:]))


def _by_node_labels(ctx: RuleContext) -> Iterator[Violation]:
    containers = gpu_containers(ctx.pod, ctx.is_gpu)
    if not containers:
        return
    # The nodes the pod is meant for: those it can land on, or, when taints alone keep it off the nodes
    # it selects, those nodes (gpu-taint-not-tolerated says so in the same run; its fix opens them).
    # When no node is meant for it otherwise, the scheduling rules explain why.
    passing = meant_for(ctx.verdicts(), frozenset(pod_requests(ctx.pod, is_extended)))
    if not passing:
        return
    candidates = [_with_dra_labels(ctx, v) for v in passing]
    # A node affinity on GFD labels would shut out nodes whose driver is known from DRA devices only.
    from_devices = any(c is not v for c, v in zip(candidates, passing, strict=True))
    rules, _problems = parse_image_rules(ctx.options.get("imageRules"))
    annotations = _annotations(ctx)
    assessments = [a for c in containers if (a := _assess(ctx, c, candidates, rules, annotations)) is not None]
    if not assessments:
        return
    fix = () if from_devices else _pod_fix(ctx, assessments, candidates)
    for i, a in enumerate(assessments):
        yield Violation(
            message=_message(a),
            path=(*a.container.path, "image"),
            # One affinity serves every container; attaching it once keeps the combined patch clean.
            fix=fix if i == 0 else (),
            severity=a.severity,
            remediation=_remediation(a, bool(fix)),
        )

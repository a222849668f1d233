"""evaluate(obj, config, facts, images) → Evaluation: the one entry point both adapters use."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policies import budget, pointer
from policies.applicability import Applies, Profile, has_device_access, snapshot_profile, template_profile
from policies.boundedcache import small_key_cache
from policies.config import ALLOCATION_GUARDS, Config, RuleSettings
from policies.digest import TooDeep
from policies.dra.facts import NO_INPUTS, DraInputs, DraView
from policies.dra.reading import is_dra
from policies.effective_facts import effective_facts
from policies.env_sources import EnvSources
from policies.facts import ClusterFacts
from policies.image_uses import ImageUse, image_uses
from policies.images import ImageFacts, NoImageFacts, lookup_archs, lookup_key
from policies.kserve import NO_VIEW, KServeView
from policies.memo import ImageUsesKey, RulePlanKey, RuleResultsKey, SnapshotProfileKey, TemplateAnalysis
from policies.operands import controlled_by_cluster_policy
from policies.patching import apply_patch, combine
from policies.placeholders import Placeholder, find_placeholders, has_selector_values_unknown
from policies.podspec import PodTemplate, extract
from policies.registry import CLUSTER_RULES, OBJECT_RULES, RULES, WORKLOAD_RULES
from policies.rule import NodeProblem, ObjectContext, RuleContext, RuleModule, WorkloadContext
from policies.scheduling import churning_selector_keys
from policies.shapes import as_dict, text
from policies.template_inputs import ObjectInputs, TemplateInputs, object_inputs, template_inputs
from policies.types import Finding, PatchOp, RelOp, Severity, Violation
from policies.wording import did_you_mean, noun, suggest

IGNORE_ANNOTATION = "gpuguard.io/ignore"
SHOWN_UNKNOWN = 3  # unknown names an ignore annotation's message shows
SHOWN_NAME = 40  # characters of each


MAX_FIX_ROUNDS = 4


@dataclass(frozen=True, slots=True)
class UnrenderedPlaceholder:
    """A placeholder where a quantity or a node-selector value belongs: an input error."""

    path: str  # absolute JSON pointer
    text: str
    what: str  # "quantity" | "node selector"


@dataclass(frozen=True, slots=True)
class IgnoreUse:
    """One ``gpuguard.io/ignore`` annotation: where, which rules, and whether it was honoured.

    Faces report every use (the webhook as an admission warning and a metric), so that skipping a
    rule is never silent; ``unknown`` holds names that are no rule id (typos skip nothing).
    """

    pointer: str  # the annotation's RFC 6901 pointer in the object
    rules: tuple[str, ...]  # the rule ids (or "all") it names
    unknown: tuple[str, ...]
    honoured: bool
    # Rules guarding GPU allocation it names (``all`` names them all) but may not skip (allowIgnoreRules).
    kept: tuple[str, ...] = ()
    # (unknown name, the rule id it is closest to), for the first few unknown names that have one.
    suggestions: tuple[tuple[str, str], ...] = ()

    def unknown_message(self) -> str | None:
        """What every face says of the names that are no rule id (None: there are none): the first
        few, each cut to 40 characters, with the rule id each is closest to."""
        if not self.unknown:
            return None
        hints = dict(self.suggestions)
        named = ", ".join(
            f"{n[:SHOWN_NAME]} ({did_you_mean([hints[n]])})" if n in hints else n[:SHOWN_NAME]
            for n in self.unknown[:SHOWN_UNKNOWN]
        )
        rest = len(self.unknown) - SHOWN_UNKNOWN
        more = f" and {rest} more" if rest > 0 else ""
        return f"{IGNORE_ANNOTATION} names no rule: {named}{more}"

    @property
    def skipped(self) -> tuple[str, ...]:
        """The names it skips: ``all`` or rule ids (unknown names and kept guards left out)."""
        return tuple(n for n in self.rules if (n == "all" or n in RULES) and n not in self.kept)


@dataclass
class Evaluation:
    obj: dict[str, Any]
    config: Config = field(default_factory=Config)
    facts: ClusterFacts = field(default_factory=ClusterFacts.empty)
    findings: list[Finding] = field(default_factory=list)
    skipped_rules: tuple[str, ...] = ()  # rules that need facts, skipped for lack of them
    exempt: bool = False
    gpu_related: bool = False
    ignore_uses: list[IgnoreUse] = field(default_factory=list)
    placeholders: list[UnrenderedPlaceholder] = field(default_factory=list)
    images: ImageFacts = field(default_factory=NoImageFacts)
    dra_inputs: DraInputs = NO_INPUTS
    kserve: KServeView = NO_VIEW  # the input's KServe objects (policies.kserve), nearest first
    env_sources: EnvSources | None = None  # the run's ConfigMaps and Secrets (policies.env_sources)

    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.severity is Severity.ERROR]

    def patch(self, rule_ids: Iterable[str] | None = None) -> list[PatchOp]:
        """The fixes of the given rules (all fixable ones when None), combined to apply cleanly.

        One rule's fix can change what another finds (a toleration opens a node pool whose driver
        the CUDA rule then judges), so fixes are applied and the object re-evaluated until no
        wanted fix remains; the ops of all rounds form one patch, so a second pass over the
        patched object finds nothing to fix (the webhook may be reinvoked).
        """
        wanted = None if rule_ids is None else set(rule_ids)

        def fixes(findings: list[Finding]) -> list[PatchOp]:
            return [op for f in findings if wanted is None or f.rule in wanted for op in f.fix]

        ops = combine(self.obj, fixes(self.findings))
        if not ops:
            return []
        doc = apply_patch(self.obj, ops)
        for _ in range(MAX_FIX_ROUNDS - 1):
            again = evaluate(doc, self.config, self.facts, self.images, dra_inputs=self.dra_inputs,
                             kserve=self.kserve, env_sources=self.env_sources)
            more = combine(doc, fixes(again.findings))
            if not more:
                break
            ops.extend(more)
            doc = apply_patch(doc, more)
        return ops


def _ignore_uses(obj: dict[str, Any], pod: PodTemplate | None, honoured: bool, config: Config) -> list[IgnoreUse]:
    uses = []
    places = [(as_dict(obj.get("metadata")), "/metadata")]
    if pod is not None:
        places.append((pod.metadata, pod.metadata_pointer))
    for meta, base in places:
        value = as_dict(meta.get("annotations")).get(IGNORE_ANNOTATION)
        if not isinstance(value, str):
            continue
        names, unknown, suggestions = _parsed_ignore(value)
        at = pointer.join(base, ("annotations", IGNORE_ANNOTATION))
        named = set(RULES) if "all" in names else set(names)
        kept = tuple(sorted(named & ALLOCATION_GUARDS - config.skipped_by_annotation(named))) if honoured else ()
        uses.append(IgnoreUse(at, names, unknown, honoured, kept, suggestions))
    return uses


# One evaluation reads the annotation up to three times (the object, each template, the workload
# rules) and a controller's replicas, which arrive in a row, carry the same value: parse it and rank
# suggestions once.  Values up to the API server's 256 KiB for all annotations of an object
# (apimachinery TotalAnnotationSizeLimitB); eight of them hold at most 2 MiB of keys.
@small_key_cache(maxsize=8, max_key_chars=256 * 1024)
def _parsed_ignore(value: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...]]:
    """(the names, the unknown ones, suggestions for those) of an ignore annotation's value."""
    names = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
    unknown = tuple(n for n in names if n != "all" and n not in RULES)
    return names, unknown, _suggestions(unknown)


SUGGESTED_NAMES = 5


def _suggestions(unknown: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """The closest rule id to each of the first few unknown names (a typo such as gpu-limit-missin)."""
    out = []
    for name in unknown[:SUGGESTED_NAMES]:
        if len(name) <= 63:
            close = suggest(name, RULES, cutoff=0.75)
            if close:
                out.append((name, close[0]))
    return tuple(out)


def _rebase(pod: PodTemplate, anchor: str, rel: tuple[Any, ...]) -> str:
    if anchor == "metadata":
        return pointer.join(pod.metadata_pointer, rel)
    origin = pod.spec_origin(rel[0]) if rel and pod.spec_origins else None
    if origin is not None:  # a value the template inherits is written where it comes from
        return pointer.join(origin, rel[1:])
    return pointer.join(pod.spec_pointer, rel)


def _abs_op(pod: PodTemplate, op: RelOp) -> PatchOp:
    return PatchOp(op.op, _rebase(pod, op.anchor, op.path), op.value)


def _names_gpu(resources: dict[str, Any], is_gpu: Callable[[str], bool]) -> bool:
    """Whether ``resources.limits`` or ``resources.requests`` names a GPU resource."""
    return any(
        isinstance(name, str) and is_gpu(name)
        for which in ("limits", "requests")
        for name in as_dict(resources.get(which))
    )


def is_gpu_related(pod: PodTemplate, config: Config) -> bool:
    """Cheap pre-filter: GPU resources, DRA claims, or a way to reach devices without them
    (policies.applicability.has_device_access)."""
    is_gpu = config.is_gpu
    for c in pod.containers:
        if _names_gpu(c.resources, is_gpu) or c.resources.get("claims"):
            return True
    spec = pod.spec
    if spec.get("resourceClaims"):
        return True
    if _names_gpu(as_dict(spec.get("resources")), is_gpu):
        return True
    return has_device_access(pod)


@dataclass(frozen=True, slots=True)
class PreparedTemplate:
    """One GPU pod template of a prepared object: what its rules will be given, and its image needs."""

    pod: PodTemplate  # as extracted: findings and fixes are placed on it
    inputs: TemplateInputs | None  # None: the template cannot be judged (``problem`` says why)
    facts: ClusterFacts  # the facts it is judged against (one node's when the pod is bound to it)
    ignored: frozenset[str]
    problem: str = ""

    @property
    def has_facts(self) -> bool:
        """Whether the rules that need facts can judge it (not when bound to a node the facts lack)."""
        return not self.facts.is_empty


@dataclass
class Prepared:
    """An object after the engine's gates (``prepare``), before any rule runs (``judge``)."""

    obj: dict[str, Any]
    config: Config
    given_facts: ClusterFacts | None  # as passed to prepare (``facts`` is with the config's pools)
    facts: ClusterFacts
    dra_inputs: DraInputs
    kserve: KServeView
    dra: DraView  # the cluster's DRA facts and the input's DRA objects, as both phases read them
    env_sources: EnvSources | None = None
    kind: str = ""
    name: str = ""
    namespace: str = ""
    exempt: bool = False
    honoured: bool = False
    gpu_related: bool = False
    templates: list[PodTemplate] = field(default_factory=list)
    judged: list[PreparedTemplate] = field(default_factory=list)
    ignore_uses: list[IgnoreUse] = field(default_factory=list)

    @property
    def has_facts(self) -> bool:
        return not self.facts.is_empty

    def image_uses(self, rules: Iterable[str] | None = None) -> tuple[ImageUse, ...]:
        """Every image the rules (of ``rules``; the CUDA and device-access rules by default) will look
        up, in document order (what a face prefetches)."""
        return tuple(u for t in self.judged for u in self.template_image_uses(t, rules))

    def template_image_uses(self, judged: PreparedTemplate, rules: Iterable[str] | None = None) -> tuple[ImageUse, ...]:
        """The images one template's rules look up (worked out when first asked: a run without
        image facts never needs them)."""
        if judged.inputs is None:
            return ()
        if rules is not None:
            return image_uses(judged.inputs.pod, self.config, judged.inputs.ignored, tuple(rules))
        return _image_uses(judged.inputs, self.config, self.facts)

    def prepared_for(self, obj: Any, config: Config | None, facts: ClusterFacts | None) -> bool:
        return obj is self.obj and (config is None or config is self.config) and facts is self.given_facts


def evaluate(
    obj: dict[str, Any],
    config: Config | None = None,
    facts: ClusterFacts | None = None,
    images: ImageFacts | None = None,
    *,
    dra_inputs: DraInputs | None = None,
    kserve: KServeView | None = None,
    env_sources: EnvSources | None = None,
    prepared: Prepared | None = None,
) -> Evaluation:
    """Judge ``obj``: ``judge(prepare(obj, …), images)``; never raises on any input (see gpu-check-failed).

    ``dra_inputs``: the DeviceClasses, ResourceClaims and ResourceClaimTemplates of the input ``obj``
    comes from (policies.dra.facts), which a pod's claims resolve to before the cluster's.
    ``kserve``: the ServingRuntimes, ClusterServingRuntimes and LLMInferenceServiceConfigs of that
    input (policies.kserve), which KServe's templates merge over before the cluster's.
    ``env_sources``: the ConfigMaps and Secrets of the run ``obj`` comes from (policies.env_sources),
    which its containers' envFrom read; None where no run is known (an admission review).
    ``prepared``: ``prepare``'s result for this very ``obj``, config and facts (a face that looked its
    images up first); ignored for any other object.
    """
    try:
        if prepared is None or not prepared.prepared_for(obj, config, facts):
            prepared = prepare(obj, config, facts, dra_inputs=dra_inputs, kserve=kserve, env_sources=env_sources)
        return judge(prepared, images)
    except Exception as exc:  # a defect outside the rules: the object is still not passed unjudged
        config = config or Config()
        ev = Evaluation(obj=obj, config=config, facts=facts or ClusterFacts.empty(), gpu_related=True)
        problem = f"gpuguard failed reading this object ({type(exc).__name__}: {text(str(exc), 200)})"
        meta = as_dict(obj.get("metadata")) if isinstance(obj, dict) else {}
        _object_check_failed(
            ev, config, problem, text(obj.get("kind") if isinstance(obj, dict) else "", 100),
            text(meta.get("name") or "", 253), text(meta.get("namespace") or "", 253),
        )
        return ev


def prepare(
    obj: dict[str, Any],
    config: Config | None = None,
    facts: ClusterFacts | None = None,
    *,
    dra_inputs: DraInputs | None = None,
    kserve: KServeView | None = None,
    env_sources: EnvSources | None = None,
) -> Prepared:
    """Phase one: the engine's gates, once — exemption, extraction, GPU relevance, ignore
    annotations, the facts each template is judged against — and each judged template's
    ``TemplateInputs`` and image needs.  No rule runs.  May raise on a defect (``evaluate`` does not)."""
    given = facts
    config = config or Config()
    facts = effective_facts(facts or ClusterFacts.empty(), config)
    dra_inputs = dra_inputs or NO_INPUTS
    kserve = kserve or NO_VIEW
    meta = as_dict(obj.get("metadata"))
    namespace = text(meta.get("namespace") or "", 253)
    dra = DraView(facts.dra, dra_inputs)
    prepared = Prepared(
        obj, config, given, facts, dra_inputs, kserve, dra, env_sources, kind=text(obj.get("kind") or "", 100),
        name=text(meta.get("name") or meta.get("generateName") or "", 253), namespace=namespace,
    )
    if namespace and namespace in config.exempt_namespaces:
        prepared.exempt = True
        return prepared
    honoured = prepared.honoured = config.honours_ignore_annotation(namespace)
    templates = prepared.templates = extract(obj, config.workload_index, kserve=_kserve_view(kserve, facts))
    about_object: ObjectInputs | None = None
    for pod in templates:
        budget.check()
        if not is_gpu_related(pod, config):
            continue
        prepared.gpu_related = True
        uses = _ignore_uses(obj, pod, honoured, config)
        prepared.ignore_uses.extend(u for u in uses if u not in prepared.ignore_uses)
        ignored = config.skipped_by_annotation({rule for u in uses for rule in u.rules}) if honoured else frozenset()
        if ignored >= RULES.keys():
            continue
        if about_object is None:
            about_object = object_inputs(obj, controlled_by_cluster_policy(obj))
        pod_facts = _facts_for(pod, facts)
        # The input's claims and templates matter to templates with claims; its DeviceClasses to every
        # template, since one may redefine the class that serves an extended resource (policies.cuda.dra).
        dra_key = (dra.inputs.key if not dra.inputs.empty and (pod.spec.get("resourceClaims") or dra.input_classes)
                   else b"")
        try:
            inputs = template_inputs(pod, about_object, ignored, dra_key, env_sources)
        except TooDeep as exc:
            problem = f"the pod template is {exc}"
            prepared.judged.append(PreparedTemplate(pod, None, pod_facts, ignored, problem=problem))
            continue
        prepared.judged.append(PreparedTemplate(pod, inputs, pod_facts, ignored))
    return prepared


def judge(prepared: Prepared, images: ImageFacts | None = None) -> Evaluation:
    """Phase two: run the rules on what ``prepare`` gave, with what ``images`` knows of the images
    (``prepared.image_uses()``); template results are memoised per snapshot under a key derived from
    their ``TemplateInputs`` (policies.template_inputs.inputs_key) and what ``images`` says."""
    obj, config, facts = prepared.obj, prepared.config, prepared.facts
    ev = Evaluation(obj=obj, config=config, facts=facts, images=images or NoImageFacts(),
                    dra_inputs=prepared.dra_inputs, kserve=prepared.kserve, env_sources=prepared.env_sources,
                    exempt=prepared.exempt,
                    gpu_related=prepared.gpu_related, ignore_uses=list(prepared.ignore_uses))
    if prepared.exempt:
        return ev
    kind, name, namespace, has_facts = prepared.kind, prepared.name, prepared.namespace, prepared.has_facts
    dra = prepared.dra
    skipped: set[str] = set()
    if not prepared.templates:
        skipped.update(_check_object(ev, obj, config, kind, name, namespace, prepared.honoured, has_facts, dra))
    for judged in prepared.judged:
        budget.check()
        pod, ignored, pod_facts = judged.pod, judged.ignored, judged.facts
        if judged.inputs is None:
            results = _unjudged_template(judged.problem)
        else:
            try:
                results = _check_memoised(prepared, judged, judged.inputs, ev.images, dra)
            except TooDeep as exc:
                results = _unjudged_template(f"the pod template is {exc}")
        violations, pod_skipped, placeholders = results
        ev.placeholders.extend(
            UnrenderedPlaceholder(pointer.join(pod.spec_pointer, p.path), p.text, p.what) for p in placeholders
        )
        skipped.update(pod_skipped)
        if has_facts and pod_facts is not facts and not pod_facts.nodes and UNSCHEDULABLE not in ignored:
            violations = (*violations, *_unknown_node(pod, config))
        if SELECTOR_MISMATCH not in ignored and (churning := churning_selector_keys(pod.spec)):
            violations = (*violations, *_churning_selector(churning, pod.spec, config))
        for rule_id, v in violations:
            module = RULES[rule_id]
            settings = config.settings(rule_id)
            found = _finding(rule_id, module.REMEDIATION, settings, v, pod, kind, name, namespace)
            if pod.spec_origins and any(  # a value several templates inherit is one problem, said once
                (f.rule, f.path, f.message) == (found.rule, found.path, found.message) for f in ev.findings
            ):
                continue
            ev.findings.append(found)
    if ev.gpu_related:
        skipped.update(_check_workload(ev, obj, prepared.templates, config, kind, name, namespace,
                                       prepared.honoured, has_facts))
    ev.skipped_rules = tuple(sorted(skipped))
    return ev


def images_in(
    obj: dict[str, Any], config: Config | None = None, rules: Iterable[str] | None = None
) -> tuple[ImageUse, ...]:
    """Every image the engine would look up in ``obj``, in document order: those of containers the CUDA
    rule judges, and those of containers without devices whose image's NVIDIA_VISIBLE_DEVICES
    gpu-device-access-bypass reads.

    The templates are those ``policies.engine.prepare`` judges (so exempt namespaces, templates that
    are not GPU-related and ignore annotations count as they do there); ``rules`` narrows the rules
    whose images are listed.
    """
    return prepare(obj, config).image_uses(rules)


def kserve_view(facts: ClusterFacts, inputs: KServeView = NO_VIEW) -> KServeView:
    """What KServe's templates merge over (policies.kserve): the input's objects, then the cluster's."""
    return _kserve_view(inputs, facts)


def _kserve_view(inputs: KServeView, facts: ClusterFacts) -> KServeView:
    """The input's KServe objects, then the cluster's."""
    cluster = facts.kserve
    return KServeView((*inputs.layers, cluster)) if cluster is not None else inputs


UNSCHEDULABLE = "gpu-unschedulable"


def _unknown_node(pod: PodTemplate, config: Config) -> tuple[tuple[str, Violation], ...]:
    """A pod created bound to a node the facts do not list: no rule that needs facts can judge it,
    and none of the known nodes' kubelets will run it (a warning: the facts may lag a new node)."""
    if config.settings(UNSCHEDULABLE).severity is None:
        return ()
    node = text(pod.spec.get("nodeName"), 253)
    message = (
        f"the pod is bound to node {node!r}, which the cluster facts do not list; no known node will run it, and "
        "gpuguard cannot judge it against a node (a node that has just joined appears in the facts shortly)"
    )
    fix = "Check spec.nodeName: bind the pod to an existing node, or leave node choice to the scheduler."
    violation = Violation(message=message, path=("nodeName",), severity=Severity.WARNING, remediation=fix)
    return ((UNSCHEDULABLE, violation),)


SELECTOR_MISMATCH = "gpu-node-selector-mismatch"


def _churning_selector(
    keys: tuple[str, ...], spec: Mapping[str, Any], config: Config
) -> tuple[tuple[str, Violation], ...]:
    """A pod that selects nodes by the value of a label GPU Feature Discovery rewrites every minute: a
    value that matches now stops matching at the next relabel, so the pod is not judged against nodes
    (the rules that read node selection skip it) and is told why (policies.facts.CHURNING_LABELS)."""
    if config.settings(SELECTOR_MISMATCH).severity is None:
        return ()
    names = ", ".join(keys)
    message = (
        f"node selection requires a value of {names}, which GPU Feature Discovery rewrites on every node each "
        "relabelling interval (default 60s): a value that matches now stops matching within a minute, so no "
        "node can be relied on; gpuguard does not judge this pod's placement against nodes"
    )
    fix = (f"Select on labels that describe the node (nvidia.com/gpu.product, nvidia.com/gpu.count, …); to require "
           f"that GFD has labelled the node, use operator Exists on {keys[0]}.")
    selector = spec.get("nodeSelector")
    path: tuple[str | int, ...] = (
        ("nodeSelector", keys[0]) if isinstance(selector, Mapping) and keys[0] in selector
        else ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    )
    violation = Violation(message=message, path=path, severity=Severity.WARNING, remediation=fix)
    return ((SELECTOR_MISMATCH, violation),)


def _facts_for(pod: PodTemplate, facts: ClusterFacts) -> ClusterFacts:
    """A pod created bound to a node (``spec.nodeName``) skips the scheduler: only that node counts."""
    node_name = pod.spec.get("nodeName")
    if isinstance(node_name, str) and node_name and pod.scheduling_known and not facts.is_empty:
        return facts.bound_to(node_name)
    return facts


# (violations, rules skipped for lack of facts, unrendered placeholders) of one pod template.
RuleResults = tuple[tuple[tuple[str, Violation], ...], frozenset[str], tuple[Placeholder, ...]]


def _check_memoised(
    prepared: Prepared, judged: PreparedTemplate, inputs: TemplateInputs, images: ImageFacts, dra: DraView
) -> RuleResults:
    """Run the rules on one pod template, memoised per facts snapshot and config.

    Rules see only ``inputs`` (policies.rule.RuleContext), so their results are a function of the
    inputs, the config, the facts and what the image facts say of the template's images; the key
    holds the inputs' digest and those image answers (a result computed while a lookup was pending
    must not outlive the lookup).  Controllers create many pods with equal inputs (a ReplicaSet's
    replicas differ only in what rules never see), so the webhook judges each once per snapshot.
    Violations are immutable and carry paths relative to the template, so they are shared safely.
    """
    facts, config = judged.facts, prepared.config

    def check() -> RuleResults:
        return _check(inputs, config, facts, images, judged.has_facts, dra)

    if inputs.key is None:  # data the key cannot take is judged without the memo, never left unjudged
        return check()
    seen: Any = None
    if not isinstance(images, NoImageFacts):
        archs = lookup_archs(facts)
        uses = prepared.template_image_uses(judged)
        seen = lookup_key(images, tuple((u.image, arch) for u in uses for arch in archs))
    return facts.memoised(RuleResultsKey(id(config), inputs.key, seen), check, owner=config)


def _image_uses(inputs: TemplateInputs, config: Config, facts: ClusterFacts) -> tuple[ImageUse, ...]:
    """The images of the template that the enabled, not ignored, CUDA and device-access rules look
    up, memoised per config and inputs (a controller's replicas need the same)."""
    if inputs.key is None:
        return image_uses(inputs.pod, config, inputs.ignored)
    return facts.memoised(ImageUsesKey(id(config), inputs.key),
                          lambda: image_uses(inputs.pod, config, inputs.ignored), owner=config)


# One enabled rule, in catalogue order: id, module, options, whether it needs facts, scheduling.
PlannedRule = tuple[str, RuleModule, Any, bool, bool, Applies]


def _plan(config: Config, facts: ClusterFacts) -> tuple[PlannedRule, ...]:
    """The rules ``config`` enables (a severity), resolved once per config and snapshot."""

    def compute() -> tuple[PlannedRule, ...]:
        planned = []
        for rule_id, module in RULES.items():
            settings = config.settings(rule_id)
            if rule_id in WORKLOAD_RULES:
                continue  # run once per object, by _check_workload
            if settings.severity is not None:
                planned.append((rule_id, module, settings.options, module.NEEDS_FACTS == "yes",
                                module.NEEDS_SCHEDULING, module.APPLIES))
        return tuple(planned)

    return facts.memoised(RulePlanKey(id(config)), compute, owner=config, pinned=True)


def _check(
    inputs: TemplateInputs,
    config: Config,
    facts: ClusterFacts,
    images: ImageFacts,
    has_facts: bool,
    dra: DraView,
) -> RuleResults:
    found: list[tuple[str, Violation]] = []
    skipped: set[str] = set()
    pod, ignored = inputs.pod, inputs.ignored
    # Node selection holding a placeholder or a run-time expression cannot be judged against nodes.
    scheduling_known = (pod.scheduling_known and not has_selector_values_unknown(pod)
                        and not churning_selector_keys(pod.spec))
    analysis = TemplateAnalysis(pod, facts, config.is_gpu)
    ctx = RuleContext(
        inputs=inputs,
        facts=facts,
        has_facts=has_facts,
        options={},
        is_gpu=config.is_gpu,
        analysis=analysis,
        images=images,
        dra=dra,
    )
    wide = facts.memoised(SnapshotProfileKey(), lambda: snapshot_profile(facts), pinned=True)
    profile = Profile(template_profile(pod, config.is_gpu), wide)
    for rule_id, module, options, needs_facts, needs_scheduling, applies in _plan(config, facts):
        budget.check()
        if rule_id in ignored:
            continue
        if needs_facts and not has_facts:
            skipped.add(rule_id)
            continue
        if not scheduling_known and needs_scheduling:
            # Operator-built pods (TrainJob, NIMService), inherited or unrendered selectors: unknown.
            continue
        if applies is not None and not applies(profile):
            continue  # the rule cannot find anything on this template (policies.applicability)
        ctx.options = options
        try:
            for v in module.check(ctx):
                found.append((rule_id, v))
        except Exception as exc:
            problem = f"rule {rule_id} failed on this pod template ({type(exc).__name__}: {text(str(exc), 200)})"
            found.append((CHECK_FAILED, _unjudged(problem)))
    return tuple(found), frozenset(skipped), tuple(find_placeholders(pod))


CHECK_FAILED = "gpu-check-failed"


def _check_object(
    ev: Evaluation,
    obj: dict[str, Any],
    config: Config,
    kind: str,
    name: str,
    namespace: str,
    honoured: bool,
    has_facts: bool,
    dra: DraView,
) -> set[str]:
    """Object rules, for objects of kinds the extractor does not know; returns the rules skipped for
    lack of facts (noted only for DRA objects, which those rules judge)."""
    api_version = obj.get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    if (group, kind) in config.workload_index or not isinstance(api_version, str):
        return set()
    uses = _ignore_uses(obj, None, honoured, config)
    named = {rule for use in uses for rule in use.rules} if honoured else set()
    ignored = config.skipped_by_annotation(named)
    if "all" in named:
        ev.ignore_uses.extend(uses)
        return set()
    skipped: set[str] = set()
    for rule_id, module in OBJECT_RULES.items():
        settings = config.settings(rule_id)
        if settings.severity is None or rule_id in ignored:
            continue
        if module.NEEDS_FACTS == "yes" and not has_facts:
            if is_dra(obj):
                skipped.add(rule_id)
            continue
        ctx = ObjectContext(
            obj=obj, is_gpu=config.is_gpu, options=settings.options, facts=ev.facts, has_facts=has_facts, dra=dra
        )
        try:
            violations = list(module.check_object(ctx))
        except Exception as exc:
            problem = f"rule {rule_id} failed on this object ({type(exc).__name__}: {text(str(exc), 200)})"
            violations = []
            _object_check_failed(ev, config, problem, kind, name, namespace)
        for v in violations:
            ev.gpu_related = True
            ev.findings.append(_object_finding(rule_id, module, settings, v, kind, name, namespace))
    if ev.gpu_related:
        ev.ignore_uses.extend(uses)
    return skipped


def _check_workload(
    ev: Evaluation,
    obj: dict[str, Any],
    templates: list[PodTemplate],
    config: Config,
    kind: str,
    name: str,
    namespace: str,
    honoured: bool,
    has_facts: bool,
) -> set[str]:
    """Workload rules (gangs, quotas, queues) on the whole object, after its templates; returns the
    rules skipped for lack of facts where they had something to judge.  The ignore annotation on the
    object, or on any of its templates, skips them."""
    named: set[str] = set()
    if honoured:
        for pod in (None, *templates):
            for use in _ignore_uses(obj, pod, True, config):
                named.update(use.rules)
    ignored = config.skipped_by_annotation(named) if named else frozenset()
    if "all" in named or ignored >= WORKLOAD_RULES.keys():
        return set()
    skipped: set[str] = set()
    ctx = WorkloadContext(obj=obj, templates=tuple(templates), facts=ev.facts, has_facts=has_facts, options={},
                          is_gpu=config.is_gpu, namespace=namespace)
    for rule_id, module in WORKLOAD_RULES.items():
        settings = config.settings(rule_id)
        if settings.severity is None or rule_id in ignored:
            continue
        budget.check()
        ctx.options = settings.options
        try:
            if module.NEEDS_FACTS == "yes" and not has_facts:
                if module.relevant(ctx):
                    skipped.add(rule_id)
                continue
            violations = list(module.check_workload(ctx))
        except Exception as exc:  # budget.Overtime is a BaseException: it passes through
            problem = f"rule {rule_id} failed on this object ({type(exc).__name__}: {text(str(exc), 200)})"
            _object_check_failed(ev, config, problem, kind, name, namespace)
            continue
        ev.findings.extend(_object_finding(rule_id, module, settings, v, kind, name, namespace) for v in violations)
    return skipped


def _object_finding(
    rule_id: str, module: RuleModule, settings: RuleSettings, v: Violation, kind: str, name: str, namespace: str
) -> Finding:
    """A finding about a whole object (object and workload rules): its path is relative to the object."""
    assert settings.severity is not None  # callers skip rules that are off
    severity = settings.severity if settings.explicit or v.severity is None else v.severity
    return Finding(
        rule=rule_id,
        severity=severity,
        message=v.message,
        path=pointer.join("", v.path),
        remediation=v.remediation or module.REMEDIATION,
        kind=kind,
        name=name,
        namespace=namespace,
        scale_up=v.scale_up,
    )


def _object_check_failed(ev: Evaluation, config: Config, problem: str, kind: str, name: str, namespace: str) -> None:
    settings = config.settings(CHECK_FAILED)
    if settings.severity is None:
        return
    ev.gpu_related = True
    ev.findings.append(
        Finding(
            rule=CHECK_FAILED,
            severity=settings.severity,
            message=_unjudged(problem).message,
            path="",
            remediation=RULES[CHECK_FAILED].REMEDIATION,
            kind=kind,
            name=name,
            namespace=namespace,
        )
    )


def _unjudged_template(problem: str) -> RuleResults:
    """A template's results when its rules cannot run: one gpu-check-failed finding."""
    return ((CHECK_FAILED, _unjudged(problem)),), frozenset(), ()


def _unjudged(problem: str) -> Violation:
    return Violation(message=f"{problem}; gpuguard cannot judge it, so it is not passed unjudged")


def _finding(
    rule_id: str,
    remediation: str,
    settings: RuleSettings,
    v: Violation,
    pod: PodTemplate,
    kind: str,
    name: str,
    namespace: str,
) -> Finding:
    assert settings.severity is not None
    # A rule may grade a finding itself (documented per rule); a severity set in config wins.
    severity = settings.severity if settings.explicit or v.severity is None else v.severity
    return Finding(
        rule=rule_id,
        severity=severity,
        message=v.message,
        path=_rebase(pod, v.anchor, v.path),
        remediation=v.remediation or remediation,
        kind=kind,
        name=name,
        namespace=namespace,
        fix=tuple(_abs_op(pod, op) for op in v.fix),
        scope=v.scope,
    )


@dataclass(frozen=True, slots=True)
class ClusterFindingsKey:
    """``cluster_problems`` for one config (by identity, checked as owner): read only the snapshot."""

    config: int


def cluster_problems(facts: ClusterFacts, config: Config | None = None) -> list[tuple[str, NodeProblem]]:
    """(rule id, problem) for what the enabled cluster rules find on the nodes themselves
    (policies.registry.CLUSTER_RULES): the same for every object judged against these facts, so the
    faces say each once — lint in a note, audit as a finding on the Node."""
    config = config or Config()
    facts = effective_facts(facts, config)

    def compute() -> list[tuple[str, NodeProblem]]:
        out: list[tuple[str, NodeProblem]] = []
        for rule_id, module in CLUSTER_RULES.items():
            if config.settings(rule_id).severity is None:
                continue
            out.extend((rule_id, p) for p in module.check_cluster(facts))
        return out

    return facts.memoised(ClusterFindingsKey(id(config)), compute, owner=config, pinned=True)


def cluster_findings(facts: ClusterFacts, config: Config | None = None) -> list[Finding]:
    """``cluster_problems`` as findings on Node objects, at the configured severity."""
    config = config or Config()
    out: list[Finding] = []
    for rule_id, problem in cluster_problems(facts, config):
        severity = config.settings(rule_id).severity
        assert severity is not None
        out.append(Finding(
            rule=rule_id, severity=severity, message=problem.message(), path=pointer.join("", problem.path),
            remediation=RULES[rule_id].REMEDIATION, kind="Node", name=problem.node, namespace="",
        ))
    return out


SHOWN_NODES = 3


def cluster_notes(facts: ClusterFacts, config: Config | None = None) -> list[str]:
    """``cluster_problems`` as one sentence per problem, naming the nodes that have it (lint's notes)."""
    grouped: dict[tuple[str, str], tuple[NodeProblem, list[str]]] = {}
    for rule_id, problem in cluster_problems(facts, config):
        _, nodes = grouped.setdefault((rule_id, problem.key or problem.problem), (problem, []))
        if problem.node not in nodes:
            nodes.append(problem.node)
    notes = []
    for (rule_id, _), (problem, nodes) in grouped.items():
        shown = ", ".join(nodes[:SHOWN_NODES]) + (
            f" and {len(nodes) - SHOWN_NODES} more" if len(nodes) > SHOWN_NODES else "")
        notes.append(f"{rule_id} on {noun(len(nodes), 'node')} {shown}: {problem.problem}")
    return notes

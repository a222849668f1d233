"""A static model of the scheduler's node filters, evaluated per node group.

Implements the semantics of NodeResourcesFit (allocatable only; current usage is unknown
offline), NodeAffinity (nodeSelector AND required nodeAffinity; terms ORed, expressions ANDed,
an empty term matches nothing), TaintToleration (NoSchedule and NoExecute taints) and
RuntimeClass scheduling (its nodeSelector is merged into the pod's, its tolerations appended),
after kubernetes/kubernetes pkg/scheduler/framework/plugins and
k8s.io/component-helpers/scheduling/corev1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from policies import budget, patterns
from policies.facts import (
    CHURNING_LABELS,
    VOLATILE_LABELS,
    ClusterFacts,
    NodeFacts,
    NodeGroup,
    RuntimeClassFacts,
    Taint,
)
from policies.labeldomain import LabelDomain
from policies.podresources import extended_resource_names
from policies.podspec import ContainerRef, PodTemplate
from policies.quantity import format_quantity, try_parse
from policies.shapes import as_list, as_mapping
from policies.types import RelPath

SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")
_INT = patterns.compile(r"[+-]?[0-9]+")


def _int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): optional sign and decimal digits only (an int64 has at most
    19 digits; longer text is out of range, and ``int()`` of thousands of digits raises)."""
    if len(text) > 20 or not _INT.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def toleration_tolerates(tol: Mapping[str, Any], taint: Taint) -> bool:
    """k8s.io/api core/v1 ``Toleration.ToleratesTaint`` (toleration.go).

    An empty effect matches every effect, an empty key every key; operator "" means Equal;
    ``Lt``/``Gt`` (numeric threshold tolerations) compare the taint's value with the toleration's
    as int64.  An empty key with Equal is rejected by API validation, so it never reaches here
    from a valid object; like upstream we then just compare values.
    """
    effect = str(tol.get("effect") or "")
    if effect and effect != taint.effect:
        return False
    key = str(tol.get("key") or "")
    if key and key != taint.key:
        return False
    operator = str(tol.get("operator") or "Equal")
    value = "" if tol.get("value") is None else str(tol.get("value"))
    if operator == "Equal":
        return value == taint.value
    if operator == "Exists":
        return True
    if operator in ("Lt", "Gt"):
        limit, actual = _int64(value), _int64(taint.value)
        if limit is None or actual is None:
            return False
        return actual < limit if operator == "Lt" else actual > limit
    return False


def untolerated(tolerations: Iterable[Mapping[str, Any]], taints: Iterable[Taint]) -> list[Taint]:
    tols = [t for t in tolerations if isinstance(t, Mapping)]
    return [
        taint
        for taint in taints
        if taint.effect in SCHEDULING_EFFECTS and not any(toleration_tolerates(t, taint) for t in tols)
    ]


_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _values(expr: Mapping[str, Any]) -> list[str] | None:
    raw = expr.get("values")
    if raw is None:
        return []
    return [str(v) for v in raw] if isinstance(raw, list) else None


def _requirement_valid(op: Any, values: list[str]) -> bool:
    """labels.NewRequirement: In/NotIn need values, Exists/DoesNotExist none, Gt/Lt one integer."""
    if op in ("In", "NotIn"):
        return bool(values)
    if op in ("Exists", "DoesNotExist"):
        return not values
    if op in ("Gt", "Lt"):
        return len(values) == 1 and _int64(values[0]) is not None
    return False


def _expression_matches(expr: Mapping[str, Any], value: str | None) -> bool:
    """One matchExpressions requirement against a label value (None: label absent)."""
    op = expr.get("operator")
    values = _values(expr)
    if values is None or not _requirement_valid(op, values):
        return False  # a parse error: upstream the term then matches no node
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if value is None:
        return False
    left, right = _int64(value), _int64(values[0])
    if left is None or right is None:
        return False
    return left > right if op == "Gt" else left < right


def _field_matches(expr: Mapping[str, Any], node: NodeFacts) -> bool:
    """matchFields: only ``metadata.name``, only In/NotIn with exactly one value."""
    op = expr.get("operator")
    values = _values(expr)
    if op not in ("In", "NotIn") or values is None or len(values) != 1:
        return False
    value = node.name if expr.get("key") == "metadata.name" else None
    if op == "In":
        return value == values[0]
    return value != values[0]


def _pool_term_matches(
    exprs: list[Mapping[str, Any]], fields: list[Mapping[str, Any]], node: NodeFacts, base: Mapping[str, LabelDomain]
) -> bool:
    """Whether some node the pool may create satisfies the term (expressions on one key intersected)."""
    domains = dict(base)
    for e in exprs:
        key, op, values = str(e.get("key")), e.get("operator"), _values(e)
        if values is None or not _requirement_valid(op, values):
            return False
        narrowed = domains.get(key, node.label_domain(key)).narrow(op, values)
        if narrowed is None:
            return False
        domains[key] = narrowed
    # A created node's name is generated, so only NotIn can hold for metadata.name.
    return all(f.get("operator") == "NotIn" and _field_matches(f, node) for f in fields)


def label_allows(node: NodeFacts, key: str, value: str) -> bool:
    """Whether the node (some node the pool may create) carries ``key=value``."""
    if node.pool is None:
        return node.labels.get(key) == value
    return node.label_domain(key).narrow("In", [value]) is not None


def term_matches(term: Mapping[str, Any], node: NodeFacts, base: Mapping[str, LabelDomain] | None = None) -> bool:
    """A nodeSelectorTerm: expressions and fields ANDed; an empty term matches no node.

    For a pool: whether some node it may create matches; ``base`` holds what the nodeSelector
    already demands of the pool's labels.
    """
    exprs = [e for e in as_list(term.get("matchExpressions")) if isinstance(e, Mapping)]
    fields = [e for e in as_list(term.get("matchFields")) if isinstance(e, Mapping)]
    if not exprs and not fields:
        return False
    if node.pool is not None:
        return _pool_term_matches(exprs, fields, node, base or {})
    for e in exprs:
        if not _expression_matches(e, node.labels.get(str(e.get("key")))):
            return False
    return all(_field_matches(f, node) for f in fields)


@dataclass(frozen=True, slots=True)
class NodeConstraints:
    """What the pod (plus its RuntimeClass) demands of a node, pre-digested."""

    node_selector: Mapping[str, str]  # the pod's nodeSelector merged with its RuntimeClass's
    required_terms: tuple[Mapping[str, Any], ...] | None  # None: no required affinity
    tolerations: tuple[Mapping[str, Any], ...]
    per_node: bool  # the constraints read volatile labels or fields: evaluate members, not groups
    label_keys: frozenset[str] = frozenset()
    uses_fields: bool = False
    runtime_class: RuntimeClassFacts | None = None
    # nodeSelector keys the pod and its RuntimeClass set to different values: admission rejects
    # such a pod ("conflict: runtimeClass.scheduling.nodeSelector[...]"), so no node matches.
    conflicts: tuple[str, ...] = ()

    def selector_ok(self, node: NodeFacts) -> bool:
        if self.conflicts:
            return False
        if node.pool is not None:
            return self._pool_selector_ok(node)
        for k, v in self.node_selector.items():
            if node.labels.get(k) != v:
                return False
        if self.required_terms is None:
            return True
        return any(term_matches(t, node) for t in self.required_terms)

    def _pool_selector_ok(self, node: NodeFacts) -> bool:
        base: dict[str, LabelDomain] = {}
        for k, v in self.node_selector.items():
            narrowed = node.label_domain(k).narrow("In", [v])
            if narrowed is None:
                return False
            base[k] = narrowed
        if self.required_terms is None:
            return True
        return any(term_matches(t, node, base) for t in self.required_terms)

    def untolerated(self, node: NodeFacts) -> list[Taint]:
        return untolerated(self.tolerations, node.taints)

    def per_node_in(self, group: NodeGroup) -> bool:
        """Whether the selector must be evaluated on each member of ``group``."""
        return self.per_node or bool(self.label_keys & group.varying_labels)


def churning_selector_keys(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """Labels in ``policies.facts.CHURNING_LABELS`` whose *value* the pod's node selection requires
    (``nodeSelector``, or ``In``/``NotIn``/``Gt``/``Lt`` in a required term); ``Exists`` and
    ``DoesNotExist`` only ask whether the label is there, which the facts keep exactly."""
    keys = [k for k in as_mapping(spec.get("nodeSelector")) if k in CHURNING_LABELS]
    for term in required_terms(spec) or ():
        for e in as_list(term.get("matchExpressions")):
            if isinstance(e, Mapping) and e.get("key") in CHURNING_LABELS and e.get("operator") in _VALUE_OPERATORS:
                keys.append(str(e["key"]))
    return tuple(dict.fromkeys(str(k) for k in keys))


_VALUE_OPERATORS = frozenset({"In", "NotIn", "Gt", "Lt"})


def required_terms(spec: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...] | None:
    """The required node-affinity terms; () when the field is present but holds no term.

    Upstream (component-helpers nodeaffinity.GetRequiredNodeAffinity) a present
    requiredDuringSchedulingIgnoredDuringExecution with no (non-empty) term matches no node.
    """
    affinity = spec.get("affinity")
    if not isinstance(affinity, Mapping):
        return None
    node_aff = affinity.get("nodeAffinity")
    if not isinstance(node_aff, Mapping):
        return None
    req = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(req, Mapping):
        return None
    terms = req.get("nodeSelectorTerms")
    if not isinstance(terms, list):
        return ()
    return tuple(t for t in terms if isinstance(t, Mapping))


def pod_node_selector(spec: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): "" if v is None else str(v) for k, v in as_mapping(spec.get("nodeSelector")).items()}


def pod_tolerations(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in as_list(spec.get("tolerations")) if isinstance(t, Mapping)]


def extended_resource_tolerations(pod: PodTemplate) -> list[dict[str, str]]:
    """What the ExtendedResourceToleration admission plugin adds to the pod's tolerations.

    kubernetes/kubernetes plugin/pkg/admission/extendedresourcetoleration/admission.go: for each
    extended resource in the requests of containers and init containers, in sorted order,
    ``{key: <name>, operator: Exists, effect: NoSchedule}``.  Pods get requests defaulted from
    limits before admission (pkg/apis/core/v1/defaults.go), so limits count too.
    """
    return [{"key": name, "operator": "Exists", "effect": "NoSchedule"} for name in extended_resource_names(pod)]


def constraints_for(pod: PodTemplate, facts: ClusterFacts) -> NodeConstraints:
    """The pod's node constraints after the admission plugins' changes.

    plugin/pkg/admission/runtimeclass setScheduling: the RuntimeClass nodeSelector is merged into
    the pod's (a differing value for the same key rejects the pod), its tolerations are appended.
    When the cluster runs ExtendedResourceToleration, its tolerations are appended too.
    """
    spec = pod.spec
    selector = pod_node_selector(spec)
    tolerations = pod_tolerations(spec)
    conflicts: list[str] = []
    rc_name = spec.get("runtimeClassName")
    rc = facts.runtime_classes.get(rc_name) if isinstance(rc_name, str) else None
    if rc is not None:
        for key, value in rc.node_selector.items():
            if key in selector and selector[key] != value:
                conflicts.append(key)
            else:
                selector[key] = value
        tolerations.extend(t for t in rc.tolerations if t not in tolerations)
    if facts.tolerates_extended_resources:
        tolerations.extend(t for t in extended_resource_tolerations(pod) if t not in tolerations)
    terms = required_terms(spec)
    keys = set(selector)
    uses_fields = False
    for term in terms or ():
        for e in as_list(term.get("matchExpressions")):
            if isinstance(e, Mapping):
                keys.add(str(e.get("key")))
        if term.get("matchFields"):
            uses_fields = True
    return NodeConstraints(
        node_selector=selector,
        required_terms=terms,
        tolerations=tuple(tolerations),
        per_node=uses_fields or bool(keys & VOLATILE_LABELS),
        label_keys=frozenset(keys),
        uses_fields=uses_fields,
        runtime_class=rc,
        conflicts=tuple(conflicts),
    )


@dataclass(slots=True)
class GroupVerdict:
    """Why each filter passed or failed for one node group (or one node of it)."""

    group: NodeGroup
    nodes: tuple[NodeFacts, ...]
    offers: bool  # advertises every requested GPU resource
    fits: bool  # allocatable covers each request
    selector_ok: bool
    untolerated: list[Taint] = field(default_factory=list)
    schedulable: bool = True
    shortfalls: dict[str, tuple[Fraction, Fraction]] = field(default_factory=dict)
    missing: tuple[str, ...] = ()  # requested GPU resources this group does not advertise
    # It offers and fits only if a requested resource it may offer (in an unknown count: a pool of
    # unknown GPU shape, a node whose device plugin has not registered) turns out to be there.
    hedged: bool = False

    @property
    def taints_ok(self) -> bool:
        return not self.untolerated

    @property
    def passes(self) -> bool:
        return self.offers and self.fits and self.selector_ok and self.taints_ok and self.schedulable

    @property
    def size(self) -> int:
        return len(self.nodes)

    def reasons(self) -> list[str]:
        out = []
        if not self.schedulable:
            out.append("cordoned (spec.unschedulable)")
        if not self.offers:
            what = ", ".join(self.missing) if self.missing else "the requested GPU resource"
            out.append(f"offers no {what}")
        for name, (want, have) in self.shortfalls.items():
            out.append(f"has {format_quantity(have)} {name} allocatable, the pod asks {format_quantity(want)}")
        if not self.selector_ok:
            out.append("labels do not match the nodeSelector/required node affinity")
        if self.untolerated:
            out.append("untolerated taint " + ", ".join(str(t) for t in self.untolerated))
        return out

    def describe(self) -> str:
        if len(self.nodes) == self.group.size:
            return self.group.describe()
        return NodeGroup(self.nodes[0], self.nodes).describe()


def analyse(
    pod: PodTemplate, requests: Mapping[str, Fraction], facts: ClusterFacts
) -> list[GroupVerdict]:
    """One verdict per node group (split per node when the constraints read per-node labels)."""
    cons = constraints_for(pod, facts)
    verdicts: list[GroupVerdict] = []
    for group in facts.groups:
        budget.check()
        rep = group.representative
        maybe = tuple(n for n in requests if rep.allocatable.get(n, Fraction(0)) <= 0 and n in rep.may_offer)
        missing = tuple(n for n in requests if rep.allocatable.get(n, Fraction(0)) <= 0 and n not in maybe)
        shortfalls = {
            n: (q, rep.allocatable[n])
            for n, q in requests.items()
            if n not in missing and n not in maybe and rep.allocatable[n] < q
        }
        untol = cons.untolerated(rep)
        subsets: list[tuple[tuple[NodeFacts, ...], bool]]
        if cons.per_node_in(group):
            ok = tuple(m for m in group.members if cons.selector_ok(m))
            bad = tuple(m for m in group.members if not cons.selector_ok(m))
            subsets = [(s, flag) for s, flag in ((ok, True), (bad, False)) if s]
        else:
            subsets = [(group.members, cons.selector_ok(rep))]
        for nodes, sel_ok in subsets:
            verdicts.append(
                GroupVerdict(
                    group=group,
                    nodes=nodes,
                    offers=not missing,
                    fits=not shortfalls,
                    selector_ok=sel_ok,
                    untolerated=list(untol),
                    schedulable=not rep.unschedulable,
                    shortfalls=dict(shortfalls),
                    missing=missing,
                    hedged=bool(maybe),
                )
            )
    return verdicts


@dataclass(frozen=True, slots=True)
class UnknownResource:
    """A requested GPU resource no usable node advertises.

    ``selected`` is empty when no node of the cluster advertises it; otherwise it holds the
    verdicts of the nodes the pod's selector picks, which advertise other GPU resources (a MIG
    strategy or ``.shared`` renaming mismatch on the nodes the pod targets).
    """

    name: str
    selected: tuple[GroupVerdict, ...] = ()


@dataclass(slots=True)
class Diagnosis:
    """Which scheduler filter rules out a pod, decided once and shared by the facts rules.

    Each filter-specific rule fires only when its filter alone excludes every node that offers
    the resource (for taints: every offering node the pod selects, see ``taint_scope``);
    ``unschedulable`` holds when no node passes all filters although none of those rules fires.
    An unknown resource silences everything downstream of it.
    """

    requests: Mapping[str, Fraction]
    verdicts: list[GroupVerdict]
    unknown: dict[str, UnknownResource]
    too_large: dict[str, Fraction]  # resource → the largest allocatable of any node offering it
    # When only groups whose GPU shape is unknown (``hedged``) could run the pod: the diagnosis
    # without them, which the facts rules then report as warnings naming those groups.
    strict: Diagnosis | None = None
    hedged_by: tuple[GroupVerdict, ...] = ()

    @property
    def clean(self) -> bool:
        """No facts rule has anything to say."""
        return (
            not self.unknown
            and not self.too_large
            and not self.selector_blocked
            and not self.taints_blocked
            and not self.unschedulable
        )

    @property
    def offering(self) -> list[GroupVerdict]:
        return [v for v in self.verdicts if v.offers]

    @property
    def selector_blocked(self) -> bool:
        offering = self.offering
        return not self.unknown and bool(offering) and not any(v.selector_ok for v in offering)

    @property
    def selected(self) -> list[GroupVerdict]:
        """Offering nodes the pod's nodeSelector/affinity picks."""
        return [v for v in self.offering if v.selector_ok]

    @property
    def taint_scope(self) -> list[GroupVerdict]:
        """The nodes whose taints matter: offering nodes the pod selects, preferring those that
        also fit and are not cordoned; all offering nodes when the selector picks none."""
        selected = self.selected
        viable = [v for v in selected if v.fits and v.schedulable]
        return viable or selected or self.offering

    @property
    def taints_blocked(self) -> bool:
        scope = self.taint_scope
        return not self.unknown and bool(scope) and not any(v.taints_ok for v in scope)

    @property
    def unschedulable(self) -> bool:
        if not self.verdicts or self.unknown or self.too_large:
            return False
        if self.selector_blocked or self.taints_blocked:
            return False
        return not any(v.passes for v in self.verdicts)


def toleration_for(taint: Taint, requested: AbstractSet[str]) -> dict[str, str]:
    """The toleration gpu-taint-not-tolerated proposes for ``taint``: Exists for a requested
    resource's taint or a value-less one (the value carries no meaning), else Equal with its value
    (so ``dedicated=training`` does not also tolerate every other ``dedicated`` pool)."""
    if taint.key in requested or not taint.value:
        return {"key": taint.key, "operator": "Exists", "effect": taint.effect}
    return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}


def tolerations_opening(target: GroupVerdict, requested: AbstractSet[str]) -> list[dict[str, str]]:
    """The tolerations that let the pod past ``target``'s untolerated taints, each once."""
    out: list[dict[str, str]] = []
    for taint in target.untolerated:
        tol = toleration_for(taint, requested)
        if tol not in out:
            out.append(tol)
    return out


def fix_target(scope: Sequence[GroupVerdict]) -> GroupVerdict:
    """The group reachable with the fewest new tolerations (then the one with most nodes)."""
    return min(scope, key=lambda v: (len(v.untolerated), -v.size))


def opened_by_resource_tolerations(scope: Sequence[GroupVerdict], requested: AbstractSet[str]) -> list[GroupVerdict]:
    """The groups of ``scope`` whose every untolerated taint is keyed by a resource the pod requests
    (``nvidia.com/gpu``): tolerating those changes nothing the pod gets, so gpu-taint-not-tolerated
    fixes them; taints keyed otherwise reserve a pool for chosen workloads, which a person decides."""
    return [v for v in scope if all(taint.key in requested for taint in v.untolerated)]


def meant_for(verdicts: Sequence[GroupVerdict], requested: AbstractSet[str]) -> list[GroupVerdict]:
    """The node groups the pod is meant for, for rules that judge what happens once it runs there
    (gpu-cuda-driver-mismatch): the groups it can land on; when there are none but taints alone keep
    it off groups it selects (they offer and fit its GPUs and are not cordoned), those groups, as if
    the missing tolerations were there.

    Which of them: the ones the toleration gpu-taint-not-tolerated's fix adds opens (its target's
    tolerations, ``requested`` being the extended resources the pod requests); when it offers no fix
    (the taints reserve the pools), every such group.  So one run shows every problem, and the same run
    after ``--fix`` judges the same nodes: the fix brings no new finding.
    """
    passing = [v for v in verdicts if v.passes]
    if passing:
        return passing
    blocked = [v for v in verdicts if v.untolerated and v.offers and v.fits and v.selector_ok and v.schedulable]
    opened = opened_by_resource_tolerations(blocked, requested)
    if not opened:
        return blocked
    tolerations = tolerations_opening(fix_target(opened), requested)
    return [v for v in blocked if not untolerated(tolerations, v.untolerated)]


def _advertises(verdict: GroupVerdict, name: str) -> bool:
    rep = verdict.group.representative
    return rep.allocatable.get(name, Fraction(0)) > 0 or name in rep.may_offer


def _judge(
    requests: Mapping[str, Fraction], verdicts: list[GroupVerdict], is_gpu: Callable[[str], bool]
) -> Diagnosis:
    selected = [v for v in verdicts if v.selector_ok]
    unknown: dict[str, UnknownResource] = {}
    too_large: dict[str, Fraction] = {}
    for name, quantity in requests.items():
        if not any(_advertises(v, name) for v in verdicts):
            unknown[name] = UnknownResource(name)
            continue
        if selected and not any(_advertises(v, name) for v in selected):
            other_gpu = tuple(
                v
                for v in selected
                if any(is_gpu(r) and q > 0 for r, q in v.group.representative.allocatable.items())
            )
            if other_gpu:
                unknown[name] = UnknownResource(name, other_gpu)
                continue
        if any(name in v.group.representative.may_offer for v in verdicts):
            continue  # some group may offer it in a count nobody knows
        largest = max(v.group.representative.allocatable.get(name, Fraction(0)) for v in verdicts)
        if quantity > largest:
            too_large[name] = largest
    return Diagnosis(requests=requests, verdicts=verdicts, unknown=unknown, too_large=too_large)


def diagnose(
    pod: PodTemplate,
    requests: Mapping[str, Fraction],
    facts: ClusterFacts,
    is_gpu: Callable[[str], bool],
    verdicts: list[GroupVerdict] | None = None,
) -> Diagnosis:
    """The diagnosis against every node and pool.

    Capacity that can appear counts like nodes: a pod that fits only a pool that scales up is
    fine.  A pod that could only run where the GPU shape is unknown is not known to be fine: then
    ``strict`` holds the diagnosis without those groups, for the rules to report as warnings.
    """
    verdicts = analyse(pod, requests, facts) if verdicts is None else verdicts
    diagnosis = _judge(requests, verdicts, is_gpu)
    if not diagnosis.clean:
        return diagnosis
    passing = [v for v in verdicts if v.passes]
    if passing and all(v.hedged for v in passing):
        strict = _judge(requests, [v for v in verdicts if not v.hedged], is_gpu)
        if not strict.clean or not strict.verdicts:
            diagnosis.strict = strict
            diagnosis.hedged_by = tuple(passing)
    return diagnosis


def request_sites(pod: PodTemplate, name: str) -> list[tuple[ContainerRef, RelPath, Fraction]]:
    """Where the pod asks for ``name``: each container's limits key (requests key when it sets
    no limit), relative to the pod spec, with the quantity it asks for."""
    sites: list[tuple[ContainerRef, RelPath, Fraction]] = []
    for c in pod.containers:
        if c.kind == "ephemeralContainer":
            continue
        for which in ("limits", "requests"):
            values = c.resource_map(which)
            if name in values:
                quantity = try_parse(c.resource_map("requests").get(name, values[name]))
                if quantity is not None and quantity > 0:
                    sites.append((c, (*c.resources_path, which, name), quantity))
                break
    return sites


"""A static model of the scheduler's node filters, evaluated per node group.

Implements the semantics of NodeResourcesFit (allocatable only; current usage is unknown
offline), NodeAffinity (nodeSelector AND required nodeAffinity; terms ORed, expressions ANDed,
an empty term matches nothing), TaintToleration (NoSchedule and NoExecute taints) and
RuntimeClass scheduling (its nodeSelector is merged into the pod's, its tolerations appended),
after kubernetes/kubernetes pkg/scheduler/framework/plugins and
k8s.io/component-helpers/scheduling/corev1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from policies.facts import VOLATILE_LABELS, ClusterFacts, NodeFacts, NodeGroup, Taint
from policies.podspec import PodTemplate
from policies.quantity import format_quantity

SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")


def toleration_tolerates(tol: Mapping[str, Any], taint: Taint) -> bool:
    """corev1.Toleration.ToleratesTaint."""
    effect = tol.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = tol.get("key") or ""
    operator = tol.get("operator") or "Equal"
    if key and key != taint.key:
        return False
    if operator == "Exists":
        return True
    if operator == "Equal":
        if not key:  # an empty key needs Exists
            return False
        return str(tol.get("value") or "") == taint.value
    return False


def untolerated(tolerations: Iterable[Mapping[str, Any]], taints: Iterable[Taint]) -> list[Taint]:
    tols = [t for t in tolerations if isinstance(t, Mapping)]
    return [
        taint
        for taint in taints
        if taint.effect in SCHEDULING_EFFECTS and not any(toleration_tolerates(t, taint) for t in tols)
    ]


def _expression_matches(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or ()]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(values) != 1:
            return False
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def term_matches(term: Mapping[str, Any], node: NodeFacts) -> bool:
    exprs = [e for e in term.get("matchExpressions") or () if isinstance(e, Mapping)]
    fields = [e for e in term.get("matchFields") or () if isinstance(e, Mapping)]
    if not exprs and not fields:
        return False
    for e in exprs:
        if not _expression_matches(e, node.labels.get(str(e.get("key")))):
            return False
    for f in fields:
        value = node.name if f.get("key") == "metadata.name" else None
        if not _expression_matches(f, value):
            return False
    return True


@dataclass(frozen=True, slots=True)
class NodeConstraints:
    """What the pod (plus its RuntimeClass) demands of a node, pre-digested."""

    node_selector: Mapping[str, str]
    required_terms: tuple[Mapping[str, Any], ...] | None  # None: no required affinity
    tolerations: tuple[Mapping[str, Any], ...]
    per_node: bool  # the constraints read per-node labels or fields: evaluate members, not groups

    def selector_ok(self, node: NodeFacts) -> bool:
        for k, v in self.node_selector.items():
            if node.labels.get(k) != v:
                return False
        if self.required_terms is None:
            return True
        return any(term_matches(t, node) for t in self.required_terms)

    def untolerated(self, node: NodeFacts) -> list[Taint]:
        return untolerated(self.tolerations, node.taints)


def required_terms(spec: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...] | None:
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
        return None
    return tuple(t for t in terms if isinstance(t, Mapping))


def constraints_for(pod: PodTemplate, facts: ClusterFacts) -> NodeConstraints:
    spec = pod.spec
    selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()} if isinstance(
        spec.get("nodeSelector"), Mapping
    ) else {}
    tolerations = [t for t in spec.get("tolerations") or () if isinstance(t, Mapping)] if isinstance(
        spec.get("tolerations"), list
    ) else []
    rc_name = spec.get("runtimeClassName")
    if isinstance(rc_name, str) and rc_name in facts.runtime_classes:
        rc = facts.runtime_classes[rc_name]
        selector = {**rc.node_selector, **selector}
        tolerations.extend(rc.tolerations)
    terms = required_terms(spec)
    keys = set(selector)
    uses_fields = False
    for term in terms or ():
        for e in term.get("matchExpressions") or ():
            if isinstance(e, Mapping):
                keys.add(str(e.get("key")))
        if term.get("matchFields"):
            uses_fields = True
    return NodeConstraints(
        node_selector=selector,
        required_terms=terms,
        tolerations=tuple(tolerations),
        per_node=uses_fields or bool(keys & VOLATILE_LABELS),
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

    @property
    def taints_ok(self) -> bool:
        return not self.untolerated

    @property
    def passes(self) -> bool:
        return self.offers and self.fits and self.selector_ok and self.taints_ok and self.schedulable

    def reasons(self) -> list[str]:
        out = []
        if not self.schedulable:
            out.append("cordoned (spec.unschedulable)")
        if not self.offers:
            out.append("does not offer the requested GPU resource")
        for name, (want, have) in self.shortfalls.items():
            out.append(f"{name}: asks {format_quantity(want)}, node has {format_quantity(have)}")
        if not self.selector_ok:
            out.append("nodeSelector/affinity does not match")
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
        rep = group.representative
        offers = all(rep.allocatable.get(n, Fraction(0)) > 0 for n in requests)
        shortfalls = {
            n: (q, rep.allocatable.get(n, Fraction(0)))
            for n, q in requests.items()
            if rep.allocatable.get(n, Fraction(0)) > 0 and rep.allocatable[n] < q
        }
        untol = cons.untolerated(rep)
        subsets: list[tuple[tuple[NodeFacts, ...], bool]]
        if cons.per_node:
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
                    offers=offers,
                    fits=not shortfalls,
                    selector_ok=sel_ok,
                    untolerated=list(untol),
                    schedulable=not rep.unschedulable,
                    shortfalls=dict(shortfalls),
                )
            )
    return verdicts


def analysis_cached(
    cache: dict[str, Any],
    pod: PodTemplate,
    requests: Mapping[str, Fraction],
    facts: ClusterFacts,
) -> list[GroupVerdict]:
    key = "scheduling:" + pod.spec_pointer
    if key not in cache:
        cache[key] = analyse(pod, requests, facts)
    result: list[GroupVerdict] = cache[key]
    return result


NodeFilter = Callable[[NodeFacts], bool]

"""gpu-node-selector-mismatch: the pod's node selection matches none of the nodes offering its GPUs.

The scheduler's NodeAffinity filter requires every ``nodeSelector`` pair and at least one
required node-affinity term (expressions ANDed; an empty term, or no term, matches nothing;
``Gt``/``Lt`` compare integers) — component-helpers scheduling/corev1/nodeaffinity.  The
RuntimeClass admission plugin merges the RuntimeClass's ``scheduling.nodeSelector`` into the
pod's and rejects the pod when both set the same key to different values.  A selector copied
from another cluster (``cloud.google.com/gke-accelerator``, a product label spelled differently,
a pool renamed) matches no GPU node, and the pod stays Pending.

The finding points at the selector key, RuntimeClass or affinity expression that no GPU node
satisfies, and lists what the GPU nodes carry for that key.

Failing (GPU nodes are labelled ``pool: a100`` / ``pool: h100``)::

    nodeSelector: {pool: gpu}

Passing::

    nodeSelector: {pool: a100}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from policies.applicability import Applies
from policies.facts import VOLATILE_LABELS, NodeFacts
from policies.rule import NeedsFacts, Option, RuleContext
from policies.rulekit import with_diagnosis
from policies.scheduling import (
    Diagnosis,
    GroupVerdict,
    NodeConstraints,
    constraints_for,
    label_allows,
    pod_node_selector,
    required_terms,
    term_matches,
)
from policies.shapes import as_list, text
from policies.types import RelPath, Severity, Violation
from policies.wording import plural

ID = "gpu-node-selector-mismatch"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = True
APPLIES: Applies = None
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = (
    "nodeSelector / required node affinity (with the RuntimeClass nodeSelector) matches none of the nodes "
    "that offer the GPU resource."
)
REMEDIATION = (
    "Change nodeSelector/affinity to labels the GPU nodes carry (the message lists them), or label the GPU nodes."
)
OPTIONS: tuple[Option, ...] = ()

TERMS_PATH: RelPath = (
    "affinity",
    "nodeAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "nodeSelectorTerms",
)
_MAX_VALUES = 6


def _nodes_for_keys(
    verdicts: Iterable[GroupVerdict], keys: Iterable[str], per_node: bool = False
) -> Iterator[tuple[GroupVerdict, tuple[NodeFacts, ...]]]:
    """Per verdict, the nodes whose labels must be read: the representative unless a key varies."""
    wanted = frozenset(keys)
    for v in verdicts:
        if per_node or wanted & v.group.varying_labels:
            yield v, v.nodes
        else:
            yield v, (v.nodes[0],)


def _carried(offering: list[GroupVerdict], key: str) -> str:
    """What the offering nodes carry for ``key``: value → nodes, grouped (pools: the values their
    nodes may carry)."""
    by_value: dict[str | None, list[str]] = {}
    for v, nodes in _nodes_for_keys(offering, (key,)):
        pool = v.nodes[0]
        if pool.pool is not None and key not in pool.labels:
            domain = pool.label_domain(key)
            if key in VOLATILE_LABELS:  # a new node's own name or id: never one a pod can name beforehand
                shown: str | None = "\0each new node's own value"
            else:  # a pool whose nodes never carry the key reads like a node without it
                shown = None if domain.possible_values() == frozenset() else f"\0{domain.describe()}"
            by_value.setdefault(shown, []).append(v.describe())
        elif len(nodes) == 1 and key not in v.group.varying_labels:
            by_value.setdefault(v.nodes[0].labels.get(key), []).append(v.describe())
        else:
            for node in nodes:
                by_value.setdefault(node.labels.get(key), []).append(node.name)
    parts = []
    for value, where in list(by_value.items())[:_MAX_VALUES]:
        if value is not None and value.startswith("\0"):
            shown = text(value[1:])  # a pool's possible values
            label = f"{text(key)} in {shown}" if shown.startswith("{") else f"{text(key)} with {shown}"
        else:
            label = f"no {text(key)} label" if value is None else f"{text(key)}={text(value)}"
        parts.append(f"{label} on {', '.join(where[:3])}{' and more' if len(where) > 3 else ''}")
    if len(by_value) > _MAX_VALUES:
        parts.append(plural(len(by_value) - _MAX_VALUES, "more value"))
    return "; ".join(parts)


def _any_node(
    offering: list[GroupVerdict], keys: Iterable[str], pred: Callable[[NodeFacts], bool], per_node: bool = False
) -> bool:
    return any(pred(n) for _, nodes in _nodes_for_keys(offering, keys, per_node) for n in nodes)


def _label_is(key: str, value: str) -> Callable[[NodeFacts], bool]:
    return lambda node: label_allows(node, key, value)


def _matches_terms(terms: tuple[Mapping[str, Any], ...]) -> Callable[[NodeFacts], bool]:
    return lambda node: any(term_matches(t, node) for t in terms)


def _expression_text(expr: Mapping[str, Any]) -> str:
    values = expr.get("values")
    shown = f" [{', '.join(str(v) for v in values)}]" if isinstance(values, list) and values else ""
    return f"{expr.get('key')} {expr.get('operator')}{shown}"


def _affinity_findings(
    spec: Mapping[str, Any], cons: NodeConstraints, offering: list[GroupVerdict], what: str
) -> list[Violation]:
    terms = required_terms(spec)
    if terms is None:
        return []
    if _any_node(offering, cons.label_keys, _matches_terms(terms), cons.uses_fields):
        return []
    if not terms:
        return [Violation(
            message="required node affinity has no non-empty nodeSelectorTerm, so it matches no node: "
            "add a term or drop requiredDuringSchedulingIgnoredDuringExecution",
            path=TERMS_PATH,
        )]
    if len(terms) > 1:
        return [Violation(
            message=f"none of the {len(terms)} required node-affinity terms matches a node offering {what}: "
            "make one term match the GPU nodes' labels",
            path=TERMS_PATH,
        )]
    term = terms[0]
    out = []
    exprs = term.get("matchExpressions")
    for i, expr in enumerate(as_list(exprs)):
        if not isinstance(expr, Mapping):
            continue
        key = str(expr.get("key"))
        if not _any_node(offering, (key,), _matches_terms(({"matchExpressions": [expr]},))):
            out.append(Violation(
                message=f"required node affinity `{_expression_text(expr)}` matches none of the nodes "
                f"offering {what}; they carry {_carried(offering, key)}: match one of those labels",
                path=(*TERMS_PATH, 0, "matchExpressions", i),
            ))
    if not out:
        out.append(Violation(
            message=f"the required node-affinity term matches none of the nodes offering {what} "
            "(each expression alone matches some): make one node satisfy all its expressions",
            path=(*TERMS_PATH, 0),
        ))
    return out


def _selector_findings(
    spec: Mapping[str, Any], cons: NodeConstraints, offering: list[GroupVerdict], what: str
) -> list[Violation]:
    out = []
    own = pod_node_selector(spec)
    rc = cons.runtime_class
    for key in cons.conflicts:
        assert rc is not None
        out.append(Violation(
            message=f"nodeSelector {key}={own[key]} conflicts with RuntimeClass {rc.name!r} "
            f"scheduling.nodeSelector {key}={rc.node_selector[key]}: the API server rejects the pod; "
            "drop the key or use the RuntimeClass's value",
            path=("nodeSelector", key),
        ))
    for key, value in own.items():
        if key in cons.conflicts:
            continue
        if not _any_node(offering, (key,), _label_is(key, value)):
            out.append(Violation(
                message=f"nodeSelector {text(key)}={text(value)} matches none of the nodes offering {what}; "
                f"they carry {_carried(offering, key)}: select one of those labels",
                path=("nodeSelector", key),
            ))
    if rc is not None:
        for key, value in rc.node_selector.items():
            if key in own:
                continue
            if not _any_node(offering, (key,), _label_is(key, value)):
                out.append(Violation(
                    message=f"RuntimeClass {rc.name!r} restricts the pod to nodes labelled {key}={value}, "
                    f"which none of the nodes offering {what} carry ({_carried(offering, key)}): label the "
                    "GPU nodes or use another RuntimeClass",
                    path=("runtimeClassName",),
                ))
    return out


@with_diagnosis
def check(ctx: RuleContext, diagnosis: Diagnosis) -> Iterator[Violation]:
    requests = diagnosis.requests
    if not diagnosis.selector_blocked:
        return
    offering = diagnosis.offering
    what = ", ".join(sorted(requests))
    spec = ctx.pod.spec
    cons = constraints_for(ctx.pod, ctx.facts)
    found = _selector_findings(spec, cons, offering, what) + _affinity_findings(spec, cons, offering, what)
    if not found:
        # Each part matches some offering node, but not the same one.
        own = pod_node_selector(spec)
        path: RelPath = ("nodeSelector",) if own else TERMS_PATH
        groups = "; ".join(v.describe() for v in offering)
        found.append(Violation(
            message=f"{_parts(own, cons, required_terms(spec) is not None)} together match none of the nodes "
            f"offering {what} ({groups}), although each alone matches some: make one node satisfy them all",
            path=path,
        ))
    yield from found


def _parts(own: Mapping[str, Any], cons: NodeConstraints, affinity: bool) -> str:
    """What selects the nodes, for the message: ``nodeSelector a=1, b=2``, the RuntimeClass's
    nodeSelector, the required node affinity."""
    pairs = ", ".join(f"{text(k)}={text(v)}" for k, v in own.items())
    parts = [f"nodeSelector {pairs}"] if own else []
    rc = cons.runtime_class
    if rc is not None and any(k not in own for k in rc.node_selector):
        parts.append(f"RuntimeClass {rc.name!r}'s nodeSelector")
    if affinity:
        parts.append("the required node affinity")
    if parts == [f"nodeSelector {pairs}"]:
        return f"the nodeSelector labels {pairs}"
    return " and ".join(parts)

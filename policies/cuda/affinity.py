"""The fix: a required node affinity that admits only drivers at least a given version.

Node labels hold the driver as separate integers (GPU Feature Discovery), and ``Gt``/``Lt``
compare integers, so ``driver ≥ M.m.r`` becomes up to three ORed terms::

    major > M
    major = M and minor > m
    major = M and minor = m and revision > r-1

(``major = M`` is ``In [M]``; ``minor = m`` is ``Gt m-1`` plus ``Lt m+1`` so a zero-padded value
still compares as a number.)  The terms use the current GFD names
(``nvidia.com/cuda.driver-version.*``); when the cluster has nodes that carry only the deprecated
names (``nvidia.com/cuda.driver.{major,minor,rev}``, written by older GFD releases), every term is
repeated with those names too, so such nodes are not shut out.

Merging: terms of ``requiredDuringSchedulingIgnoredDuringExecution`` are ORed and expressions
ANDed, so each existing ``nodeSelectorTerms`` entry is combined with each driver term (an entry with
neither expressions nor fields matches nothing and is kept as it is).  Missing ``affinity``,
``nodeAffinity`` or the required section is created.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies.facts import LABEL_DRIVER_NEW, LABEL_DRIVER_OLD
from policies.plaincopy import plain_copy
from policies.types import RelOp

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
Expression = dict[str, Any]


def _gt(key: str, value: int) -> Expression:
    return {"key": key, "operator": "Gt", "values": [str(value)]}


def _equals(key: str, value: int) -> list[Expression]:
    return [_gt(key, value - 1), {"key": key, "operator": "Lt", "values": [str(value + 1)]}]


def at_least_terms(minimum: Sequence[int], keys: Sequence[str]) -> list[list[Expression]]:
    """Expression lists (ORed) that match a driver ≥ ``minimum`` under label names ``keys``."""
    major_key, minor_key, rev_key = keys
    major = minimum[0]
    minor = minimum[1] if len(minimum) > 1 else 0
    rev = minimum[2] if len(minimum) > 2 else 0

    def same_major() -> Expression:
        return {"key": major_key, "operator": "In", "values": [str(major)]}

    if minor == 0 and rev == 0:
        return [[_gt(major_key, major - 1)]]
    terms = [[_gt(major_key, major)]]
    if rev == 0:
        terms.append([same_major(), _gt(minor_key, minor - 1)])
    else:
        terms.append([same_major(), _gt(minor_key, minor)])
        terms.append([same_major(), *_equals(minor_key, minor), _gt(rev_key, rev - 1)])
    return terms


def driver_terms(minimum: Sequence[int], include_old_labels: bool) -> list[list[Expression]]:
    terms = at_least_terms(minimum, LABEL_DRIVER_NEW)
    if include_old_labels:
        terms += at_least_terms(minimum, LABEL_DRIVER_OLD)
    return terms


def merged_terms(existing: Sequence[Any], terms: list[list[Expression]]) -> list[Any]:
    out: list[Any] = []
    for term in existing:
        if not isinstance(term, Mapping) or not (term.get("matchExpressions") or term.get("matchFields")):
            out.append(plain_copy(term))
            continue
        for exprs in terms:
            combined = plain_copy(dict(term))
            own = plain_copy(list(term.get("matchExpressions") or ()))
            combined["matchExpressions"] = [*own, *plain_copy(exprs)]
            out.append(combined)
    return out


def affinity_fix(spec: Mapping[str, Any], terms: list[list[Expression]]) -> tuple[RelOp, ...]:
    """RelOps (relative to the pod spec) that AND ``terms`` into the required node affinity.

    Where the ops create the required section, ``terms`` become part of their values as they are
    (each once): pass lists made for the fix, such as ``driver_terms`` returns.
    """
    fresh = {"nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}
    affinity = spec.get("affinity")
    if not isinstance(affinity, Mapping):
        return (RelOp("add", ("affinity",), {"nodeAffinity": {REQUIRED: fresh}}),)
    node_affinity = affinity.get("nodeAffinity")
    if not isinstance(node_affinity, Mapping):
        return (RelOp("add", ("affinity", "nodeAffinity"), {REQUIRED: fresh}),)
    required = node_affinity.get(REQUIRED)
    if not isinstance(required, Mapping):
        return (RelOp("add", ("affinity", "nodeAffinity", REQUIRED), fresh),)
    existing = required.get("nodeSelectorTerms")
    path = ("affinity", "nodeAffinity", REQUIRED, "nodeSelectorTerms")
    if not isinstance(existing, list) or not existing:
        return (RelOp("add", path, fresh["nodeSelectorTerms"]),)
    return (RelOp("replace", path, merged_terms(existing, terms)),)

"""The values a node label can take on the nodes a pool may create, and matching selectors against them.

A node that exists has one value per label (or none).  A node pool that scales up (a Karpenter
NodePool, a declared ``nodePools`` entry) creates nodes whose labels are only constrained: a
requirement ``karpenter.k8s.aws/instance-family In [g5, p4d]`` lets each new node carry either
value.  A selector matches a pool when *some* node it may create satisfies it, which is what
Karpenter checks before it provisions (sigs.k8s.io/karpenter pkg/scheduling/requirements.go
``Compatible``/``Intersects``: requirements on the same key must intersect; a label the NodePool
does not define is compatible only when it is a well-known label whose value the instance type
decides, or when the pod asks for ``NotIn``/``DoesNotExist``).

Expressions on one key are intersected; expressions on different keys are judged independently,
which can only over-estimate what a pool can provide (never invent an error).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_INT_LIMIT = 2**63


def _int(text: str) -> int | None:
    try:
        value = int(text, 10)
    except ValueError:
        return None
    return value if -_INT_LIMIT <= value < _INT_LIMIT and text.strip() == text else None


@dataclass(frozen=True, slots=True)
class LabelDomain:
    """A set of possible values of one label, plus whether the label may be missing.

    ``values`` None means "any value except ``excluded``" (within ``above``/``below`` when those
    numeric bounds are set); a finite ``values`` lists every possible value.
    """

    values: frozenset[str] | None = None
    excluded: frozenset[str] = frozenset()
    may_be_absent: bool = True
    above: int | None = None  # values must be integers > above
    below: int | None = None  # values must be integers < below

    @classmethod
    def exactly(cls, value: str) -> LabelDomain:
        return cls(values=frozenset({value}), may_be_absent=False)

    @classmethod
    def absent(cls) -> LabelDomain:
        return cls(values=frozenset(), may_be_absent=True)

    @classmethod
    def unknown(cls) -> LabelDomain:
        """A label every created node carries, with a value decided at creation (instance type, zone)."""
        return cls()

    def _admits(self, value: str) -> bool:
        if value in self.excluded:
            return False
        if self.above is not None or self.below is not None:
            number = _int(value)
            if number is None:
                return False
            if self.above is not None and number <= self.above:
                return False
            if self.below is not None and number >= self.below:
                return False
        return self.values is None or value in self.values

    @property
    def may_be_present(self) -> bool:
        if self.values is None:
            return self.above is None or self.below is None or self.below - self.above > 1
        return any(self._admits(v) for v in self.values)

    def possible_values(self) -> frozenset[str] | None:
        """The finite set of values a node may carry, or None when open-ended."""
        if self.values is None:
            return None
        return frozenset(v for v in self.values if self._admits(v))

    def narrow(self, operator: Any, values: list[str]) -> LabelDomain | None:
        """The part of this domain a node-selector requirement keeps; None when nothing is left."""
        if operator == "In":
            keep = frozenset(v for v in values if self._admits(v))
            return LabelDomain(values=keep, may_be_absent=False) if keep else None
        if operator == "NotIn":
            narrowed = LabelDomain(self.values, self.excluded | frozenset(values), self.may_be_absent,
                                   self.above, self.below)
            return narrowed if narrowed.may_be_absent or narrowed.may_be_present else None
        if operator == "Exists":
            present = LabelDomain(self.values, self.excluded, False, self.above, self.below)
            return present if present.may_be_present else None
        if operator == "DoesNotExist":
            return LabelDomain.absent() if self.may_be_absent else None
        if operator in ("Gt", "Lt") and len(values) == 1 and (bound := _int(values[0])) is not None:
            above, below = self.above, self.below
            if operator == "Gt":
                above = bound if above is None else max(above, bound)
            else:
                below = bound if below is None else min(below, bound)
            narrowed = LabelDomain(self.values, self.excluded, False, above, below)
            return narrowed if narrowed.may_be_present else None
        return None  # an invalid requirement matches nothing, as upstream

    def describe(self) -> str:
        shown = self.possible_values()
        parts = []
        if shown is not None:
            parts.append("{" + ", ".join(sorted(shown)) + "}" if shown else "no value")
        else:
            bounds = []
            if self.above is not None:
                bounds.append(f"> {self.above}")
            if self.below is not None:
                bounds.append(f"< {self.below}")
            parts.append("any value" + (f" {' and '.join(bounds)}" if bounds else "")
                         + (f" except {', '.join(sorted(self.excluded))}" if self.excluded else ""))
        if self.may_be_absent and (shown is None or shown):
            parts.append("or none")
        return " ".join(parts)


def requirement_values(expr: Mapping[str, Any]) -> list[str] | None:
    raw = expr.get("values")
    if raw is None:
        return []
    return [str(v) for v in raw] if isinstance(raw, list) else None


def domains_from_requirements(requirements: Iterable[Mapping[str, Any]]) -> dict[str, LabelDomain | None]:
    """Intersect node-selector requirements per key (a NodePool's ``requirements``).

    A key whose requirements contradict each other maps to None: the pool can create no node.
    """
    out: dict[str, LabelDomain | None] = {}
    for expr in requirements:
        key = expr.get("key")
        values = requirement_values(expr)
        if not isinstance(key, str) or values is None:
            continue
        current = out.get(key, LabelDomain())
        out[key] = None if current is None else current.narrow(expr.get("operator"), values)
    return out

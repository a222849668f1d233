"""The expression tree the checker, cost estimator and interpreter share.

It follows cel-go's AST (common/ast): literals, identifiers, field selection (with the
``has()`` presence test as a test-only select), calls (operators are calls such as ``_&&_``;
a member call keeps its target), list and map literals, the comprehension macros and
``cel.bind``.  Two deliberate differences: ``&&``/``||`` chains are one n-ary call (cel-go
balances them into a binary tree, which evaluates and costs the same), and the macros keep
their name instead of being expanded into a generic fold.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Value = object


@dataclass(eq=False, slots=True)
class Expr:
    """A node; ``offset`` is the character position in the source (for messages)."""

    id: int
    offset: int


@dataclass(eq=False, slots=True)
class Literal(Expr):
    value: Value
    kind: str  # int, uint, double, string, bytes, bool, null


@dataclass(eq=False, slots=True)
class Ident(Expr):
    name: str


@dataclass(eq=False, slots=True)
class Select(Expr):
    operand: Expr
    field: str
    test_only: bool = False  # has(operand.field)


@dataclass(eq=False, slots=True)
class Call(Expr):
    function: str
    args: list[Expr]
    target: Expr | None = None  # set for member calls: target.function(args)


@dataclass(eq=False, slots=True)
class CreateList(Expr):
    elements: list[Expr]


@dataclass(eq=False, slots=True)
class CreateMap(Expr):
    entries: list[tuple[Expr, Expr]]


@dataclass(eq=False, slots=True)
class Comprehension(Expr):
    """``range.all(var, predicate)`` and friends; ``transform`` is map()'s result expression."""

    macro: str  # all, exists, exists_one, map, filter
    iter_range: Expr
    var: str
    predicate: Expr | None
    transform: Expr | None = None


@dataclass(eq=False, slots=True)
class Bind(Expr):
    """``cel.bind(var, init, body)`` (cel-go ext.Bindings): ``var`` is ``init`` inside ``body``."""

    var: str
    init: Expr
    body: Expr


@dataclass(eq=False, slots=True)
class Unsupported(Expr):
    """Valid Kubernetes CEL that gpuguard does not model (message construction)."""

    what: str
    children: list[Expr] = field(default_factory=list)


def children(node: Expr) -> list[Expr]:
    """Direct sub-expressions, in evaluation order."""
    if isinstance(node, Select):
        return [node.operand]
    if isinstance(node, Call):
        return ([node.target] if node.target is not None else []) + list(node.args)
    if isinstance(node, CreateList):
        return list(node.elements)
    if isinstance(node, CreateMap):
        return [part for entry in node.entries for part in entry]
    if isinstance(node, Comprehension):
        return [e for e in (node.iter_range, node.predicate, node.transform) if e is not None]
    if isinstance(node, Bind):
        return [node.init, node.body]
    if isinstance(node, Unsupported):
        return list(node.children)
    return []


def walk(root: Expr) -> list[Expr]:
    """Every node, parents before children (iterative: trees may be deep)."""
    out: list[Expr] = []
    stack = [root]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(children(node)))
    return out


def depth(root: Expr) -> int:
    """Height of the tree (iterative)."""
    best = 0
    stack = [(root, 1)]
    while stack:
        node, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in children(node))
    return best

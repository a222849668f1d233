"""Evaluation of a checked selector against one device, with cel-go's error and cost semantics.

Errors are values in CEL: ``&&`` is false as soon as one side is false even if the other
side fails, ``||`` likewise with true, ``all``/``exists`` absorb errors the same way
(interpreter/interpretable.go ``evalAnd``/``evalOr``, the folds of parser/macro.go).
Everything else propagates the first error.

The actual cost is tracked the way cel-go's ``CostTracker`` does (interpreter/runtimecost.go
plus Kubernetes' ``CallCost``): 1 per identifier, selection and index, the size-dependent
cost of string and list functions, 10 per list and 30 per map literal; exceeding the limit
cancels evaluation with ``operation cancelled: actual cost limit exceeded``, which no CEL
operator absorbs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from policies.dra.cel import ast
from policies.dra.cel.checker import TYPE_IDENTS, Checked
from policies.dra.cel.library import FUNCTIONS, dispatch
from policies.dra.cel.quantity import Quantity
from policies.dra.cel.semver import Semver
from policies.dra.cel.values import (
    CelEvalError,
    CelMap,
    CostLimitExceeded,
    TypeValue,
    Uint,
    Unsupported,
    cel_equal,
    go_type_name,
    no_such_overload,
    size_of,
)


@dataclass(frozen=True, slots=True)
class DeviceValue:
    """The ``device`` variable (compile.go ``DeviceMatches``)."""

    driver: str
    attributes: CelMap  # domain -> CelMap(id -> value), unknown domains read as an empty map
    capacity: CelMap  # domain -> CelMap(id -> Quantity)
    allow_multiple_allocations: bool = False

    CEL_TYPE = "kubernetes.DRADevice"

    def field(self, name: str) -> object:
        if name == "driver":
            return self.driver
        if name == "attributes":
            return self.attributes
        if name == "capacity":
            return self.capacity
        if name == "allowMultipleAllocations":
            return self.allow_multiple_allocations
        raise CelEvalError(f"no such key: {name}")


def _ceil(x: float) -> int:
    return math.ceil(x)


class Interpreter:
    def __init__(self, checked: Checked, device: DeviceValue, cost_limit: int) -> None:
        self.checked = checked
        self.device = device
        self.limit = cost_limit
        self.cost = 0
        self.scopes: list[dict[str, object]] = []

    def charge(self, amount: int) -> None:
        self.cost += amount
        if self.cost > self.limit:
            raise CostLimitExceeded(self.limit)

    def lookup(self, name: str) -> tuple[bool, object]:
        for scope in reversed(self.scopes):
            if name in scope:
                return True, scope[name]
        return False, None

    # --- evaluation ----------------------------------------------------------------------

    def eval(self, node: ast.Expr) -> object:
        if isinstance(node, ast.Literal):
            return node.value if node.kind != "uint" else _uint(node.value)
        if isinstance(node, ast.Ident):
            self.charge(1)
            found, value = self.lookup(node.name)
            if found:
                return value
            if node.name == "device":
                return self.device
            if node.name in TYPE_IDENTS:
                return TypeValue(node.name)
            raise CelEvalError(f"no such attribute: {node.name}")
        if isinstance(node, ast.Select):
            return self._select(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.CreateList):
            items = tuple(self.eval(e) for e in node.elements)
            self.charge(10)
            return items
        if isinstance(node, ast.CreateMap):
            pairs = [(self.eval(k), self.eval(v)) for k, v in node.entries]
            self.charge(30)
            return CelMap.from_pairs(pairs)
        if isinstance(node, ast.Comprehension):
            return self._comprehension(node)
        if isinstance(node, ast.Bind):
            self.charge(10)
            init = self.eval(node.init)
            self.scopes.append({node.var: init})
            try:
                return self.eval(node.body)
            finally:
                self.scopes.pop()
        if isinstance(node, ast.Unsupported):
            raise Unsupported(node.what)
        raise AssertionError(f"unknown node {node!r}")

    def _select(self, node: ast.Select) -> object:
        operand = self.eval(node.operand)
        if not node.test_only:
            self.charge(1)
        if isinstance(operand, DeviceValue):
            return True if node.test_only else operand.field(node.field)
        if isinstance(operand, CelMap):
            if node.test_only:
                return operand.has(node.field)
            return operand[node.field]
        raise CelEvalError(f"type '{go_type_name(operand)}' does not support field selection")

    def _call(self, node: ast.Call) -> object:
        name = self.checked.qualified.get(node.id, node.function)
        target = None if node.id in self.checked.qualified else node.target
        if name == "_&&_" or name == "_||_":
            return self._logical(node, stop=(name == "_||_"))
        if name == "_?_:_":
            condition = self.eval(node.args[0])
            if not isinstance(condition, bool):
                raise no_such_overload()
            return self.eval(node.args[1] if condition else node.args[2])
        args = ([self.eval(target)] if target is not None else []) + [self.eval(a) for a in node.args]
        result = self._apply(node, name, args)
        self.charge(self._call_cost(name, node, args, result))
        return result

    def _logical(self, node: ast.Call, stop: bool) -> bool:
        error: CelEvalError | None = None
        for term in node.args:
            try:
                value = self.eval(term)
            except CelEvalError as exc:
                error = error or exc
                continue
            if value is stop:
                return stop
            if not isinstance(value, bool):
                error = error or no_such_overload()
        if error is not None:
            raise error
        return not stop

    def _apply(self, node: ast.Call, name: str, args: list[object]) -> object:
        if name == "_==_":
            return cel_equal(args[0], args[1])
        if name == "_!=_":
            return not cel_equal(args[0], args[1])
        if name == "@in":
            return _contains(args[1], args[0])
        if name == "_[_]":
            return _index(args[0], args[1])
        candidates = self.checked.overloads.get(node.id)
        if not candidates:
            declared = FUNCTIONS.get(name)
            if declared is None:
                raise Unsupported(f"{name} is not evaluated by gpuguard")
            member = node.target is not None and node.id not in self.checked.qualified
            candidates = [o for o in declared if o.member == member]
        return dispatch(candidates, args)[1]

    def _call_cost(self, name: str, node: ast.Call, args: list[object], result: object) -> int:
        """runtimecost.go ``costCall`` with Kubernetes' ``CallCost``."""
        sizes = [size_of(a) for a in args]
        if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes"):
            return _traversal(args[0]) if args else 0
        if name in ("lowerAscii", "upperAscii", "substring", "trim"):
            return _ceil(sizes[0] * 0.1)
        if name in ("replace", "split"):
            return _ceil(sizes[0] * 0.2)
        if name == "join":
            return _ceil(size_of(result) * 0.2)
        if name in ("find", "findAll") and len(args) >= 2:
            return _ceil((1 + sizes[0]) * 0.1) * _ceil(sizes[1] * 0.25)
        if name in ("quantity", "isQuantity", "semver", "isSemver"):
            return _ceil(sizes[0] * 0.1)
        if name in ("_==_", "_!=_") and isinstance(args[0], Quantity | Semver):
            return 1
        if name in ("startsWith", "endsWith"):
            return _ceil(sizes[0] * 0.1)
        if name == "@in" and isinstance(args[1], tuple):
            return sizes[1]
        texts = isinstance(args[0], str | bytes) and isinstance(args[1], str | bytes)
        if name in ("_==_", "_!=_") or (name in ("_<_", "_<=_", "_>_", "_>=_") and texts):
            return _ceil(min(sizes[0], sizes[1]) * 0.1)
        if name == "_+_" and isinstance(args[0], str | bytes):
            return _ceil((sizes[0] + sizes[1]) * 0.1)
        if name == "matches" and len(args) == 2:
            if node.target is not None:
                return _ceil((1 + sizes[0]) * 0.1) * _ceil(sizes[1] * 0.25)
            return 1
        if name == "contains" and isinstance(args[0], str):
            return _ceil(sizes[0] * 0.1) * _ceil(sizes[1] * 0.1)
        return 1

    def _comprehension(self, node: ast.Comprehension) -> object:
        iterable = self.eval(node.iter_range)
        if isinstance(iterable, tuple):
            items: list[object] = list(iterable)
        elif isinstance(iterable, CelMap):
            items = list(iterable)
        else:
            raise CelEvalError(f"got '{go_type_name(iterable)}', expected iterable type")
        scope: dict[str, object] = {}
        self.scopes.append(scope)
        try:
            if node.macro in ("all", "exists"):
                return self._quantifier(node, items, scope, want=(node.macro == "exists"))
            if node.macro == "exists_one":
                count = 0
                for item in items:
                    scope[node.var] = item
                    assert node.predicate is not None
                    hit = self.eval(node.predicate)
                    if not isinstance(hit, bool):
                        raise no_such_overload()
                    self.charge(2 if hit else 1)
                    count += hit
                self.charge(2)
                return count == 1
            self.charge(10)  # the accumulator list
            out: list[object] = []
            for item in items:
                scope[node.var] = item
                if node.predicate is not None:
                    keep = self.eval(node.predicate)
                    if not isinstance(keep, bool):
                        raise no_such_overload()
                    if not keep:
                        self.charge(1)
                        continue
                if node.macro == "filter":
                    out.append(item)
                    self.charge(13)
                else:
                    assert node.transform is not None
                    out.append(self.eval(node.transform))
                    self.charge(12)
            self.charge(1)
            return tuple(out)
        finally:
            self.scopes.pop()

    def _quantifier(self, node: ast.Comprehension, items: list[object], scope: dict[str, object], want: bool) -> bool:
        """``all`` (want False: stop at the first false) and ``exists`` (stop at the first true)."""
        error: CelEvalError | None = None
        for item in items:
            self.charge(3 if want else 2)  # loop condition
            scope[node.var] = item
            self.charge(1)  # the accumulator in the step
            assert node.predicate is not None
            try:
                value = self.eval(node.predicate)
            except CelEvalError as exc:
                error = error or exc
                continue
            if value is want:
                self.charge(1)
                return want
            if not isinstance(value, bool):
                error = error or no_such_overload()
        self.charge(1)
        if error is not None:
            raise error
        return not want


def _uint(value: object) -> object:
    assert isinstance(value, int)
    return Uint(value)


def _traversal(value: object) -> int:
    """library/cost.go ``traversalCost``."""
    if isinstance(value, str | bytes):
        return int(len(value) * 0.1)
    if isinstance(value, tuple):
        return sum(_traversal(v) for v in value)
    if isinstance(value, CelMap):
        return sum(_traversal(k) + _traversal(value[k]) for k in value)
    return 1


def _contains(container: object, value: object) -> bool:
    if isinstance(container, tuple):
        error: CelEvalError | None = None
        for item in container:
            try:
                if cel_equal(value, item):
                    return True
            except CelEvalError as exc:
                error = error or exc
        if error is not None:
            raise error
        return False
    if isinstance(container, CelMap):
        return container.has(value)
    raise no_such_overload()


def _index(container: object, index: object) -> object:
    if isinstance(container, tuple):
        if isinstance(index, bool) or not isinstance(index, int):
            if isinstance(index, Uint):
                index = index.value
            elif isinstance(index, float) and index.is_integer():
                index = int(index)
            else:
                raise no_such_overload()
        assert isinstance(index, int)
        if not 0 <= index < len(container):
            raise CelEvalError(f"index out of range: {index}")
        return container[index]
    if isinstance(container, CelMap):
        return container[index]
    raise no_such_overload()


__all__ = ["DeviceValue", "Interpreter"]

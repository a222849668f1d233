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

A :class:`Program` is built once per selector: it resolves each call to its implementation
and cost rule, and folds calls whose arguments are all literals (``quantity("40Gi")``) so a
selector evaluated against thousands of devices parses its constants once.  Folding keeps
the cost: the folded call is still charged on every evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from policies.dra.cel import ast
from policies.dra.cel.checker import TYPE_IDENTS, Checked
from policies.dra.cel.library import FUNCTIONS, Overload, dispatch
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

CostRule = Callable[[Sequence[object], object], int]


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


def _one(args: Sequence[object], result: object) -> int:
    return 1


def _traversal(value: object) -> int:
    """library/cost.go ``traversalCost``."""
    if isinstance(value, str | bytes):
        return int(len(value) * 0.1)
    if isinstance(value, tuple):
        return sum(_traversal(v) for v in value)
    if isinstance(value, CelMap):
        return sum(_traversal(k) + _traversal(value[k]) for k in value)
    return 1


def _texts(args: Sequence[object]) -> bool:
    return len(args) == 2 and isinstance(args[0], str | bytes) and isinstance(args[1], str | bytes)


def _cost_rule(name: str, member: bool) -> CostRule:
    """runtimecost.go ``costCall`` with Kubernetes' ``CallCost`` (library/cost.go)."""
    if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes"):
        return lambda a, r: _traversal(a[0]) if a else 0
    if name in ("lowerAscii", "upperAscii", "substring", "trim", "quantity", "isQuantity", "semver", "isSemver"):
        return lambda a, r: _ceil(size_of(a[0]) * 0.1)
    if name in ("startsWith", "endsWith"):
        return lambda a, r: _ceil(size_of(a[0]) * 0.1)
    if name in ("replace", "split"):
        return lambda a, r: _ceil(size_of(a[0]) * 0.2)
    if name == "join":
        return lambda a, r: _ceil(size_of(r) * 0.2)
    if name in ("find", "findAll"):
        return lambda a, r: _ceil((1 + size_of(a[0])) * 0.1) * _ceil(size_of(a[1]) * 0.25)
    if name in ("_==_", "_!=_"):
        return lambda a, r: 1 if isinstance(a[0], Quantity | Semver) else _ceil(min(size_of(a[0]), size_of(a[1])) * 0.1)
    if name in ("_<_", "_<=_", "_>_", "_>=_"):
        return lambda a, r: _ceil(min(size_of(a[0]), size_of(a[1])) * 0.1) if _texts(a) else 1
    if name == "@in":
        return lambda a, r: size_of(a[1]) if isinstance(a[1], tuple) else 1
    if name == "_+_":
        return lambda a, r: _ceil((size_of(a[0]) + size_of(a[1])) * 0.1) if _texts(a) else 1
    if name == "matches" and member:
        return lambda a, r: _ceil((1 + size_of(a[0])) * 0.1) * _ceil(size_of(a[1]) * 0.25)
    if name == "contains":
        return lambda a, r: _ceil(size_of(a[0]) * 0.1) * _ceil(size_of(a[1]) * 0.1) if _texts(a) else 1
    return _one


@dataclass(frozen=True, slots=True)
class _Plan:
    name: str
    target: ast.Expr | None
    candidates: tuple[Overload, ...]
    static: Overload | None  # exactly one overload and no dyn argument: no runtime dispatch
    cost: CostRule
    constant: tuple[bool, object, int] | None = None  # (is_error, value or message, cost)


class Program:
    """A checked selector prepared for repeated evaluation."""

    def __init__(self, root: ast.Expr, checked: Checked) -> None:
        self.root = root
        self.checked = checked
        self.plans: dict[int, _Plan] = {}
        for node in ast.walk(root):
            if isinstance(node, ast.Call):
                self.plans[node.id] = self._plan(node)

    def _plan(self, node: ast.Call) -> _Plan:
        qualified = node.id in self.checked.qualified
        name = self.checked.qualified.get(node.id, node.function)
        target = None if qualified else node.target
        candidates = tuple(self.checked.overloads.get(node.id, ()))
        if not candidates and name in FUNCTIONS:
            candidates = tuple(o for o in FUNCTIONS[name] if o.member == (target is not None))
        arg_nodes = ([target] if target is not None else []) + list(node.args)
        concrete = all(self.checked.types.get(a.id, _DYN).kind not in ("dyn", "param", "error") for a in arg_nodes)
        static = candidates[0] if len(candidates) == 1 and candidates[0].impl is not None and concrete else None
        plan = _Plan(name, target, candidates, static, _cost_rule(name, target is not None))
        if static is not None and all(isinstance(a, ast.Literal) for a in arg_nodes) and name != "dyn":
            args = [_literal(a) for a in arg_nodes]  # type: ignore[arg-type]
            assert static.impl is not None
            try:
                value = static.impl(*args)
            except CelEvalError as exc:
                return _Plan(name, target, candidates, static, plan.cost, (True, exc.message, 1))
            except Unsupported:
                return plan
            return _Plan(name, target, candidates, static, plan.cost, (False, value, plan.cost(args, value)))
        return plan


_DYN = TYPE_IDENTS["dyn"]


def _literal(node: ast.Literal) -> object:
    return Uint(node.value) if node.kind == "uint" else node.value  # type: ignore[arg-type]


class Interpreter:
    def __init__(self, program: Program, device: DeviceValue, cost_limit: int) -> None:
        self.program = program
        self.plans = program.plans
        self.device = device
        self.limit = cost_limit
        self.cost = 0
        self.scopes: list[dict[str, object]] = []

    def charge(self, amount: int) -> None:
        self.cost += amount
        if self.cost > self.limit:
            raise CostLimitExceeded(self.limit)

    def eval(self, node: ast.Expr) -> object:
        return _HANDLERS[type(node)](self, node)

    # --- nodes ---------------------------------------------------------------------------

    def _literal(self, node: ast.Literal) -> object:
        return _literal(node)

    def _ident(self, node: ast.Ident) -> object:
        self.charge(1)
        for scope in reversed(self.scopes):
            if node.name in scope:
                return scope[node.name]
        if node.name == "device":
            return self.device
        if node.name in TYPE_IDENTS:
            return TypeValue(node.name)
        raise CelEvalError(f"no such attribute: {node.name}")

    def _select(self, node: ast.Select) -> object:
        operand = self.eval(node.operand)
        if not node.test_only:
            self.charge(1)
        if isinstance(operand, CelMap):
            return operand.has(node.field) if node.test_only else operand[node.field]
        if isinstance(operand, DeviceValue):
            return True if node.test_only else operand.field(node.field)
        raise CelEvalError(f"type '{go_type_name(operand)}' does not support field selection")

    def _list(self, node: ast.CreateList) -> object:
        items = tuple([_HANDLERS[type(e)](self, e) for e in node.elements])
        self.charge(10)
        return items

    def _map(self, node: ast.CreateMap) -> object:
        pairs = [(self.eval(k), self.eval(v)) for k, v in node.entries]
        self.charge(30)
        return CelMap.from_pairs(pairs)

    def _bind(self, node: ast.Bind) -> object:
        self.charge(10)  # the empty range of the fold cel.bind expands to
        init = self.eval(node.init)
        self.scopes.append({node.var: init})
        try:
            return self.eval(node.body)
        finally:
            self.scopes.pop()

    def _unsupported(self, node: ast.Unsupported) -> object:
        raise Unsupported(node.what)

    def _call(self, node: ast.Call) -> object:
        plan = self.plans[node.id]
        if plan.constant is not None:
            is_error, value, cost = plan.constant
            self.charge(cost)
            if is_error:
                raise CelEvalError(str(value))
            return value
        name = plan.name
        if name == "_&&_":
            return self._logical(node, False)
        if name == "_||_":
            return self._logical(node, True)
        if name == "_?_:_":
            condition = self.eval(node.args[0])
            if not isinstance(condition, bool):
                raise no_such_overload()
            return self.eval(node.args[1] if condition else node.args[2])
        args = [self.eval(plan.target)] if plan.target is not None else []
        for arg in node.args:  # a loop, not a generator: one frame less per nesting level
            args.append(_HANDLERS[type(arg)](self, arg))
        if plan.static is not None:
            assert plan.static.impl is not None
            result = plan.static.impl(*args)
        elif name == "_==_":
            result = cel_equal(args[0], args[1])
        elif name == "_!=_":
            result = not cel_equal(args[0], args[1])
        elif name == "@in":
            result = _contains(args[1], args[0])
        elif name == "_[_]":
            result = _index(args[0], args[1])
        elif not plan.candidates:
            raise Unsupported(f"{name} is not evaluated by gpuguard")
        else:
            result = dispatch(plan.candidates, args)[1]
        self.charge(plan.cost(args, result))
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
                return self._exists_one(node, items, scope)
            return self._collect(node, items, scope)
        finally:
            self.scopes.pop()

    def _quantifier(self, node: ast.Comprehension, items: list[object], scope: dict[str, object], want: bool) -> bool:
        """``all`` (stop at the first false) and ``exists`` (stop at the first true)."""
        assert node.predicate is not None
        error: CelEvalError | None = None
        for item in items:
            self.charge(4 if want else 3)  # loop condition and the accumulator in the step
            scope[node.var] = item
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

    def _exists_one(self, node: ast.Comprehension, items: list[object], scope: dict[str, object]) -> bool:
        assert node.predicate is not None
        count = 0
        for item in items:
            scope[node.var] = item
            hit = self.eval(node.predicate)
            if not isinstance(hit, bool):
                raise no_such_overload()
            self.charge(2 if hit else 1)
            count += hit
        self.charge(2)
        return count == 1

    def _collect(self, node: ast.Comprehension, items: list[object], scope: dict[str, object]) -> tuple[object, ...]:
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


_HANDLERS: dict[type, Callable[[Interpreter, ast.Expr], object]] = {
    ast.Literal: Interpreter._literal,  # type: ignore[dict-item]
    ast.Ident: Interpreter._ident,  # type: ignore[dict-item]
    ast.Select: Interpreter._select,  # type: ignore[dict-item]
    ast.Call: Interpreter._call,  # type: ignore[dict-item]
    ast.CreateList: Interpreter._list,  # type: ignore[dict-item]
    ast.CreateMap: Interpreter._map,  # type: ignore[dict-item]
    ast.Comprehension: Interpreter._comprehension,  # type: ignore[dict-item]
    ast.Bind: Interpreter._bind,  # type: ignore[dict-item]
    ast.Unsupported: Interpreter._unsupported,  # type: ignore[dict-item]
}


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
        if isinstance(index, Uint):
            index = index.value
        elif isinstance(index, float) and index.is_integer():
            index = int(index)
        if isinstance(index, bool) or not isinstance(index, int):
            raise no_such_overload()
        if not 0 <= index < len(container):
            raise CelEvalError(f"index out of range: {index}")
        return container[index]
    if isinstance(container, CelMap):
        return container[index]
    raise no_such_overload()


__all__ = ["DeviceValue", "Interpreter", "Program"]

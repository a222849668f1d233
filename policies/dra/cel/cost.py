"""Worst-case cost estimation, ported from cel-go and Kubernetes.

The API server rejects a selector whose estimated cost exceeds 1,000,000 (``Forbidden: too
complex, exceeds cost limit``; resourceapi.CELSelectorExpressionMaxCost).  The estimate is
cel-go's ``checker.Cost`` (checker/cost.go @ 14f6746a) with Kubernetes' library estimator
(k8s.io/apiserver pkg/cel/library/cost.go) and DRA's size estimator and ``includes`` rule
(k8s.io/dynamic-resource-allocation cel/compile.go).  Macros are costed as the
comprehensions cel-go's parser expands them into (parser/macro.go): for example
``r.all(x, p)`` is a fold with condition ``@not_strictly_false(accu)`` (cost 2) and step
``accu && p``.  Presence tests cost nothing (Kubernetes sets ``PresenceTestHasCost(false)``).

Only the constructs the checker accepts are costed; calls gpuguard does not evaluate cost 0,
as cel-go's estimator does for calls without overloads, and make the compile result
parity-uncertain anyway.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from policies.dra.cel import ast
from policies.dra.cel import types as t
from policies.dra.cel.checker import Checked
from policies.dra.cel.library import Overload

U64 = 2**64 - 1
STRING_TRAVERSAL = 0.1  # common.StringTraversalCostFactor
REGEX_LENGTH = 0.25  # common.RegexStringLengthCostFactor
LIST_CREATE = 10
MAP_CREATE = 30


def _add(a: int, b: int) -> int:
    return min(a + b, U64)


def _mul(a: int, b: int) -> int:
    return min(a * b, U64)


def _factor(x: int, f: float) -> int:
    if x >= U64:
        return U64
    return min(math.ceil(x * f), U64)


@dataclass(frozen=True, slots=True)
class Range:
    """A [min, max] cost or size estimate with cel-go's saturating arithmetic."""

    min: int
    max: int

    def __add__(self, other: Range) -> Range:
        return Range(_add(self.min, other.min), _add(self.max, other.max))

    def times(self, other: Range) -> Range:
        return Range(_mul(self.min, other.min), _mul(self.max, other.max))

    def factor(self, f: float) -> Range:
        return Range(_factor(self.min, f), _factor(self.max, f))

    def union(self, other: Range) -> Range:
        return Range(min(self.min, other.min), max(self.max, other.max))


ZERO = Range(0, 0)
ONE = Range(1, 1)
UNKNOWN = Range(0, U64)


@dataclass(frozen=True, slots=True)
class Entry:
    """Element sizes of a list or map literal (cel-go ``entrySizeEstimate``)."""

    container: str  # list or map
    key: Range
    val: Range


@dataclass(slots=True)
class _Local:
    path: tuple[str, ...] | None
    size: Range | None
    entry: Entry | None


class _Coster:
    def __init__(self, checked: Checked) -> None:
        self.checked = checked
        self.paths: dict[int, tuple[str, ...]] = {}
        self.sizes: dict[int, Range] = {}
        self.entries: dict[int, Entry] = {}
        self.locals: dict[str, list[_Local]] = {}

    # --- bookkeeping ---------------------------------------------------------------------

    def type_of(self, node: ast.Expr) -> t.CelType:
        return self.checked.types.get(node.id, t.DYN)

    def local(self, name: str) -> _Local | None:
        stack = self.locals.get(name)
        return stack[-1] if stack else None

    def push(self, name: str, local: _Local) -> None:
        self.locals.setdefault(name, []).append(local)

    def pop(self, name: str) -> None:
        self.locals[name].pop()

    def path(self, node: ast.Expr) -> tuple[str, ...] | None:
        if isinstance(node, ast.Ident):
            found = self.local(node.name)
            if found is not None:
                return found.path
        return self.paths.get(node.id)

    def size(self, node: ast.Expr) -> Range | None:
        """cel-go ``computeSize``."""
        if node.id in self.sizes:
            return self.sizes[node.id]
        literal = _literal_size(node)
        if literal is not None:
            return literal
        path = self.path(node)
        if path is not None:
            bound = t.size_of_path(path)
            if bound is not None:
                self.sizes[node.id] = Range(0, bound)
                return self.sizes[node.id]
        if self.type_of(node).kind in t.SCALARS:
            return ONE
        if isinstance(node, ast.Ident):
            found = self.local(node.name)
            if found is not None and found.size is not None:
                return found.size
        return None

    def size_or_unknown(self, node: ast.Expr) -> Range:
        found = self.size(node)
        return UNKNOWN if found is None else found

    def entry(self, node: ast.Expr) -> Entry | None:
        if node.id in self.entries:
            return self.entries[node.id]
        if isinstance(node, ast.Ident):
            found = self.local(node.name)
            if found is not None:
                return found.entry
        return None

    # --- costs ---------------------------------------------------------------------------

    def cost(self, node: ast.Expr) -> Range:
        if isinstance(node, ast.Literal):
            return ZERO
        if isinstance(node, ast.Ident):
            found = self.local(node.name)
            self.paths[node.id] = found.path if found is not None and found.path is not None else (node.name,)
            return ONE
        if isinstance(node, ast.Select):
            return self._select(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.CreateList):
            total = ZERO
            item = Range(U64, 0) if node.elements else ZERO
            for element in node.elements:
                total = total + self.cost(element)
                item = item.union(self.size_or_unknown(element))
            self.entries[node.id] = Entry("list", ONE, item)
            return total + Range(LIST_CREATE, LIST_CREATE)
        if isinstance(node, ast.CreateMap):
            total = ZERO
            keys = Range(U64, 0) if node.entries else ZERO
            vals = Range(U64, 0) if node.entries else ZERO
            for key, value in node.entries:
                total = total + self.cost(key) + self.cost(value)
                keys = keys.union(self.size_or_unknown(key))
                vals = vals.union(self.size_or_unknown(value))
            self.entries[node.id] = Entry("map", keys, vals)
            return total + Range(MAP_CREATE, MAP_CREATE)
        if isinstance(node, ast.Comprehension):
            return self._comprehension(node)
        if isinstance(node, ast.Bind):
            total = Range(LIST_CREATE, LIST_CREATE) + self.cost(node.init)  # the empty range list
            self.push(node.var, _Local(self.path(node.init), self.size(node.init), self.entry(node.init)))
            total = total + self.cost(node.body)
            self.pop(node.var)
            size = self.size(node.body)
            if size is not None:
                self.sizes[node.id] = size
            return total
        return ZERO  # Unsupported: not evaluated, the result is parity-uncertain

    def _select(self, node: ast.Select) -> Range:
        total = self.cost(node.operand)
        if node.test_only:
            return total  # PresenceTestHasCost(false)
        if self.type_of(node.operand).kind in ("map", "object", "param"):
            total = total + ONE
        base = self.path(node.operand)
        if base is not None:
            self.paths[node.id] = (*base, node.field)
        return total

    def _call(self, node: ast.Call) -> Range:
        if node.function == "dyn" and node.target is None and len(node.args) == 1:
            arg = node.args[0]
            total = ONE + self.cost(arg)
            size = self.size(arg)
            if size is not None:
                self.sizes[node.id] = size
            entry = self.entry(arg)
            if entry is not None:
                self.entries[node.id] = entry
            return total
        target = None if node.id in self.checked.qualified else node.target
        arg_costs = [self.cost(a) for a in node.args]
        candidates = self.checked.overloads.get(node.id, [])
        if not candidates:
            if target is not None:
                self.cost(target)
            return ZERO
        total = self.cost(target) if target is not None else ZERO
        fn_cost = Range(U64, 0)
        result_size: Range | None = None
        for overload in candidates:
            cost, size = self._function(node, overload, target, arg_costs)
            fn_cost = fn_cost.union(cost)
            if size is not None:
                result_size = size if result_size is None else result_size.union(size)
            if overload.id in ("index_list", "index_map") and node.args:
                container = node.args[0]
                entry = self.entry(container)
                if entry is not None:
                    result_size = entry.val
                base = self.path(container)
                if base is not None:
                    self.paths[node.id] = (*base, "@items" if overload.id == "index_list" else "@values")
            if result_size is None:
                result_size = self.size(node)
        if result_size is not None:
            self.sizes[node.id] = result_size
        return total + fn_cost

    def _function(
        self, node: ast.Call, overload: Overload, target: ast.Expr | None, arg_costs: list[Range]
    ) -> tuple[Range, Range | None]:
        args = node.args
        arg_sum = ZERO
        for c in arg_costs:
            arg_sum = arg_sum + c
        k8s = self._kubernetes(node, overload, target)
        if k8s is not None:
            return k8s[0] + arg_sum, k8s[1]
        oid = overload.id
        if oid in ("starts_with_string", "ends_with_string") and len(args) == 1:
            return self.size_or_unknown(args[0]).factor(STRING_TRAVERSAL) + arg_sum, None
        if oid in ("string_to_bytes", "bytes_to_string") and len(args) == 1:
            size = self.size_or_unknown(args[0])
            bound = Range(size.min, _mul(size.max, 4)) if oid == "string_to_bytes" else Range(size.min // 4, size.max)
            return size.factor(STRING_TRAVERSAL) + arg_sum, bound
        if oid == "in_list" and len(args) == 2:
            return self.size_or_unknown(args[1]).factor(1) + arg_sum, None
        if oid == "matches_string" and target is not None and len(args) == 1:
            text = (self.size_or_unknown(target) + ONE).factor(STRING_TRAVERSAL)
            regex = self.size_or_unknown(args[0]).factor(REGEX_LENGTH)
            return text.times(regex) + arg_sum, None
        if oid == "contains_string" and target is not None and len(args) == 1:
            text = self.size_or_unknown(target).factor(STRING_TRAVERSAL)
            sub = self.size_or_unknown(args[0]).factor(STRING_TRAVERSAL)
            return text.times(sub) + arg_sum, None
        if oid in ("logical_and", "logical_or"):
            total = ZERO
            for c in arg_costs:
                total = total + c
            return Range(arg_costs[0].min, total.max), None
        if oid == "conditional":
            size = self.size_or_unknown(args[1]).union(self.size_or_unknown(args[2]))
            left, right = self.entry(args[1]), self.entry(args[2])
            if left is not None and right is not None:
                self.entries[node.id] = Entry(left.container, left.key.union(right.key), left.val.union(right.val))
            return arg_costs[0] + arg_costs[1].union(arg_costs[2]), size
        if oid in ("add_string", "add_bytes", "add_list") and len(args) == 2:
            size = self.size_or_unknown(args[0]) + self.size_or_unknown(args[1])
            left, right = self.entry(args[0]), self.entry(args[1])
            if left is not None and right is not None:
                self.entries[node.id] = Entry(left.container, left.key.union(right.key), left.val.union(right.val))
            if oid == "add_list":
                return ONE + arg_sum, size
            return size.factor(STRING_TRAVERSAL) + arg_sum, size
        ordered_text = oid.startswith(("less_", "greater_")) and oid.endswith(("_string", "_bytes"))
        if ordered_text or oid in ("equals", "not_equals"):
            lhs, rhs = self.size_or_unknown(args[0]), self.size_or_unknown(args[1])
            smallest = min(lhs.max, rhs.max)
            return Range(1 if smallest > 0 else 0, smallest).factor(STRING_TRAVERSAL) + arg_sum, None
        return ONE + arg_sum, None

    def _kubernetes(
        self, node: ast.Call, overload: Overload, target: ast.Expr | None
    ) -> tuple[Range, Range | None] | None:
        """k8s.io/apiserver library ``CostEstimator.EstimateCallCost`` (and DRA's ``includes``)."""
        name, args = overload.function, node.args
        if name == "includes" and target is not None:
            return Range(0, t.LIST_ATTRIBUTE_VALUES_MAX), None
        if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf") and target is not None:
            target_type = self.type_of(target)
            if target_type.kind == "list":
                element_cost = ONE
                element = target_type.params[0]
                if element.kind in ("string", "bytes"):
                    base = self.path(target)
                    bound = t.size_of_path((*base, "@items")) if base is not None else None
                    element_size = Range(0, bound) if bound is not None else UNKNOWN
                    element_cost = element_cost + element_size.factor(STRING_TRAVERSAL)
                return self.size_or_unknown(target).times(element_cost), None
            return self.size_or_unknown(target).factor(STRING_TRAVERSAL), None
        if name in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            size = self.size_or_unknown(target)
            return size.factor(STRING_TRAVERSAL), size
        if name == "replace" and target is not None and len(args) >= 2:
            return self._replace(target, args)
        if name == "split" and target is not None:
            size = self.size_or_unknown(target)
            limit = size.max
            if len(args) > 1 and isinstance(args[1], ast.Literal) and args[1].kind == "int":
                value = args[1].value
                assert isinstance(value, int)
                limit = value % 2**64
            return size.factor(2 * STRING_TRAVERSAL), Range(0, limit)
        if name == "join" and target is not None:
            return self._join(target, args)
        if name in ("find", "findAll") and target is not None and args:
            size = self.size_or_unknown(target)
            text = (size + ONE).factor(STRING_TRAVERSAL)
            regex = self.size_or_unknown(args[0]).factor(REGEX_LENGTH)
            return text.times(regex), Range(0, size.max)
        if name in ("quantity", "isQuantity", "semver", "isSemver") and args:
            return self.size_or_unknown(args[0]).factor(STRING_TRAVERSAL), None
        if name in (
            "sign",
            "asInteger",
            "isInteger",
            "asApproximateFloat",
            "isGreaterThan",
            "isLessThan",
            "compareTo",
            "add",
            "sub",
            "major",
            "minor",
            "patch",
        ):
            return ONE, None
        if name == "_==_" and len(args) == 2:
            lhs, rhs = self.type_of(args[0]), self.type_of(args[1])
            if lhs == rhs and lhs in (t.QUANTITY, t.SEMVER):
                return ONE, None
        return None

    def _replace(self, target: ast.Expr, args: list[ast.Expr]) -> tuple[Range, Range | None]:
        size = self.size_or_unknown(target)
        old, new = self.size_or_unknown(args[0]), self.size_or_unknown(args[1])
        count_min = count_max = retained_min = retained_max = 0
        if old.min == 0:
            count_max = size.max + 1 if size.max < U64 else size.max
            retained_max = size.max
        elif new.max <= old.min:
            retained_max = size.max
        else:
            count_max = math.ceil(size.max / old.min)
        if old.max == 0:
            count_min = size.min + 1 if size.min < U64 else size.min
            retained_min = size.min
        elif old.max <= new.min:
            retained_min = size.min
        else:
            count_min = math.ceil(size.min / old.max)
        result = Range(count_min, count_max).times(new) + Range(retained_min, retained_max)
        return size.factor(2 * STRING_TRAVERSAL), result

    def _join(self, target: ast.Expr, args: list[ast.Expr]) -> tuple[Range, Range | None]:
        count = self.size_or_unknown(target)
        result = ZERO
        target_type = self.type_of(target)
        if target_type.kind == "list":
            base = self.path(target)
            bound = t.size_of_path((*base, "@items")) if base is not None else None
            element = Range(0, bound) if bound is not None else UNKNOWN
            result = count.times(element)
        if args:
            separator = self.size_or_unknown(args[0])
            result = result + separator.times(Range(max(count.min - 1, 0), max(count.max - 1, 0)))
        return result.factor(STRING_TRAVERSAL), result

    def _comprehension(self, node: ast.Comprehension) -> Range:
        total = self.cost(node.iter_range)
        accu_init = Range(LIST_CREATE, LIST_CREATE) if node.macro in ("map", "filter") else ZERO
        total = total + accu_init
        entry = self.entry(node.iter_range)
        container = entry.container if entry is not None else self.type_of(node.iter_range).kind
        base = self.path(node.iter_range)
        if container == "list":
            var_size, sub = (entry.val if entry is not None else None), "@items"
        else:
            var_size, sub = (entry.key if entry is not None else None), "@keys"
        self.push(node.var, _Local((*base, sub) if base is not None else None, var_size, None))
        predicate = self.cost(node.predicate) if node.predicate is not None else ZERO
        transform = self.cost(node.transform) if node.transform is not None else ZERO
        self.pop(node.var)
        if node.macro == "all":  # cond @not_strictly_false(accu); step accu && p; result accu
            loop, step, result = Range(2, 2), Range(1, _add(1, predicate.max)), ONE
        elif node.macro == "exists":  # cond @not_strictly_false(!accu); step accu || p
            loop, step, result = Range(3, 3), Range(1, _add(1, predicate.max)), ONE
        elif node.macro == "exists_one":  # step p ? accu + 1 : accu; result accu == 1
            loop, step, result = ZERO, predicate + Range(1, 2), Range(2, 2)
        elif node.macro == "filter":  # step p ? accu + [x] : accu
            loop, step, result = ZERO, predicate + Range(1, 13), ONE
        elif node.predicate is not None:  # map with filter: p ? accu + [f] : accu
            loop, step, result = ZERO, predicate + Range(1, _add(transform.max, 12)), ONE
        else:  # map: accu + [f]
            loop, step, result = ZERO, transform + Range(12, 12), ONE
        count = self.size_or_unknown(node.iter_range)
        total = total + result + count.times(step + loop)
        if node.macro in ("map", "filter"):
            self.sizes[node.id] = count
        return total


def _literal_size(node: ast.Expr) -> Range | None:
    if isinstance(node, ast.Literal):
        if isinstance(node.value, str | bytes):
            return Range(len(node.value), len(node.value))
        return ONE
    if isinstance(node, ast.CreateList):
        return Range(len(node.elements), len(node.elements))
    if isinstance(node, ast.CreateMap):
        return Range(len(node.entries), len(node.entries))
    return None


def estimate(root: ast.Expr, checked: Checked) -> Range:
    """The [min, max] cost of ``root`` (max saturates at 2^64-1)."""
    return _Coster(checked).cost(root)

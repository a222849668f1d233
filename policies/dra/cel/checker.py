"""Static type checking, as cel-go's checker (checker/checker.go) does it for the DRA environment.

cel-python has no checker; Kubernetes relies on cel-go's to reject selectors at admission
(``compilation failed: ERROR: <input>:1:8: undeclared reference to 'x' (in container '')``)
and to compute the output type that must be ``bool`` (or the unknown type).  This module
implements the parts of it a DRA selector can reach: declared variables (``device`` and macro
or ``cel.bind`` variables), field selection on the device object and on maps, overload
resolution with type parameters (``dyn`` matches everything), homogeneous list and map
literals (Kubernetes enables ``cel.HomogeneousAggregateLiterals``), comprehension ranges and
regular-expression literals (``cel.ValidateRegexLiterals``, Kubernetes 1.29+).

Messages use cel-go's wording from checker/errors.go.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policies.dra.cel import ast
from policies.dra.cel import types as t
from policies.dra.cel.library import FUNCTIONS, QUALIFIED_PREFIXES, UNEVALUATED, Overload, compile_regex
from policies.dra.cel.values import CelEvalError

TYPE_IDENTS = {
    "bool": t.BOOL,
    "int": t.INT,
    "uint": t.UINT,
    "double": t.DOUBLE,
    "string": t.STRING,
    "bytes": t.BYTES,
    "list": t.list_of(t.DYN),
    "map": t.map_of(t.DYN, t.DYN),
    "null_type": t.NULL,
    "type": t.type_of(t.DYN),
    "dyn": t.DYN,
}
_REGEX_FUNCTIONS = frozenset({"matches", "find", "findAll"})


@dataclass(frozen=True, slots=True)
class TypeIssue:
    message: str
    offset: int


@dataclass(frozen=True, slots=True)
class Features:
    """Feature gates that change the DRA CEL environment for new expressions.

    Defaults are Kubernetes 1.36's: DRAConsumableCapacity is beta and on (adds
    ``device.allowMultipleAllocations``), DRAListTypeAttributes is alpha and off (``includes``
    is undeclared).  Findings that depend on either are marked parity-uncertain anyway.
    """

    consumable_capacity: bool = True
    list_type_attributes: bool = False


@dataclass(slots=True)
class Checked:
    types: dict[int, t.CelType] = field(default_factory=dict)
    overloads: dict[int, list[Overload]] = field(default_factory=dict)
    qualified: dict[int, str] = field(default_factory=dict)
    issues: list[TypeIssue] = field(default_factory=list)
    unevaluated: list[str] = field(default_factory=list)
    gates: list[str] = field(default_factory=list)


class _Checker:
    def __init__(self, features: Features) -> None:
        self.features = features
        self.out = Checked()
        self.scopes: list[dict[str, t.CelType]] = []

    # --- helpers -------------------------------------------------------------------------

    def error(self, node: ast.Expr, message: str) -> t.CelType:
        self.out.issues.append(TypeIssue(message, node.offset))
        return t.ERROR

    def lookup(self, name: str) -> t.CelType | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def note(self, what: str) -> None:
        if what not in self.out.unevaluated:
            self.out.unevaluated.append(what)

    def gate(self, what: str) -> None:
        if what not in self.out.gates:
            self.out.gates.append(what)

    # --- dispatch ------------------------------------------------------------------------

    def check(self, node: ast.Expr) -> t.CelType:
        result = self._check(node)
        self.out.types[node.id] = result
        return result

    def _check(self, node: ast.Expr) -> t.CelType:
        if isinstance(node, ast.Literal):
            return {
                "int": t.INT,
                "uint": t.UINT,
                "double": t.DOUBLE,
                "string": t.STRING,
                "bytes": t.BYTES,
                "bool": t.BOOL,
                "null": t.NULL,
            }[node.kind]
        if isinstance(node, ast.Ident):
            return self._ident(node)
        if isinstance(node, ast.Select):
            return self._select(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.CreateList):
            return t.list_of(self._homogeneous(node, [self.check(e) for e in node.elements], node.elements))
        if isinstance(node, ast.CreateMap):
            keys = [self.check(k) for k, _ in node.entries]
            values = [self.check(v) for _, v in node.entries]
            key_type = self._homogeneous(node, keys, [k for k, _ in node.entries])
            value_type = self._homogeneous(node, values, [v for _, v in node.entries])
            return t.map_of(key_type, value_type)
        if isinstance(node, ast.Comprehension):
            return self._comprehension(node)
        if isinstance(node, ast.Bind):
            init = self.check(node.init)
            self.scopes.append({node.var: init})
            try:
                return self.check(node.body)
            finally:
                self.scopes.pop()
        if isinstance(node, ast.Unsupported):
            self.note(node.what)
            return t.DYN
        raise AssertionError(f"unknown node {node!r}")

    def _ident(self, node: ast.Ident) -> t.CelType:
        local = self.lookup(node.name)
        if local is not None:
            return local
        if node.name == "device":
            return t.DEVICE
        if node.name in TYPE_IDENTS:
            return t.type_of(TYPE_IDENTS[node.name])
        return self.error(node, f"undeclared reference to '{node.name}' (in container '')")

    def _select(self, node: ast.Select) -> t.CelType:
        operand = self.check(node.operand)
        result = self._field_type(node, operand)
        return t.BOOL if node.test_only and result.kind != "error" else result

    def _field_type(self, node: ast.Select, operand: t.CelType) -> t.CelType:
        if operand.kind in ("dyn", "error"):
            return t.DYN if operand.is_dyn else t.ERROR
        if operand == t.DEVICE:
            declared = t.DEVICE_FIELDS.get(node.field)
            gate = t.GATED_DEVICE_FIELDS.get(node.field)
            if declared is None or (gate == "DRAConsumableCapacity" and not self.features.consumable_capacity):
                return self.error(node, f"undefined field '{node.field}'")
            if gate:
                self.gate(gate)
            return declared
        if operand.kind == "map":
            key = operand.params[0]
            if key.kind not in ("string", "dyn", "param"):
                return self.error(node, f"type '{operand}' does not support field selection")
            return operand.params[1]
        return self.error(node, f"type '{operand}' does not support field selection")

    def _homogeneous(self, node: ast.Expr, found: list[t.CelType], exprs: list[ast.Expr]) -> t.CelType:
        chosen: t.CelType | None = None
        for elem_type, expr in zip(found, exprs, strict=True):
            if elem_type.kind in ("dyn", "error"):
                continue
            if chosen is None:
                chosen = elem_type
            elif not _assignable(chosen, elem_type, {}):
                self.error(expr, f"expected type '{chosen}' but found '{elem_type}'")
        return chosen if chosen is not None else t.DYN

    # --- calls ---------------------------------------------------------------------------

    def _call(self, node: ast.Call) -> t.CelType:
        name, target = node.function, node.target
        if isinstance(target, ast.Ident) and self.lookup(target.name) is None and target.name != "device":
            qualified = f"{target.name}.{name}"
            if qualified in FUNCTIONS or qualified in UNEVALUATED or target.name in QUALIFIED_PREFIXES:
                self.out.qualified[node.id] = qualified
                name, target = qualified, None
        arg_types = [self.check(a) for a in node.args]
        target_type = self.check(target) if target is not None else None

        if name in ("_&&_", "_||_"):
            return self._logical(node, name, arg_types)

        declared = FUNCTIONS.get(name)
        if declared is None:
            if name in UNEVALUATED or name.split(".")[0] in QUALIFIED_PREFIXES:
                self.note(f"{UNEVALUATED.get(name, 'the ' + name.split('.')[0] + ' library')} ({name})")
                return t.DYN
            return self.error(node, f"undeclared reference to '{name}' (in container '')")

        member = target is not None
        all_args = ([target_type] if target_type is not None else []) + arg_types
        if any(a.kind == "error" for a in all_args):
            return t.ERROR
        candidates: list[Overload] = []
        results: list[t.CelType] = []
        for overload in declared:
            if overload.member != member or len(overload.params) != len(all_args):
                continue
            subst: dict[str, t.CelType] = {}
            if all(_assignable(p, a, subst) for p, a in zip(overload.params, all_args, strict=True)):
                candidates.append(overload)
                results.append(_substitute(overload.result, subst))
        if not candidates:
            if name in UNEVALUATED:  # e.g. indexOf on something only ext.Lists declares
                self.note(f"{UNEVALUATED[name]} ({name})")
                return t.DYN
            signature = _signature(all_args, member)
            return self.error(node, f"found no matching overload for '{name}' applied to '{signature}'")
        for overload in candidates:
            if overload.gate:
                if overload.gate == "DRAListTypeAttributes" and not self.features.list_type_attributes:
                    return self.error(node, f"undeclared reference to '{name}' (in container '')")
                self.gate(overload.gate)
        self.out.overloads[node.id] = candidates
        if name in _REGEX_FUNCTIONS:
            self._check_regex_literal(node, name)
        if name == "dyn":
            return t.DYN
        first = results[0]
        return first if all(r == first for r in results) else t.DYN

    def _logical(self, node: ast.Call, name: str, arg_types: list[t.CelType]) -> t.CelType:
        for i, arg in enumerate(arg_types):
            if arg.kind not in ("bool", "dyn", "error", "param"):
                left = "bool" if i else str(arg)
                right = str(arg) if i else str(arg_types[1]) if len(arg_types) > 1 else "bool"
                return self.error(node, f"found no matching overload for '{name}' applied to '({left}, {right})'")
        self.out.overloads[node.id] = list(FUNCTIONS[name])
        return t.BOOL

    def _check_regex_literal(self, node: ast.Call, name: str) -> None:
        pattern = node.args[-1] if name == "matches" and node.target is None else node.args[0] if node.args else None
        if name == "findAll" and len(node.args) == 2:
            pattern = node.args[0]
        if isinstance(pattern, ast.Literal) and isinstance(pattern.value, str):
            try:
                compile_regex(pattern.value)
            except CelEvalError as exc:
                self.error(pattern, f"invalid {name} argument: {exc.message}")

    # --- comprehensions ------------------------------------------------------------------

    def _comprehension(self, node: ast.Comprehension) -> t.CelType:
        range_type = self.check(node.iter_range)
        if range_type.kind in ("list", "map"):
            var_type = range_type.params[0]
        elif range_type.kind in ("dyn", "error"):
            var_type = t.DYN
        else:
            self.error(
                node.iter_range,
                f"expression of type '{range_type}' cannot be range of a comprehension (must be list, map, or dynamic)",
            )
            var_type = t.DYN
        self.scopes.append({node.var: var_type})
        try:
            predicate = self.check(node.predicate) if node.predicate is not None else None
            transform = self.check(node.transform) if node.transform is not None else None
        finally:
            self.scopes.pop()
        if predicate is not None and predicate.kind not in ("bool", "dyn", "error", "param"):
            self._predicate_error(node, predicate, var_type, transform)
        if node.macro in ("all", "exists"):
            return t.BOOL
        if node.macro == "exists_one":
            return t.BOOL
        if node.macro == "filter":
            return t.list_of(var_type)
        assert transform is not None
        return t.list_of(transform)

    def _predicate_error(
        self, node: ast.Comprehension, predicate: t.CelType, var_type: t.CelType, transform: t.CelType | None
    ) -> None:
        # cel-go reports the mismatch on the expanded fold step (parser/macro.go).
        assert node.predicate is not None
        if node.macro == "all":
            self.error(node.predicate, f"found no matching overload for '_&&_' applied to '(bool, {predicate})'")
        elif node.macro == "exists":
            self.error(node.predicate, f"found no matching overload for '_||_' applied to '(bool, {predicate})'")
        else:
            branch = "int" if node.macro == "exists_one" else str(t.list_of(transform or var_type))
            self.error(
                node.predicate, f"found no matching overload for '_?_:_' applied to '({predicate}, {branch}, {branch})'"
            )


def _assignable(param: t.CelType, arg: t.CelType, subst: dict[str, t.CelType]) -> bool:
    if arg.kind == "error":
        return True
    if param.kind == "param":
        bound = subst.get(param.name)
        if bound is None:
            subst[param.name] = arg
            return True
        if bound.is_dyn and not arg.is_dyn and arg.kind != "param":
            subst[param.name] = arg
            return True
        return _assignable(bound, arg, subst)
    if param.is_dyn or arg.is_dyn:
        return True
    if arg.kind == "param":
        return True
    if param.kind != arg.kind:
        return False
    if param.kind == "object":
        return param.name == arg.name
    if param.kind == "type":
        return True  # type values compare at run time
    return all(_assignable(p, a, subst) for p, a in zip(param.params, arg.params, strict=True))


def _substitute(result: t.CelType, subst: dict[str, t.CelType]) -> t.CelType:
    if result.kind == "param":
        return subst.get(result.name, t.DYN)
    if result.params:
        return t.CelType(result.kind, result.name, tuple(_substitute(p, subst) for p in result.params))
    return result


def _signature(args: list[t.CelType], member: bool) -> str:
    if member:
        return f"{args[0]}.({', '.join(str(a) for a in args[1:])})"
    return f"({', '.join(str(a) for a in args)})"


def check(root: ast.Expr, features: Features) -> Checked:
    checker = _Checker(features)
    checker.check(root)
    return checker.out

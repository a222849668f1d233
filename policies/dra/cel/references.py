"""What a selector reads from the device: attribute and capacity names, and how it uses them.

The API server never checks that an attribute a selector names exists (kubernetes#125826
tracks this in compile.go); a typo or an attribute a driver stopped publishing (NVIDIA's
``index`` and ``minor``, removed in v25.8.0) only shows up as a scheduling failure.  These
references let a rule compare a selector with what the ResourceSlices of the class's driver
actually publish, and spot type mistakes such as comparing the ``version`` attribute
``driverVersion`` with a string.

Recognised forms: ``device.attributes["domain"].name``, ``device.attributes["domain"]["name"]``,
``has(device.attributes["domain"].name)``, ``"name" in device.attributes["domain"]`` and the
same through ``cel.bind`` variables; likewise for ``device.capacity``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policies.dra.cel import ast

_COMPARISONS = frozenset({"_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_"})
Env = Mapping[str, ast.Expr]


@dataclass(frozen=True, slots=True)
class AttributeRef:
    """One read of ``device.attributes`` or ``device.capacity``.

    ``domain``/``name`` are None when the selector computes them.  ``compared_with`` lists the
    literal kinds (``string``, ``int``…) the value is compared to with ==, !=, <, <=, >, >=;
    ``methods`` the member functions called on it (``compareTo``, ``lowerAscii``…).
    """

    kind: str  # attributes | capacity
    domain: str | None
    name: str | None
    presence_test: bool
    offset: int
    compared_with: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()

    @property
    def qualified_name(self) -> str | None:
        if self.domain is None or self.name is None:
            return None
        return f"{self.domain}/{self.name}"


@dataclass(frozen=True, slots=True)
class References:
    attributes: tuple[AttributeRef, ...]
    driver_literals: tuple[str, ...]  # strings compared with device.driver
    reads_driver: bool


def _string(node: ast.Expr) -> str | None:
    if isinstance(node, ast.Literal) and isinstance(node.value, str):
        return node.value
    return None


def _resolve(node: ast.Expr, env: Env) -> ast.Expr:
    seen = 0
    while isinstance(node, ast.Ident) and node.name in env and seen < 64:
        node = env[node.name]
        seen += 1
    return node


def _is_device(node: ast.Expr, env: Env) -> bool:
    node = _resolve(node, env)
    return isinstance(node, ast.Ident) and node.name == "device"


def _root_map(node: ast.Expr, env: Env) -> str | None:
    """'attributes' or 'capacity' when ``node`` is ``device.attributes``/``device.capacity``."""
    node = _resolve(node, env)
    is_map = isinstance(node, ast.Select) and not node.test_only and node.field in ("attributes", "capacity")
    if is_map and isinstance(node, ast.Select) and _is_device(node.operand, env):
        return node.field
    return None


def _domain_map(node: ast.Expr, env: Env) -> tuple[str, str | None] | None:
    """(kind, domain) when ``node`` is one domain's map."""
    node = _resolve(node, env)
    if isinstance(node, ast.Call) and node.function == "_[_]" and node.target is None and len(node.args) == 2:
        kind = _root_map(node.args[0], env)
        if kind is not None:
            return kind, _string(node.args[1])
    if isinstance(node, ast.Select) and not node.test_only:
        kind = _root_map(node.operand, env)
        if kind is not None:
            return kind, node.field
    return None


def _reference(node: ast.Expr, env: Env) -> AttributeRef | None:
    if isinstance(node, ast.Select):
        domain = _domain_map(node.operand, env)
        if domain is not None:
            return AttributeRef(domain[0], domain[1], node.field, node.test_only, node.offset)
    if isinstance(node, ast.Call) and node.target is None and len(node.args) == 2:
        if node.function == "_[_]":
            domain = _domain_map(node.args[0], env)
            if domain is not None:
                return AttributeRef(domain[0], domain[1], _string(node.args[1]), False, node.offset)
        if node.function == "@in":
            domain = _domain_map(node.args[1], env)
            if domain is not None:
                return AttributeRef(domain[0], domain[1], _string(node.args[0]), True, node.offset)
    return None


def reference_of(node: ast.Expr) -> AttributeRef | None:
    """``node`` as one read of ``device.attributes``/``device.capacity`` (no ``cel.bind`` variables)."""
    return _reference(node, {})


def _usage(ref: AttributeRef, node: ast.Expr, parent: ast.Expr | None) -> AttributeRef:
    if ref.presence_test or not isinstance(parent, ast.Call):
        return ref
    if parent.target is node:
        return AttributeRef(ref.kind, ref.domain, ref.name, False, ref.offset, (), (parent.function,))
    if parent.function in _COMPARISONS and parent.target is None and len(parent.args) == 2:
        other = parent.args[1] if parent.args[0] is node else parent.args[0]
        if isinstance(other, ast.Literal):
            return AttributeRef(ref.kind, ref.domain, ref.name, False, ref.offset, (other.kind,))
    return ref


def find_references(root: ast.Expr) -> References:
    refs: list[AttributeRef] = []
    drivers: list[str] = []
    reads_driver = False
    empty: dict[str, ast.Expr] = {}
    stack: list[tuple[ast.Expr, ast.Expr | None, Env]] = [(root, None, empty)]
    while stack:
        node, parent, env = stack.pop()
        if isinstance(node, ast.Select) and node.field == "driver" and _is_device(node.operand, env):
            reads_driver = True
            if isinstance(parent, ast.Call) and parent.function in ("_==_", "_!=_", "@in") and len(parent.args) == 2:
                other = parent.args[1] if parent.args[0] is node else parent.args[0]
                if _string(other) is not None:
                    drivers.append(str(_string(other)))
                elif isinstance(other, ast.CreateList):
                    drivers.extend(s for s in map(_string, other.elements) if s is not None)
        ref = _reference(node, env)
        if ref is not None:
            refs.append(_usage(ref, node, parent))
        if isinstance(node, ast.Bind):
            stack.append((node.body, node, {**env, node.var: node.init}))
            stack.append((node.init, node, env))
            continue
        if isinstance(node, ast.Comprehension) and node.var in env:
            inner = {k: v for k, v in env.items() if k != node.var}  # the loop variable shadows a binding
            stack.extend((c, node, inner if c is not node.iter_range else env) for c in reversed(ast.children(node)))
            continue
        stack.extend((c, node, env) for c in reversed(ast.children(node)))
    refs.sort(key=lambda r: r.offset)
    return References(tuple(refs), tuple(dict.fromkeys(drivers)), reads_driver)

"""Evaluate a selector once per distinct device *as the selector sees it*, not once per device.

A cluster's devices are mostly copies of a few models: eight H100s per node differ only in names,
UUIDs and bus IDs.  A CEL selector is a pure function of what it reads of ``device``, so devices that
agree on those reads get the same answer (matched, error or cost).  ``reads(compiled)`` lists what a
selector reads — ``device.driver``, ``device.allowMultipleAllocations`` and named attributes and
capacities — and gives up (None: evaluate every device) as soon as ``device`` is used any other way
(a whole domain map iterated or bound with ``cel.bind``, computed names, macros over it).

The signature of a device for a selector is the values it reads, plus everything that could make the
device's conversion into the CEL ``device`` fail (compile.go ``getAttributeValue``: every attribute
that is not a single string value, and every capacity) — so a malformed device never shares an
answer with a sound one.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from policies.boundedcache import small_key_cache
from policies.digest import digest
from policies.dra.cel import CompiledSelector, MatchResult, ast, compile_selector
from policies.dra.cel.references import reference_of
from policies.dra.objects import Device

Read = tuple[str, ...]  # ("driver",) | ("allowMultipleAllocations",) | (kind, domain, name)
MEMO_LIMIT = 20_000
# Keys are content (expression, limit, what the selector reads), so the memo is shared by every
# snapshot and thread; past the limit it starts over.
_MEMO: dict[Hashable, MatchResult] = {}
_FIELDS = ("driver", "allowMultipleAllocations")


def _reads(root: ast.Expr) -> tuple[Read, ...] | None:
    found: dict[Read, None] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Select) and isinstance(node.operand, ast.Ident) and node.operand.name == "device":
            if node.field not in _FIELDS or node.test_only:
                return None
            found[(node.field,)] = None
            continue
        ref = reference_of(node)
        if ref is not None:
            if ref.domain is None or ref.name is None:
                return None
            found[(ref.kind, ref.domain, ref.name)] = None
            continue
        if isinstance(node, ast.Ident) and node.name == "device":
            return None  # device used some other way: its whole value matters
        if isinstance(node, (ast.Bind, ast.Unsupported)):
            return None
        if isinstance(node, ast.Comprehension) and node.var == "device":
            return None
        stack.extend(ast.children(node))
    return tuple(found)


@small_key_cache(maxsize=2048, max_key_chars=10 * 1024)
def _reads_of(expression: str) -> tuple[Read, ...] | None:
    root = compile_selector(expression).program_root  # the tree depends on the text alone
    return None if root is None else _reads(root)


def reads(compiled: CompiledSelector) -> tuple[Read, ...] | None:
    return _reads_of(compiled.expression)


def _freeze(value: Any) -> Hashable:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value if isinstance(value, (str, int, float, bool)) or value is None else repr(value)


def _lookup(table: Any, domain: str, name: str, driver: str) -> Hashable:
    if f"{domain}/{name}" in table:
        return ("v", _freeze(table[f"{domain}/{name}"]))
    if domain == driver and name in table:
        return ("v", _freeze(table[name]))
    return None


def _risky(device: Device) -> Hashable:
    """What could make converting the device fail: all but single-string attributes, all capacities
    (a digest, kept on the device: its views are immutable)."""
    known = device.__dict__.get("_risky")
    if known is None:
        attributes = [
            (k, v) for k, v in device.attributes.items() if not (len(v) == 1 and isinstance(v.get("string"), str))
        ]
        known = digest(attributes, dict(device.capacity)) or repr((attributes, device.capacity))
        device.__dict__["_risky"] = known
    return known


def signature(device_reads: tuple[Read, ...], device: Device) -> Hashable:
    parts: list[Hashable] = []
    for read in device_reads:
        if read == ("driver",):
            parts.append(device.driver)
        elif read == ("allowMultipleAllocations",):
            parts.append(device.allow_multiple_allocations)
        else:
            kind, domain, name = read
            table = device.attributes if kind == "attributes" else device.capacity
            parts.append(_lookup(table, domain, name, device.driver))
    return device.driver, tuple(parts), _risky(device)


def evaluate(compiled: CompiledSelector, device: Device, cost_limit: int) -> MatchResult:
    """``compiled.evaluate(device.prepared, cost_limit)``, shared between devices that read the same."""
    device_reads = reads(compiled)
    if device_reads is None:
        return compiled.evaluate(device.prepared, cost_limit)
    key = (compiled.expression, cost_limit, signature(device_reads, device))
    found = _MEMO.get(key)
    if found is None:
        found = compiled.evaluate(device.prepared, cost_limit)
        if len(_MEMO) >= MEMO_LIMIT:
            _MEMO.clear()
        _MEMO[key] = found
    return found

"""Compile a DRA device selector the way the API server does, and evaluate it the way the
scheduler does.

``compile_selector`` mirrors ``validateCELSelector`` (kubernetes pkg/apis/resource/validation)
and ``CompileCELExpression`` (k8s.io/dynamic-resource-allocation cel/compile.go): longer than
10 Ki → ``Too long`` without compiling; then parse and type-check (``compilation failed: …``);
the result must be ``bool`` or the unknown type (``must evaluate to bool or the unknown type,
not int``); an estimated cost above 1,000,000 is ``too complex, exceeds cost limit``.

``CompiledSelector.evaluate`` mirrors ``DeviceMatches``: attribute names without a domain get
the driver's domain, an unknown domain reads as an empty map, a missing attribute in a known
domain is a runtime error, and a non-bool result is an error.

Where gpuguard cannot be sure it agrees with Kubernetes, the result says so
(``parity_uncertain``/``uncertain_reasons``) and rules keep such findings as warnings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policies import budget
from policies.boundedcache import WeightedLRU
from policies.dra.cel import ast
from policies.dra.cel.checker import Features, check
from policies.dra.cel.cost import U64, estimate
from policies.dra.cel.interpreter import DeviceValue, Interpreter, Program
from policies.dra.cel.parse import CelSyntaxError, parse
from policies.dra.cel.quantity import QuantityError, parse_quantity
from policies.dra.cel.references import References, find_references
from policies.dra.cel.semver import SemverError
from policies.dra.cel.semver import parse as parse_semver
from policies.dra.cel.values import CelEvalError, CelMap, CostLimitExceeded, Unsupported, type_name

MAX_LENGTH = 10 * 1024  # resourceapi.CELSelectorExpressionMaxLength (bytes)
MAX_COST = 1_000_000  # resourceapi.CELSelectorExpressionMaxCost
MAX_EVAL_DEPTH = 160  # deeper trees are left unevaluated (Python recursion), never rejected


@dataclass(frozen=True, slots=True)
class CelIssue:
    """Why the API server would reject a selector.

    ``kind``: ``too-long``, ``syntax``, ``type``, ``result-type`` or ``too-complex``.
    ``detail`` is the text Kubernetes puts in its field error (``compilation failed: ERROR:
    <input>:1:8: undeclared reference to 'x' (in container '')`` …); ``offset`` the
    0-based character position it points at, if any.
    """

    kind: str
    detail: str
    offset: int | None = None


@dataclass(frozen=True, slots=True)
class MatchResult:
    """One device against one selector.

    ``matched`` is None when there is no answer: ``error`` holds a CEL runtime error (the
    scheduler aborts allocation on the node with ``selector #i on device …: CEL runtime
    error: <error>``), ``unsupported`` what gpuguard could not evaluate.
    """

    matched: bool | None
    cost: int = 0
    error: str | None = None
    unsupported: str | None = None


@dataclass(frozen=True, slots=True)
class PreparedDevice:
    """A device converted once into the ``device`` CEL variable (or the reason it cannot be)."""

    value: DeviceValue | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class CompiledSelector:
    """The outcome of compiling one selector.

    - ``issue``: set when the API server rejects the expression (``ok`` is False then).
    - ``output_type``: the checked result type (``bool`` or ``dyn`` when valid).
    - ``max_cost``: the estimated worst-case cost (None if not estimated).
    - ``evaluable``: gpuguard can evaluate it against devices.
    - ``parity_uncertain`` / ``uncertain_reasons``: where gpuguard's reading may differ from
      Kubernetes' (unmodelled functions or syntax, feature gates, costs near the limit).
    - ``references``: the attributes and capacities it reads (see :mod:`.references`).
    """

    expression: str
    issue: CelIssue | None
    output_type: str | None
    max_cost: int | None
    evaluable: bool
    parity_uncertain: bool
    uncertain_reasons: tuple[str, ...]
    references: References
    _program: Program | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.issue is None

    @property
    def program_root(self) -> ast.Expr | None:
        """The checked expression tree when gpuguard evaluates it (policies.dra.signature reads it)."""
        return self._program.root if self._program is not None else None

    def evaluate(self, device: PreparedDevice, cost_limit: int = MAX_COST) -> MatchResult:
        """Evaluate against one device; never raises."""
        if self.issue is not None:
            return MatchResult(None, error=f"CEL compile error: {self.issue.detail}")
        if not self.evaluable or self._program is None:
            return MatchResult(None, unsupported="; ".join(self.uncertain_reasons) or "not evaluable")
        if device.value is None:
            return MatchResult(None, error=device.error)
        interpreter = Interpreter(self._program, device.value, cost_limit)
        try:
            result = interpreter.eval(self._program.root)
        except CelEvalError as exc:
            return MatchResult(None, interpreter.cost, error=exc.message)
        except CostLimitExceeded as exc:
            return MatchResult(None, interpreter.cost, error=str(exc))
        except Unsupported as exc:
            return MatchResult(None, interpreter.cost, unsupported=str(exc))
        except RecursionError:  # only when called from an already deep stack
            return MatchResult(None, interpreter.cost, unsupported="too deeply nested to evaluate here")
        if not isinstance(result, bool):
            message = f"CEL result of type {type_name(result)} could not be converted to bool"
            return MatchResult(None, interpreter.cost, error=message)
        return MatchResult(result, interpreter.cost)


_NO_REFERENCES = References((), (), False)
# A compiled selector holds about 40 bytes per character of its text (a 10 KiB selector: 370 KiB of
# trees, measured with tracemalloc); the cache is bounded by that estimate, not by entries (2,048
# entries of 10 KiB selectors would hold 740 MiB).
_BYTES_PER_CHARACTER = 40
_cache: WeightedLRU[tuple[str, Features], CompiledSelector] = WeightedLRU(budget=32 * 1024 * 1024)


def compile_selector(expression: str, features: Features | None = None) -> CompiledSelector:
    """Compile ``expression`` (cached; bounded time and memory for any input)."""
    features = features or Features()
    key = (expression, features)
    cached = _cache.get(key)
    if cached is not None:
        return cached
    budget.check()
    result = _compile(expression, features)
    _cache.put(key, result, 256 + _BYTES_PER_CHARACTER * len(expression))
    return result


def _rejected(expression: str, issue: CelIssue, uncertain: tuple[str, ...] = ()) -> CompiledSelector:
    return CompiledSelector(expression, issue, None, None, False, bool(uncertain), uncertain, _NO_REFERENCES)


def _compile(expression: str, features: Features) -> CompiledSelector:
    try:
        return _compile_checked(expression, features)
    except RecursionError:  # MAX_EVAL_DEPTH keeps this away unless the caller's stack is already deep
        reason = "too deeply nested for gpuguard to check here"
        return CompiledSelector(expression, None, None, None, False, True, (reason,), _NO_REFERENCES)


def _compile_checked(expression: str, features: Features) -> CompiledSelector:
    size = len(expression.encode("utf-8"))
    if size > MAX_LENGTH:
        detail = f"Too long: may not be more than {MAX_LENGTH} bytes (the expression has {size})"
        return _rejected(expression, CelIssue("too-long", detail))
    try:
        parsed = parse(expression)
    except CelSyntaxError as exc:
        detail = "compilation failed: " + _format_issue(expression, exc.detail, exc.offset)
        if exc.grammar_gap:
            reason = "uses syntax cel-python's grammar lacks (optional selection, backquoted names or a trailing comma)"
            return CompiledSelector(expression, None, None, None, False, True, (reason,), _NO_REFERENCES)
        return _rejected(expression, CelIssue("syntax", detail, exc.offset))
    root = parsed.root
    uncertain: list[str] = []
    evaluable = True
    if ast.depth(root) > MAX_EVAL_DEPTH:
        return CompiledSelector(
            expression,
            None,
            None,
            None,
            False,
            True,
            (f"nested more than {MAX_EVAL_DEPTH} levels deep; gpuguard does not evaluate it",),
            _NO_REFERENCES,
        )
    checked = check(root, features)
    references = find_references(root)
    if checked.issues:
        first = checked.issues[0]
        lines = [_format_issue(expression, issue.message, issue.offset) for issue in checked.issues]
        issue = CelIssue("type", "compilation failed: " + "\n".join(lines), first.offset)
        regex_issue = any(i.message.startswith("invalid ") and "argument" in i.message for i in checked.issues)
        reasons: tuple[str, ...] = ()
        if regex_issue:
            reasons = ("the wording of regular-expression literal errors is gpuguard's",)
        return CompiledSelector(expression, issue, None, None, False, bool(reasons), reasons, references)
    if checked.unevaluated:
        evaluable = False
        uncertain.extend(f"uses {what}, which gpuguard does not evaluate" for what in checked.unevaluated)
    for gate in checked.gates:
        uncertain.append(f"depends on {gate}")
    output = checked.types[root.id]
    if output.kind not in ("bool", "dyn"):
        issue = CelIssue("result-type", f"must evaluate to bool or the unknown type, not {output}", None)
        reasons = tuple(uncertain)
        return CompiledSelector(expression, issue, str(output), None, False, bool(reasons), reasons, references)
    cost = estimate(root, checked).max
    if cost > MAX_COST:
        detail = f"too complex, exceeds cost limit (estimated cost {_cost_text(cost)}, limit {MAX_COST})"
        issue = CelIssue("too-complex", detail, None)
        if cost < 2 * MAX_COST:
            uncertain.append("the estimated cost is close to the limit")
        reasons = tuple(uncertain)
        return CompiledSelector(expression, issue, str(output), cost, False, bool(reasons), reasons, references)
    if cost * 2 > MAX_COST:
        uncertain.append("the estimated cost is close to the limit")
    program = Program(root, checked) if evaluable else None
    return CompiledSelector(
        expression, None, str(output), cost, evaluable, bool(uncertain), tuple(uncertain), references, program
    )


def _cost_text(cost: int) -> str:
    return "unbounded" if cost >= U64 else str(cost)


def _format_issue(text: str, message: str, offset: int) -> str:
    """cel-go's ``Errors.ToDisplayString``: location, message and a caret under the column."""
    offset = max(0, min(offset, len(text)))
    line_no = text.count("\n", 0, offset) + 1
    line_start = text.rfind("\n", 0, offset) + 1
    column = offset - line_start
    line_end = text.find("\n", offset)
    line = text[line_start : line_end if line_end != -1 else len(text)]
    return f"ERROR: <input>:{line_no}:{column + 1}: {message}\n | {line}\n | {'.' * column}^"


# --- devices ---------------------------------------------------------------------------------


def _attribute_value(raw: Any) -> object:
    """compile.go ``getAttributeValue``: list forms first, then int, bool, string, version."""
    if not isinstance(raw, Mapping):
        raise ValueError("unsupported attribute value")
    if len(raw) == 1:  # the usual case: exactly one value set
        key, value = next(iter(raw.items()))
        convert = _SCALARS.get(key)
        if convert is not None and value is not None:
            return convert(value)
    for key, convert in (("ints", _int), ("bools", _bool), ("strings", _str), ("versions", _version)):
        if key in raw and raw[key] is not None:
            values = raw[key]
            if not isinstance(values, list):
                raise ValueError(f"{key} must be a list")
            return tuple(convert(v) for v in values)
    for key, convert in (("int", _int), ("bool", _bool), ("string", _str), ("version", _version)):
        if key in raw and raw[key] is not None:
            return convert(raw[key])
    raise ValueError("unsupported attribute value")


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not -(2**63) <= v < 2**63:
        raise ValueError(f"{v!r} is not an int64")
    return v


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{v!r} is not a bool")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise ValueError(f"{v!r} is not a string")
    return v


def _version(v: Any) -> object:
    try:
        return parse_semver(str(v))
    except SemverError as exc:
        raise ValueError(f"parse semantic version: {exc}") from None


_SCALARS = {"int": _int, "bool": _bool, "string": _str, "version": _version}


def _split_name(name: str, driver: str) -> tuple[str, str]:
    """compile.go ``parseQualifiedName``: no slash means the driver's domain."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def prepare_device(
    driver: str,
    attributes: Mapping[str, Any],
    capacity: Mapping[str, Any],
    allow_multiple_allocations: bool = False,
) -> PreparedDevice:
    """Build the ``device`` variable from a ResourceSlice device's ``attributes``/``capacity``.

    ``capacity`` values may be ``{"value": "80Gi"}`` (the API shape) or the quantity itself.
    A malformed attribute makes every selector fail on this device, as in the scheduler
    (``attribute <name>: …``).
    """
    domains: dict[str, dict[str, object]] = {}
    for name, raw in attributes.items():
        try:
            value = _attribute_value(raw)
        except ValueError as exc:
            return PreparedDevice(None, f"attribute {name}: {exc}")
        domain, ident = _split_name(str(name), driver)
        domains.setdefault(domain, {})[ident] = value
    capacities: dict[str, dict[str, object]] = {}
    for name, raw in capacity.items():
        text = raw.get("value") if isinstance(raw, Mapping) else raw
        try:
            quantity = parse_quantity(str(text).strip()) if isinstance(text, str | int) else None
        except (QuantityError, Unsupported):
            quantity = None
        if quantity is None:
            return PreparedDevice(None, f"capacity {name}: {text!r} is not a quantity")
        domain, ident = _split_name(str(name), driver)
        capacities.setdefault(domain, {})[ident] = quantity
    empty = CelMap()
    value = DeviceValue(
        driver,
        CelMap({d: CelMap(v) for d, v in domains.items()}, default=empty),
        CelMap({d: CelMap(v) for d, v in capacities.items()}, default=empty),
        allow_multiple_allocations,
    )
    return PreparedDevice(value)

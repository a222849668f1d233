"""The functions of Kubernetes' CEL environment for DRA selectors.

Declarations follow cel-go's standard library (common/stdlib/standard.go), the string
extensions at the version Kubernetes enables (ext.Strings(StringsVersion(2)); k8s.io/apiserver
pkg/cel/environment/base.go), cel-go ext.Sets, and Kubernetes' own libraries (pkg/cel/library:
quantity.go, semverlib.go, regex.go, lists.go) plus DRA's ``includes``
(k8s.io/dynamic-resource-allocation cel/compile.go).  Overload ids are cel-go's where its cost
model switches on them.

Functions Kubernetes declares but gpuguard does not evaluate (URLs, IPs/CIDRs, named formats,
optional types, timestamps, ext.Lists, ``format``, ``strings.quote``…) are in
:data:`UNEVALUATED`: an expression using them type-checks as ``dyn`` and is reported as
evaluable=False with parity uncertain, never as an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from policies import patterns
from policies.boundedcache import WeightedLRU
from policies.dra.cel import types as t
from policies.dra.cel.quantity import Quantity, from_int, is_quantity, quantity_value
from policies.dra.cel.semver import Semver, is_semver, semver_value
from policies.dra.cel.values import (
    CelEvalError,
    CelMap,
    TypeValue,
    Uint,
    Unsupported,
    cel_equal,
    check_int,
    compare,
    no_such_overload,
    size_of,
    type_name,
)

Impl = Callable[..., object]


@dataclass(frozen=True, slots=True)
class Overload:
    id: str
    function: str
    member: bool
    params: tuple[t.CelType, ...]  # for member overloads params[0] is the target
    result: t.CelType
    impl: Impl | None
    gate: str | None = None  # a feature gate or version the overload depends on


def _ty(spec: str) -> t.CelType:
    """'int', 'list(A)', 'map(A, B)', 'Q' (Quantity), 'S' (Semver), 'A'/'B' (params)."""
    spec = spec.strip()
    simple = {
        "bool": t.BOOL,
        "int": t.INT,
        "uint": t.UINT,
        "double": t.DOUBLE,
        "string": t.STRING,
        "bytes": t.BYTES,
        "null": t.NULL,
        "dyn": t.DYN,
        "Q": t.QUANTITY,
        "S": t.SEMVER,
        "A": t.param("A"),
        "B": t.param("B"),
    }
    if spec in simple:
        return simple[spec]
    if spec.startswith("list(") and spec.endswith(")"):
        return t.list_of(_ty(spec[5:-1]))
    if spec.startswith("map(") and spec.endswith(")"):
        key, value = spec[4:-1].split(",", 1)
        return t.map_of(_ty(key), _ty(value))
    if spec.startswith("type(") and spec.endswith(")"):
        return t.type_of(_ty(spec[5:-1]))
    raise ValueError(spec)


FUNCTIONS: dict[str, list[Overload]] = {}


def _decl(
    name: str, oid: str, sig: str, result: str, impl: Impl | None, member: bool = False, gate: str | None = None
) -> None:
    params = tuple(_ty(p) for p in sig.split(";")) if sig else ()
    FUNCTIONS.setdefault(name, []).append(Overload(oid, name, member, params, _ty(result), impl, gate))


# --- implementations ------------------------------------------------------------------------


def _int_op(op: Callable[[int, int], int]) -> Impl:
    return lambda a, b: check_int(op(a, b))


def _uint_op(op: Callable[[int, int], int]) -> Impl:
    def apply(a: Uint, b: Uint) -> Uint:
        result = op(a.value, b.value)
        if not 0 <= result <= 2**64 - 1:
            raise CelEvalError("unsigned integer overflow")
        return Uint(result)

    return apply


def _int_div(a: int, b: int) -> int:
    if b == 0:
        raise CelEvalError("division by zero")
    quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # Go truncates toward zero
    return check_int(quotient)


def _int_mod(a: int, b: int) -> int:
    if b == 0:
        raise CelEvalError("modulus by zero")
    remainder = abs(a) % abs(b)  # Go: the sign follows the dividend
    return remainder if a >= 0 else -remainder


def _uint_div(a: Uint, b: Uint) -> Uint:
    if b.value == 0:
        raise CelEvalError("division by zero")
    return Uint(a.value // b.value)


def _uint_mod(a: Uint, b: Uint) -> Uint:
    if b.value == 0:
        raise CelEvalError("modulus by zero")
    return Uint(a.value % b.value)


def _double_div(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _double_op(op: Callable[[float, float], float]) -> Impl:
    def apply(a: float, b: float) -> float:
        try:
            return op(a, b)
        except OverflowError:
            return math.inf
    return apply


def _cmp(test: Callable[[int], bool]) -> Impl:
    return lambda a, b: test(compare(a, b))


def _to_int(value: object) -> int:
    if isinstance(value, bool):
        raise no_such_overload()
    if isinstance(value, int):
        return value
    if isinstance(value, Uint):
        return check_int(value.value)
    if isinstance(value, float):
        if math.isnan(value) or not -(2.0**63) < value < 2.0**63:
            raise CelEvalError("integer overflow")
        return int(value)
    if isinstance(value, str):
        if not _SIGNED.fullmatch(value):
            raise CelEvalError(f'strconv.ParseInt: parsing "{value}": invalid syntax')
        parsed = int(value)
        if not -(2**63) <= parsed < 2**63:
            raise CelEvalError(f'strconv.ParseInt: parsing "{value}": value out of range')
        return parsed
    raise no_such_overload()


def _to_uint(value: object) -> Uint:
    if isinstance(value, bool):
        raise no_such_overload()
    if isinstance(value, int):
        if value < 0:
            raise CelEvalError("unsigned integer overflow")
        return Uint(value)
    if isinstance(value, Uint):
        return value
    if isinstance(value, float):
        if math.isnan(value) or not 0 <= value < 2.0**64:
            raise CelEvalError("unsigned integer overflow")
        return Uint(int(value))
    if isinstance(value, str):
        if not _UNSIGNED.fullmatch(value):
            raise CelEvalError(f'strconv.ParseUint: parsing "{value}": invalid syntax')
        parsed = int(value)
        if parsed >= 2**64:
            raise CelEvalError(f'strconv.ParseUint: parsing "{value}": value out of range')
        return Uint(parsed)
    raise no_such_overload()


def _to_double(value: object) -> float:
    if isinstance(value, bool):
        raise no_such_overload()
    if isinstance(value, int):
        return float(value)
    if isinstance(value, Uint):
        return float(value.value)
    if isinstance(value, float):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise CelEvalError(f'strconv.ParseFloat: parsing "{value}": invalid syntax') from None
    raise no_such_overload()


def _to_string(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Uint):
        return str(value.value)
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise CelEvalError("invalid UTF-8 in bytes, cannot convert to string") from None
    if isinstance(value, float):
        raise Unsupported("string(double): Go's float formatting is not reproduced")
    raise no_such_overload()


_BOOL_STRINGS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True}
_BOOL_STRINGS.update({"0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False})


def _to_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if value not in _BOOL_STRINGS:
            raise CelEvalError("type conversion error from 'string' to 'bool'")
        return _BOOL_STRINGS[value]
    raise no_such_overload()


def _size(value: object) -> int:
    if isinstance(value, str | bytes | tuple | CelMap):
        return len(value)
    raise no_such_overload()


_SIGNED = patterns.compile(r"[+-]?[0-9]+")
_UNSIGNED = patterns.compile(r"[+]?[0-9]+")
# Compiled patterns of selectors' matches()/find() calls, weighed by their length: RE2 programs
# grow with the pattern, and selectors may be 10 KiB each.
_regex_cache: WeightedLRU[str, patterns.Pattern] = WeightedLRU(budget=512 * 1024)


def compile_regex(pattern: str) -> patterns.Pattern:
    """RE2, the engine (and syntax) Go's regexp and cel-go use."""
    cached = _regex_cache.get(pattern)
    if cached is None:
        try:
            cached = patterns.compile(pattern)
        except patterns.PatternError as exc:
            raise CelEvalError(f"error parsing regexp: {exc}") from None
        _regex_cache.put(pattern, cached, len(pattern) + 64)
    return cached


def _matches(text: str, pattern: str) -> bool:
    return compile_regex(pattern).search(text) is not None


def _find(text: str, pattern: str) -> str:
    found = compile_regex(pattern).search(text)
    return "" if found is None else str(found.group(0))


def _find_all(text: str, pattern: str, limit: int = -1) -> tuple[str, ...]:
    if limit == 0:
        return ()
    out: list[str] = []
    previous_end = -1
    for found in compile_regex(pattern).finditer(text):
        start, end = found.start(), found.end()
        if start == end == previous_end:
            continue  # Go's regexp ignores an empty match abutting the preceding match
        previous_end = end
        out.append(str(found.group(0)))
        if 0 < limit <= len(out):
            break
    return tuple(out)


def _char_at(text: str, index: int) -> str:
    if index < 0 or index > len(text):
        raise CelEvalError(f"index out of range: {index}")
    return "" if index == len(text) else text[index]


def _index_of(text: str, sub: str, offset: int = 0) -> int:
    if offset < 0:
        raise CelEvalError(f"index out of range: {offset}")
    if sub == "":
        return min(offset, len(text))
    if offset >= len(text):
        return -1
    return text.find(sub, offset)


def _last_index_of(text: str, sub: str, offset: int | None = None) -> int:
    if offset is None:
        return len(text) if sub == "" else text.rfind(sub)
    if offset < 0:
        raise CelEvalError(f"index out of range: {offset}")
    if sub == "":
        return min(offset, len(text))
    if offset >= len(text):
        return -1
    return text.rfind(sub, 0, min(offset, len(text) - len(sub)) + len(sub))


_TO_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_TO_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _ascii(text: str, upper: bool) -> str:
    return text.translate(_TO_UPPER if upper else _TO_LOWER)  # ASCII letters only, as cel-go


def _replace(text: str, old: str, new: str, limit: int = -1) -> str:
    if limit < 0:
        limit = -1
    if old == "":  # Go inserts around every rune, up to the limit
        pieces = ["", *text, ""] if text else ["", ""]
        count = len(pieces) - 1 if limit < 0 else min(limit, len(pieces) - 1)
        return new.join(pieces[: count + 1]) + "".join(pieces[count + 1 :])
    return text.replace(old, new, limit)


def _split(text: str, sep: str, limit: int = -1) -> tuple[str, ...]:
    if limit == 0:
        return ()
    if sep == "":
        parts = list(text)
        if 0 < limit < len(parts):
            parts = [*parts[: limit - 1], "".join(parts[limit - 1 :])]
        return tuple(parts)
    return tuple(text.split(sep) if limit < 0 else text.split(sep, limit - 1))


def _substring(text: str, start: int, end: int | None = None) -> str:
    if end is None:
        if start < 0 or start > len(text):
            raise CelEvalError(f"index out of range: {start}")
        return text[start:]
    if start > end:
        raise CelEvalError(f"invalid substring range. start: {start}, end: {end}")
    for index in (start, end):
        if index < 0 or index > len(text):
            raise CelEvalError(f"index out of range: {index}")
    return text[start:end]


_GO_SPACE = (  # unicode.IsSpace
    " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _trim(text: str) -> str:
    return text.strip(_GO_SPACE)  # strings.TrimSpace: unicode.IsSpace


def _join(items: tuple[object, ...], sep: str = "") -> str:
    for item in items:
        if not isinstance(item, str):
            raise CelEvalError(f"join: invalid input: {item}")
    return sep.join(items)  # type: ignore[arg-type]


def _contains_all(haystack: tuple[object, ...], needles: tuple[object, ...]) -> bool:
    return all(any(cel_equal(h, n) for h in haystack) for n in needles)


def _includes(target: object, arg: object) -> bool:
    if isinstance(target, tuple):
        if len(target) > t.LIST_ATTRIBUTE_VALUES_MAX:
            raise CelEvalError(
                f"'includes' function cannot be applied to lists longer than {t.LIST_ATTRIBUTE_VALUES_MAX} values"
            )
        return any(cel_equal(item, arg) for item in target)
    return cel_equal(target, arg)


def _list_min_max(items: tuple[object, ...], pick_max: bool, name: str) -> object:
    if not items:
        raise CelEvalError(f"{name} called on empty list")
    best = items[0]
    for item in items[1:]:
        c = compare(item, best)
        if (c > 0) if pick_max else (c < 0):
            best = item
    return best


def _list_sum(items: tuple[object, ...]) -> object:
    total: object = 0
    for item in items:
        if isinstance(total, int) and total == 0 and not isinstance(item, int):
            total = Uint(0) if isinstance(item, Uint) else 0.0
        if isinstance(item, bool):
            raise no_such_overload()
        if isinstance(item, int) and isinstance(total, int):
            total = check_int(total + item)
        elif isinstance(item, Uint) and isinstance(total, Uint):
            total = Uint(total.value + item.value)
        elif isinstance(item, float) and isinstance(total, float):
            total = total + item
        else:
            raise no_such_overload()
    return total


def _is_sorted(items: tuple[object, ...]) -> bool:
    return all(compare(items[i], items[i + 1]) <= 0 for i in range(len(items) - 1))


def _list_index(items: tuple[object, ...], value: object, last: bool) -> int:
    indices = range(len(items) - 1, -1, -1) if last else range(len(items))
    for i in indices:
        if cel_equal(items[i], value):
            return i
    return -1


def _quantity_as_int(q: Quantity) -> int:
    value = q.as_int64()
    if value is None:
        raise CelEvalError("cannot convert value to integer")
    return value


def _type_of(value: object) -> TypeValue:
    return TypeValue(type_name(value))


# --- declarations ---------------------------------------------------------------------------

_decl("!_", "logical_not", "bool", "bool", lambda a: not a)
_decl("-_", "negate_int64", "int", "int", lambda a: check_int(-a))
_decl("-_", "negate_double", "double", "double", lambda a: -a)
_decl("_&&_", "logical_and", "bool;bool", "bool", None)
_decl("_||_", "logical_or", "bool;bool", "bool", None)
_decl("_?_:_", "conditional", "bool;A;A", "A", None)
_decl("_==_", "equals", "A;A", "bool", None)
_decl("_!=_", "not_equals", "A;A", "bool", None)
_decl("@in", "in_list", "A;list(A)", "bool", None)
_decl("@in", "in_map", "A;map(A, B)", "bool", None)
_decl("_[_]", "index_list", "list(A);int", "A", None)
_decl("_[_]", "index_map", "map(A, B);A", "B", None)

_decl("_+_", "add_int64", "int;int", "int", _int_op(lambda a, b: a + b))
_decl("_+_", "add_uint64", "uint;uint", "uint", _uint_op(lambda a, b: a + b))
_decl("_+_", "add_double", "double;double", "double", _double_op(lambda a, b: a + b))
_decl("_+_", "add_string", "string;string", "string", lambda a, b: a + b)
_decl("_+_", "add_bytes", "bytes;bytes", "bytes", lambda a, b: a + b)
_decl("_+_", "add_list", "list(A);list(A)", "list(A)", lambda a, b: a + b)
_decl("_-_", "subtract_int64", "int;int", "int", _int_op(lambda a, b: a - b))
_decl("_-_", "subtract_uint64", "uint;uint", "uint", _uint_op(lambda a, b: a - b))
_decl("_-_", "subtract_double", "double;double", "double", _double_op(lambda a, b: a - b))
_decl("_*_", "multiply_int64", "int;int", "int", _int_op(lambda a, b: a * b))
_decl("_*_", "multiply_uint64", "uint;uint", "uint", _uint_op(lambda a, b: a * b))
_decl("_*_", "multiply_double", "double;double", "double", _double_op(lambda a, b: a * b))
_decl("_/_", "divide_int64", "int;int", "int", _int_div)
_decl("_/_", "divide_uint64", "uint;uint", "uint", _uint_div)
_decl("_/_", "divide_double", "double;double", "double", _double_div)
_decl("_%_", "modulo_int64", "int;int", "int", _int_mod)
_decl("_%_", "modulo_uint64", "uint;uint", "uint", _uint_mod)

_ORDERED = ("bool", "int", "uint", "double", "string", "bytes")
_CROSS = (
    ("int", "uint"),
    ("int", "double"),
    ("uint", "int"),
    ("uint", "double"),
    ("double", "int"),
    ("double", "uint"),
)
for _op, _stem, _test in (
    ("_<_", "less", lambda c: c < 0),
    ("_<=_", "less_equals", lambda c: c <= 0),
    ("_>_", "greater", lambda c: c > 0),
    ("_>=_", "greater_equals", lambda c: c >= 0),
):
    for _k in _ORDERED:
        _decl(_op, f"{_stem}_{_k}", f"{_k};{_k}", "bool", _cmp(_test))
    for _a, _b in _CROSS:
        _decl(_op, f"{_stem}_{_a}_{_b}", f"{_a};{_b}", "bool", _cmp(_test))

for _k in ("string", "bytes", "list(A)", "map(A, B)"):
    _kind = _k.split("(")[0]
    _decl("size", f"size_{_kind}", _k, "int", _size)
    _decl("size", f"{_kind}_size", _k, "int", _size, member=True)

_decl("contains", "contains_string", "string;string", "bool", lambda s, sub: sub in s, member=True)
_decl("startsWith", "starts_with_string", "string;string", "bool", lambda s, p: s.startswith(p), member=True)
_decl("endsWith", "ends_with_string", "string;string", "bool", lambda s, p: s.endswith(p), member=True)
_decl("matches", "matches", "string;string", "bool", _matches)
_decl("matches", "matches_string", "string;string", "bool", _matches, member=True)

for _src in ("int", "uint", "double", "string"):
    _decl("int", f"{_src}_to_int64", _src, "int", _to_int)
    _decl("uint", f"{_src}_to_uint64", _src, "uint", _to_uint)
    _decl("double", f"{_src}_to_double", _src, "double", _to_double)
for _src in ("int", "uint", "double", "bool", "bytes", "string"):
    _decl("string", f"{_src}_to_string", _src, "string", _to_string)
_decl("bytes", "string_to_bytes", "string", "bytes", lambda s: s.encode("utf-8"))
_decl("bytes", "bytes_to_bytes", "bytes", "bytes", lambda b: b)
_decl("bool", "bool_to_bool", "bool", "bool", _to_bool)
_decl("bool", "string_to_bool", "string", "bool", _to_bool)
_decl("dyn", "to_dyn", "A", "dyn", lambda v: v)
_decl("type", "type", "A", "type(A)", _type_of)

# cel-go ext.Strings, version 2 (k8s.io/apiserver base.go)
_decl("charAt", "string_char_at_int", "string;int", "string", _char_at, member=True)
_decl("indexOf", "string_index_of_string", "string;string", "int", _index_of, member=True)
_decl("indexOf", "string_index_of_string_int", "string;string;int", "int", _index_of, member=True)
_decl("lastIndexOf", "string_last_index_of_string", "string;string", "int", _last_index_of, member=True)
_decl("lastIndexOf", "string_last_index_of_string_int", "string;string;int", "int", _last_index_of, member=True)
_decl("lowerAscii", "string_lower_ascii", "string", "string", lambda s: _ascii(s, False), member=True)
_decl("upperAscii", "string_upper_ascii", "string", "string", lambda s: _ascii(s, True), member=True)
_decl("replace", "string_replace_string_string", "string;string;string", "string", _replace, member=True)
_decl("replace", "string_replace_string_string_int", "string;string;string;int", "string", _replace, member=True)
_decl("split", "string_split_string", "string;string", "list(string)", _split, member=True)
_decl("split", "string_split_string_int", "string;string;int", "list(string)", _split, member=True)
_decl("substring", "string_substring_int", "string;int", "string", _substring, member=True)
_decl("substring", "string_substring_int_int", "string;int;int", "string", _substring, member=True)
_decl("trim", "string_trim", "string", "string", _trim, member=True)
_decl("join", "list_join", "list(string)", "string", _join, member=True)
_decl("join", "list_join_string", "list(string);string", "string", _join, member=True)

# Kubernetes regex library (pkg/cel/library/regex.go)
_decl("find", "string_find_string", "string;string", "string", _find, member=True)
_decl("findAll", "string_find_all_string", "string;string", "list(string)", _find_all, member=True)
_decl("findAll", "string_find_all_string_int", "string;string;int", "list(string)", _find_all, member=True)

# Kubernetes lists library, version 0 (pkg/cel/library/lists.go)
_decl("isSorted", "list_is_sorted", "list(A)", "bool", _is_sorted, member=True)
_decl("sum", "list_sum", "list(A)", "A", _list_sum, member=True)
_decl("min", "list_min", "list(A)", "A", lambda xs: _list_min_max(xs, False, "min"), member=True)
_decl("max", "list_max", "list(A)", "A", lambda xs: _list_min_max(xs, True, "max"), member=True)
_decl("indexOf", "list_index_of", "list(A);A", "int", lambda xs, v: _list_index(xs, v, False), member=True)
_decl("lastIndexOf", "list_last_index_of", "list(A);A", "int", lambda xs, v: _list_index(xs, v, True), member=True)

# cel-go ext.Sets
_decl("sets.contains", "list_sets_contains_list", "list(A);list(A)", "bool", _contains_all)
_decl("sets.equivalent", "list_sets_equivalent_list", "list(A);list(A)", "bool",
      lambda a, b: _contains_all(a, b) and _contains_all(b, a))
_decl("sets.intersects", "list_sets_intersects_list", "list(A);list(A)", "bool",
      lambda a, b: any(cel_equal(x, y) for x in a for y in b))

# Kubernetes quantity library
_decl("quantity", "string_to_quantity", "string", "Q", quantity_value)
_decl("isQuantity", "is_quantity_string", "string", "bool", is_quantity)
_decl("sign", "quantity_sign", "Q", "int", lambda q: q.sign())
_decl("isGreaterThan", "quantity_is_greater_than", "Q;Q", "bool", lambda a, b: a.compare(b) == 1, member=True)
_decl("isLessThan", "quantity_is_less_than", "Q;Q", "bool", lambda a, b: a.compare(b) == -1, member=True)
_decl("compareTo", "quantity_compare_to", "Q;Q", "int", lambda a, b: a.compare(b), member=True)
_decl("asApproximateFloat", "quantity_get_float", "Q", "double", lambda q: q.as_approximate_float(), member=True)
_decl("asInteger", "quantity_get_int", "Q", "int", _quantity_as_int, member=True)
_decl("isInteger", "quantity_is_integer", "Q", "bool", lambda q: q.as_int64() is not None, member=True)
_decl("add", "quantity_add", "Q;Q", "Q", lambda a, b: a.add(b), member=True)
_decl("add", "quantity_add_int", "Q;int", "Q", lambda a, b: a.add(from_int(b)), member=True)
_decl("sub", "quantity_sub", "Q;Q", "Q", lambda a, b: a.sub(b), member=True)
_decl("sub", "quantity_sub_int", "Q;int", "Q", lambda a, b: a.sub(from_int(b)), member=True)

# Kubernetes semver library, version 1 (the normalising forms arrived in 1.33/1.34)
_decl("semver", "string_to_semver", "string", "S", semver_value)
_NORMALIZE = "the normalising semver(s, true)/isSemver(s, true) (Kubernetes 1.34+)"
_decl("semver", "string_bool_to_semver", "string;bool", "S", semver_value, gate=_NORMALIZE)
_decl("isSemver", "is_semver_string", "string", "bool", is_semver)
_decl("isSemver", "is_semver_string_bool", "string;bool", "bool", is_semver, gate=_NORMALIZE)
_decl("isGreaterThan", "semver_is_greater_than", "S;S", "bool", lambda a, b: a.compare(b) == 1, member=True)
_decl("isLessThan", "semver_is_less_than", "S;S", "bool", lambda a, b: a.compare(b) == -1, member=True)
_decl("compareTo", "semver_compare_to", "S;S", "int", lambda a, b: a.compare(b), member=True)
_decl("major", "semver_major", "S", "int", lambda v: v.major, member=True)
_decl("minor", "semver_minor", "S", "int", lambda v: v.minor, member=True)
_decl("patch", "semver_patch", "S", "int", lambda v: v.patch, member=True)

# DRA: only with the DRAListTypeAttributes feature gate (alpha in 1.36)
_decl("includes", "dra_includes_dyn_dyn", "dyn;dyn", "bool", _includes, member=True, gate="DRAListTypeAttributes")


UNEVALUATED: dict[str, str] = {
    name: what
    for what, names in {
        "the URL library": "url isURL getScheme getHost getHostname getPort getEscapedPath getQuery",
        "the IP/CIDR library": "ip isIP cidr isCIDR containsIP containsCIDR masked prefixLength family "
        "isUnspecified isLoopback isLinkLocalMulticast isLinkLocalUnicast isGlobalUnicast ip.isCanonical",
        "the named-format library": "format.named validate",
        "optional types": "optional.of optional.none optional.ofNonZeroValue hasValue value orValue or",
        "timestamps and durations": "timestamp duration getDate getDayOfMonth getDayOfWeek getDayOfYear "
        "getFullYear getMonth getHours getMilliseconds getMinutes getSeconds",
        "the ext.Lists library": "slice flatten distinct reverse sort lists.range first last",
        "string formatting": "format strings.quote",
    }.items()
    for name in names.split()
}

QUALIFIED_PREFIXES = frozenset({"sets", "strings", "optional", "lists", "format", "ip"})


def overloads(name: str) -> Sequence[Overload]:
    return FUNCTIONS.get(name, ())


# --- runtime dispatch -----------------------------------------------------------------------


def _runtime_matches(param_type: t.CelType, value: object) -> bool:
    kind = param_type.kind
    if kind in ("param", "dyn"):
        return True
    if kind == "list":
        return isinstance(value, tuple)
    if kind == "map":
        return isinstance(value, CelMap)
    if kind == "object":
        return type_name(value) == param_type.name
    return type_name(value) == kind


def dispatch(candidates: Sequence[Overload], args: Sequence[object]) -> tuple[Overload, object]:
    """Call the first overload whose parameter kinds fit the runtime values."""
    for overload in candidates:
        if len(overload.params) != len(args):
            continue
        if all(_runtime_matches(p, a) for p, a in zip(overload.params, args, strict=True)):
            if overload.impl is None:
                raise Unsupported(f"{overload.function} is not evaluated by gpuguard")
            return overload, overload.impl(*args)
    raise no_such_overload()


# Results that are sized (for cost tracking): string, bytes, list, map.
def result_size(value: object) -> int:
    return size_of(value)


__all__ = [
    "FUNCTIONS",
    "QUALIFIED_PREFIXES",
    "UNEVALUATED",
    "Overload",
    "Semver",
    "compile_regex",
    "dispatch",
    "overloads",
]

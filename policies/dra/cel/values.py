"""Runtime values and their CEL semantics.

Values are plain Python objects: ``bool``, ``int`` (int64), :class:`Uint`, ``float``, ``str``,
``bytes``, ``None`` (null), ``tuple`` (list), :class:`CelMap`, :class:`TypeValue`, and the
Kubernetes types :class:`~policies.dra.cel.semver.Semver` and
:class:`~policies.dra.cel.quantity.Quantity`.

Equality follows cel-go (common/types/util.go ``Equal`` and each type's ``Equal``): null is
equal only to null; numbers compare across int, uint and double; other values of different
types are unequal, except that a Kubernetes Semver or Quantity on the *left* of ``==`` with a
value of another type is a "no such overload" error (their ``Equal`` returns
``MaybeNoSuchOverloadErr``), so ``attr.driverVersion == "570.124.06"`` fails at run time.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


class CelEvalError(Exception):
    """A CEL error value: it propagates, but ``&&``, ``||``, ``?:`` and macros may absorb it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CostLimitExceeded(Exception):
    """Evaluation cancelled, as cel-go's cost tracker does; never absorbed by CEL operators."""

    def __init__(self, limit: int) -> None:
        super().__init__("operation cancelled: actual cost limit exceeded")
        self.limit = limit


class Unsupported(Exception):
    """The expression reached something gpuguard does not evaluate (parity unknown)."""


INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1


def no_such_overload(what: str = "") -> CelEvalError:
    return CelEvalError("no such overload" + (f": {what}" if what else ""))


@dataclass(frozen=True, slots=True)
class Uint:
    value: int

    def __post_init__(self) -> None:
        if not 0 <= self.value <= UINT64_MAX:
            raise CelEvalError("unsigned integer overflow")


@dataclass(frozen=True, slots=True)
class TypeValue:
    name: str

    def __str__(self) -> str:
        return self.name


def check_int(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise CelEvalError("integer overflow")
    return value


class CelMap(Mapping[object, object]):
    """A CEL map: keys are bool, int, uint or string; 1, 1u and 1.0 are the same key.

    ``default`` makes missing keys read as that value instead of an error; compile.go wraps
    ``device.attributes`` and ``device.capacity`` this way so an unknown domain is an empty map.
    """

    __slots__ = ("_default", "_items")

    def __init__(self, items: Mapping[Any, object] | None = None, default: object = None) -> None:
        self._items: dict[object, tuple[object, object]] = {}  # internal key -> (key, value)
        self._default = default
        for key, value in (items or {}).items():
            self._items[key_of(key)] = (key, value)

    @classmethod
    def from_pairs(cls, pairs: list[tuple[object, object]]) -> CelMap:
        result = cls()
        for key, value in pairs:
            norm = key_of(key)
            if norm in result._items:
                raise CelEvalError(f"Failed with repeated key: {format_value(key)}")
            result._items[norm] = (key, value)
        return result

    def __getitem__(self, key: object) -> object:
        found = self._items.get(key if type(key) is str else key_of(key))
        if found is None:
            if self._default is not None:
                return self._default
            raise CelEvalError(f"no such key: {format_value(key, quote=False)}")
        return found[1]

    def has(self, key: object) -> bool:
        return (key if type(key) is str else key_of(key)) in self._items

    def __contains__(self, key: object) -> bool:
        return self.has(key)

    def __iter__(self) -> Iterator[object]:
        return (k for k, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)


def key_of(key: object) -> object:
    """The internal key: strings stand for themselves, numbers compare across int/uint/double."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return ("bool", key)
    if isinstance(key, int):
        return ("num", key)
    if isinstance(key, Uint):
        return ("num", key.value)
    if isinstance(key, float) and key.is_integer():
        return ("num", int(key))
    raise CelEvalError(f"unsupported key type: {type_name(key)}")


def type_name(value: object) -> str:
    """The CEL type name of a runtime value, as ``type()`` reports it."""
    # Local imports would create a cycle; the Kubernetes types carry their own name.
    name = getattr(value, "CEL_TYPE", None)
    if isinstance(name, str):
        return name
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, Uint):
        return "uint"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if value is None:
        return "null_type"
    if isinstance(value, tuple):
        return "list"
    if isinstance(value, CelMap):
        return "map"
    if isinstance(value, TypeValue):
        return "type"
    return type(value).__name__


def go_type_name(value: object) -> str:
    """cel-go's Go type name in "got 'types.Int', expected iterable type" messages."""
    name = getattr(value, "GO_TYPE", None)
    if isinstance(name, str):
        return name
    return {
        "bool": "types.Bool",
        "int": "types.Int",
        "uint": "types.Uint",
        "double": "types.Double",
        "string": "types.String",
        "bytes": "types.Bytes",
        "null_type": "types.Null",
        "type": "*types.Type",
    }.get(type_name(value), type_name(value))


def is_number(value: object) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, Uint | float)


def number(value: object) -> int | float:
    if isinstance(value, Uint):
        return value.value
    assert isinstance(value, int | float) and not isinstance(value, bool)
    return value


def cel_equal(left: object, right: object) -> bool:
    """``left == right``; raises :class:`CelEvalError` where cel-go returns an error."""
    if left is None or right is None:
        return left is None and right is None
    if getattr(left, "CEL_TYPE", None) is not None:
        if type(left) is not type(right):
            raise no_such_overload()
        return bool(left == right)
    if is_number(left):
        if not is_number(right):
            return False
        a, b = number(left), number(right)
        if (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
            return False
        return a == b
    if isinstance(left, bool | str | bytes):
        return type(left) is type(right) and left == right
    if isinstance(left, tuple):
        if not isinstance(right, tuple) or len(left) != len(right):
            return False
        return all(cel_equal(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, CelMap):
        if not isinstance(right, CelMap) or len(left) != len(right):
            return False
        return all(right.has(key) and cel_equal(left[key], right[key]) for key in left)
    if isinstance(left, TypeValue):
        return isinstance(right, TypeValue) and left.name == right.name
    return False


def compare(left: object, right: object) -> int:
    """-1, 0 or 1 for ``<``/``>``: same-type ordering plus cross-type numbers (Kubernetes
    enables ``cel.CrossTypeNumericComparisons``)."""
    if is_number(left) and is_number(right):
        a, b = number(left), number(right)
        if (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
            raise CelEvalError("NaN values cannot be ordered")
        return (a > b) - (a < b)
    if type(left) is type(right) and isinstance(left, bool | str | bytes):
        if isinstance(left, str):
            # Go compares UTF-8 bytes; Python compares code points.  Both orders agree.
            pass
        return (left > right) - (left < right)  # type: ignore[operator]
    raise no_such_overload(f"{type_name(left)} and {type_name(right)} cannot be ordered")


def format_value(value: object, quote: bool = True) -> str:
    if isinstance(value, str):
        return f'"{value}"' if quote else value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Uint):
        return f"{value.value}u"
    if value is None:
        return "null"
    if isinstance(value, tuple):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, CelMap):
        return "{" + ", ".join(f"{format_value(k)}: {format_value(value[k])}" for k in value) + "}"
    return str(value)


def size_of(value: object) -> int:
    """cel-go ``actualSize``: the size of sized values, 1 for everything else."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, bytes | tuple | CelMap):
        return len(value)
    return 1

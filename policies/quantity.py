"""Exact Kubernetes resource.Quantity parsing (k8s.io/apimachinery/pkg/api/resource/quantity.go).

Grammar (from quantity.go):
    <quantity>        ::= <signedNumber><suffix>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= m | "" | k | M | G | T | P | E   (plus n, u accepted by the parser)
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>
A bare "E" is the exa suffix; "E" followed by digits is an exponent.  Values are returned as
``fractions.Fraction`` so nothing is lost to floating point.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from policies import patterns

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_QUANTITY = patterns.compile(
    rf"^(?P<num>{_NUMBER})(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exp>[+-]?\d+)|(?P<dec>[numkMGTPE]?))$"
)
_CACHEABLE = frozenset({str, int, float})
_MAX_EXPONENT = 1000  # hostile inputs like 1e999999999 must not allocate huge integers
# Digits of the number part.  Kubernetes keeps a quantity exactly only up to int64 (19 digits)
# plus its scale (quantity.go, int64Amount / infDec); 64 digits is far beyond any real resource
# amount, and bounds the work: Fraction("9"*5000) would raise past Python's int-string limit.
_MAX_DIGITS = 64


class QuantityError(ValueError):
    pass


def parse_quantity(value: object) -> Fraction:
    """Parse a quantity given as a YAML/JSON scalar (str, int or float)."""
    if type(value) in _CACHEABLE:  # exact types: bool (an int subclass) is not a quantity
        return _parse_cached(value)
    return _parse(value)


@functools.lru_cache(maxsize=4096, typed=True)
def _parse_cached(value: str | int | float) -> Fraction:
    # Manifests repeat the same few quantities ("1", "8", "16Gi"); Fractions are immutable.
    return _parse(value)


def _parse(value: object) -> Fraction:
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        if value.bit_length() > 213:  # about 10**64
            raise QuantityError("an integer of more than 64 digits is not a quantity")
        return Fraction(value)
    if isinstance(value, float):
        # YAML `0.5` arrives as float; its repr is the shortest exact decimal string.
        text = repr(value)
        if "inf" in text or "nan" in text:
            raise QuantityError(f"{value!r} is not a quantity")
        return _parse(text)
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    text = value.strip()
    if len(text) > _MAX_DIGITS + 8:
        raise QuantityError(f"a {len(text)}-character string is not a quantity")
    m = _QUANTITY.match(text)
    if not m:
        raise QuantityError(f"{value!r} is not a valid quantity")
    number = Fraction(m.group("num"))
    if m.group("bin") is not None:
        return number * _BINARY[m.group("bin")]
    if m.group("exp") is not None:
        exp = int(m.group("exp"))
        if abs(exp) > _MAX_EXPONENT:
            raise QuantityError(f"{value!r}: exponent out of range")
        return number * Fraction(10) ** exp
    return number * _DECIMAL[m.group("dec") or ""]


def try_parse(value: object) -> Fraction | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


def is_whole(q: Fraction) -> bool:
    return q.denominator == 1


def format_quantity(q: Fraction) -> str:
    """Short human form used in messages and fixes: integers plainly, else milli or decimal."""
    if q.denominator == 1:
        return str(q.numerator)
    milli = q * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return str(float(q))


def whole(q: Fraction) -> int:
    """GPU counts are whole by API validation; a fractional value (invalid) is rounded up."""
    return q.numerator if q.denominator == 1 else math.ceil(q)


def scheduler_units(resource: str, q: Fraction) -> int:
    """The integer the scheduler compares: milli-CPU for cpu, else the value, both rounded up
    (framework Resource.Add uses Quantity.MilliValue for cpu and Quantity.Value otherwise)."""
    return whole(q * 1000) if resource == "cpu" else whole(q)

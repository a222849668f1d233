"""Kubernetes' CEL ``Quantity``: ``resource.Quantity`` exactly as apimachinery parses it.

Ported from k8s.io/apimachinery pkg/api/resource (quantity.go ``ParseQuantity`` and
``parseQuantityString``, suffix.go, amount.go, math.go @ eed236ce) and the CEL library
(k8s.io/apiserver pkg/cel/library/quantity.go).

The representation matters, not only the value: apimachinery keeps small values as an
``int64Amount`` (value × 10^scale) and everything else as an ``inf.Dec``.  ``isInteger()`` and
``asInteger()`` call ``AsInt64``, which fails for any ``inf.Dec`` and for any negative scale,
so ``quantity("1.5Ki").isInteger()`` and ``quantity("1.0").isInteger()`` are false in
Kubernetes although 1536 and 1 are integers.  This module keeps that distinction.

Values are kept as (mantissa, exponent) pairs and never expanded beyond a bound, so
``quantity("1e999999999")`` costs nothing; arithmetic that would need more than
:data:`MAX_DIGITS` digits raises :class:`~policies.dra.cel.values.Unsupported`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from policies import patterns
from policies.dra.cel.values import CelEvalError, Unsupported

_SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT = f"quantities must match the regular expression '{_SPLIT_RE}'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
MAX_DIGITS = 400  # bound on digits ever materialised
_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_INTEGER = patterns.compile(r"[+-]?[0-9]+")
_DEC_NUMBER = patterns.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?")


class QuantityError(ValueError):
    pass


@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """mantissa × 10^exponent; ``dec`` marks apimachinery's ``inf.Dec`` form."""

    mantissa: int
    exponent: int
    dec: bool = False

    CEL_TYPE = "kubernetes.Quantity"
    GO_TYPE = "cel.Quantity"

    def sign(self) -> int:
        return (self.mantissa > 0) - (self.mantissa < 0)

    def compare(self, other: Quantity) -> int:
        return _compare(self.mantissa, self.exponent, other.mantissa, other.exponent)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.compare(other) == 0

    def __hash__(self) -> int:
        if self.mantissa == 0:
            return 0
        return hash((self.sign(), self.exponent + _digits(self.mantissa)))

    def as_int64(self) -> int | None:
        """``Quantity.AsInt64``: None where apimachinery reports ``false``."""
        if self.dec:
            return None
        if self.exponent == 0:
            return self.mantissa
        if self.exponent < 0:
            return None
        return _scale_up_int64(self.mantissa, self.exponent)

    def as_approximate_float(self) -> float:
        """``AsApproximateFloat64``: base × math.Pow10(exponent)."""
        try:
            base = float(self.mantissa)
        except OverflowError:
            base = math.inf if self.mantissa > 0 else -math.inf
        if self.exponent == 0:
            return base
        return base * _pow10(self.exponent)

    def add(self, other: Quantity) -> Quantity:
        if not self.dec and not other.dec:
            summed = _int64_add(self, other)
            if summed is not None:
                return summed
        return _dec_add(self, other)

    def sub(self, other: Quantity) -> Quantity:
        return self.add(Quantity(-other.mantissa, other.exponent, other.dec))

    def __str__(self) -> str:
        return f"{self.mantissa}e{self.exponent}" if self.exponent else str(self.mantissa)


def from_int(value: int) -> Quantity:
    """``resource.NewQuantity(value, DecimalExponent)``."""
    return Quantity(value, 0)


def _pow10(n: int) -> float:
    if n < -323:
        return 0.0
    if n > 308:
        return math.inf
    return float(10.0**n)


def _in_int64(value: int) -> bool:
    return INT64_MIN <= value <= INT64_MAX


def _scale_up_int64(value: int, scale: int) -> int | None:
    if scale > 19 and value != 0:
        return None
    result = value * 10**scale
    return result if _in_int64(result) else None


def _int64_add(a: Quantity, b: Quantity) -> Quantity | None:
    """``int64Amount.Add``; None where it reports overflow."""
    if b.mantissa == 0:
        return a
    if a.mantissa == 0:
        return b
    if a.exponent == b.exponent:
        total = a.mantissa + b.mantissa
        return Quantity(total, a.exponent) if _in_int64(total) else None
    if a.exponent > b.exponent:
        scaled = _scale_up_int64(a.mantissa, a.exponent - b.exponent)
        if scaled is None or not _in_int64(scaled + b.mantissa):
            return None
        return Quantity(scaled + b.mantissa, b.exponent)
    scaled = _scale_up_int64(b.mantissa, b.exponent - a.exponent)
    if scaled is None or not _in_int64(a.mantissa + scaled):
        return None
    return Quantity(a.mantissa + scaled, a.exponent)


def _digits(value: int) -> int:
    return len(str(abs(value))) if value else 0


def _dec_add(a: Quantity, b: Quantity) -> Quantity:
    if a.mantissa == 0:
        return Quantity(b.mantissa, b.exponent, True)
    if b.mantissa == 0:
        return Quantity(a.mantissa, a.exponent, True)
    low = min(a.exponent, b.exponent)
    width = max(_digits(a.mantissa) + a.exponent, _digits(b.mantissa) + b.exponent) - low
    if width > MAX_DIGITS:
        raise Unsupported("quantity arithmetic across more than 400 digits")
    total = a.mantissa * 10 ** (a.exponent - low) + b.mantissa * 10 ** (b.exponent - low)
    return Quantity(total, low, True)


def _compare(m1: int, e1: int, m2: int, e2: int) -> int:
    s1, s2 = (m1 > 0) - (m1 < 0), (m2 > 0) - (m2 < 0)
    if s1 != s2:
        return 1 if s1 > s2 else -1
    if s1 == 0:
        return 0
    order1, order2 = _digits(m1) + e1, _digits(m2) + e2
    if order1 != order2:
        bigger = order1 > order2
        return (1 if bigger else -1) * s1
    low = min(e1, e2)  # same order of magnitude: the shift is bounded by the digit counts
    a: int = m1 * 10 ** (e1 - low)
    b: int = m2 * 10 ** (e2 - low)
    return (a > b) - (a < b)


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """``parseQuantityString``: (positive, value, num, denom, suffix)."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] != "-"
        pos += 1
    while True:  # strip leading zeros
        if pos >= end:
            return positive, "0", "0", "", ""
        if text[pos] != "0":
            break
        pos += 1
    i = pos
    while i < end and text[i] in _DIGITS:
        i += 1
    num = text[pos:i]
    if i >= end:
        return positive, text, num, "", ""
    pos = i
    num = num or "0"
    denom = ""
    if text[pos] == ".":
        pos += 1
        i = pos
        while i < end and text[i] in _DIGITS:
            i += 1
        denom = text[pos:i]
        if i >= end:
            return positive, text, num, denom, ""
        pos = i
    value = text[:pos]
    suffix_start = pos
    i = pos
    while i < end and text[i] in _SUFFIX_CHARS:
        i += 1
    if i >= end:
        return positive, value, num, denom, text[suffix_start:]
    pos = i
    if text[pos] in "+-":
        pos += 1
    i = pos
    while i < end and text[i] in _DIGITS:
        i += 1
    if i >= end:
        return positive, value, num, denom, text[suffix_start:]
    raise QuantityError(ERR_FORMAT)


def _interpret(suffix: str) -> tuple[int, int, str] | None:
    """suffix.go ``interpret``: (base, exponent, format) or None."""
    if suffix in _DECIMAL_SI:
        return 10, _DECIMAL_SI[suffix], "DecimalSI"
    if suffix in _BINARY_SI:
        return 2, _BINARY_SI[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        rest = suffix[1:]
        if not _INTEGER.fullmatch(rest):
            return None
        parsed = int(rest)
        if not _in_int64(parsed):
            return None
        wrapped = ((parsed + 2**31) % 2**32) - 2**31  # Go's int32(parsed)
        return 10, wrapped, "DecimalExponent"
    return None


def parse_quantity(text: str) -> Quantity:
    """``resource.ParseQuantity``; raises :class:`QuantityError` with apimachinery's message."""
    if not text:
        raise QuantityError(ERR_FORMAT)
    if text == "0":
        return Quantity(0, 0)
    positive, value, num, denom, suffix = _scan(text)
    interpreted = _interpret(suffix)
    if interpreted is None:
        raise QuantityError(ERR_SUFFIX)
    base, exponent, fmt = interpreted
    if abs(exponent) > MAX_DIGITS:
        raise Unsupported(f"quantity {text!r}: exponent beyond gpuguard's limits")

    mantissa, scale = 1, 0
    if fmt == "BinarySI":
        if exponent >= 0 and not denom:
            mantissa = 1 << exponent
            precision = 15 - len(num) - exponent * 3 // 10 - 1
        else:
            precision = -1
    else:
        scale = exponent
        precision = 18 - (len(num) + len(denom))
    if precision >= 0:
        scale -= len(denom)
        if scale >= -9:
            shifted = int(num + denom)
            result = shifted * mantissa
            if _in_int64(result):
                return Quantity(result if positive else -result, scale)

    match = _DEC_NUMBER.fullmatch(value)
    if match is None or not (match.group(2) or match.group(3)):
        raise QuantityError(ERR_NUMERIC)
    sign_text, int_part, frac_part = match.group(1), match.group(2), match.group(3) or ""
    if len(int_part) + len(frac_part) > MAX_DIGITS:
        raise Unsupported(f"quantity {text!r}: more digits than gpuguard models")
    unscaled = int((int_part + frac_part) or "0")
    exp10 = -len(frac_part)
    if base == 10:
        exp10 += exponent
    else:
        unscaled <<= exponent
    if sign_text == "-":
        unscaled = -unscaled
    if unscaled != 0 and exp10 < -9:  # inf.Dec.Round(amount, Nano, RoundUp): away from zero
        drop = -9 - exp10
        magnitude = abs(unscaled)
        magnitude = 1 if drop > _digits(magnitude) else -(-magnitude // 10**drop)
        unscaled = magnitude if unscaled > 0 else -magnitude
        exp10 = -9
    if fmt == "BinarySI" and _compare(abs(unscaled), exp10, INT64_MAX, 0) > 0:  # maxAllowed caps the magnitude
        unscaled, exp10 = (INT64_MAX if unscaled > 0 else -INT64_MAX), 0
    return Quantity(unscaled, exp10, True)


def quantity_value(text: str) -> Quantity:
    """``quantity()`` in CEL: a parse failure is a CEL error with apimachinery's message."""
    try:
        return parse_quantity(text)
    except QuantityError as exc:
        raise CelEvalError(str(exc)) from None


def is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True

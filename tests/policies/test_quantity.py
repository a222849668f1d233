from __future__ import annotations

from fractions import Fraction

import pytest

from policies.quantity import QuantityError, format_quantity, is_whole, parse_quantity

CASES = [
    (1, Fraction(1)),
    ("1", Fraction(1)),
    ("0", Fraction(0)),
    ("-1", Fraction(-1)),
    ("+2", Fraction(2)),
    (0.5, Fraction(1, 2)),
    ("0.5", Fraction(1, 2)),
    (".5", Fraction(1, 2)),
    ("1.", Fraction(1)),
    ("500m", Fraction(1, 2)),
    ("1000m", Fraction(1)),
    ("1500m", Fraction(3, 2)),
    ("100n", Fraction(1, 10**7)),
    ("5u", Fraction(5, 10**6)),
    ("1k", Fraction(1000)),
    ("1M", Fraction(10**6)),
    ("1G", Fraction(10**9)),
    ("1T", Fraction(10**12)),
    ("1P", Fraction(10**15)),
    ("1E", Fraction(10**18)),
    ("1Ki", Fraction(1024)),
    ("1Mi", Fraction(1024**2)),
    ("1.5Gi", Fraction(3 * 1024**3, 2)),
    ("1Ti", Fraction(1024**4)),
    ("1Pi", Fraction(1024**5)),
    ("1Ei", Fraction(1024**6)),
    ("1e3", Fraction(1000)),
    ("1E3", Fraction(1000)),
    ("12e-3", Fraction(12, 1000)),
    ("1e+2", Fraction(100)),
    ("63123440Ki", Fraction(63123440 * 1024)),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_parse(text: object, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


BAD: list[object] = ["", "abc", "1.2.3", "1KB", "1ki", "e3", "1 Gi", None, True, [], "1e99999", "--1", "0x10"]


@pytest.mark.parametrize("bad", BAD)
def test_rejects(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)


@pytest.mark.parametrize(("q", "whole"), [("2", True), ("2000m", True), ("0.5", False), ("1e-3", False), ("1Ki", True)])
def test_is_whole(q: str, whole: bool) -> None:
    assert is_whole(parse_quantity(q)) is whole


@pytest.mark.parametrize(("q", "text"), [("2", "2"), ("500m", "500m"), ("1.5", "1500m")])
def test_format(q: str, text: str) -> None:
    assert format_quantity(parse_quantity(q)) == text

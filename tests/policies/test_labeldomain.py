"""Label domains: the values a label can take on the nodes a pool may create."""

from __future__ import annotations

import pytest

from policies.labeldomain import LabelDomain, domains_from_requirements


def test_in_requirement_narrows_to_its_values() -> None:
    d = LabelDomain.unknown().narrow("In", ["g5", "p4d"])
    assert d is not None and d.possible_values() == frozenset({"g5", "p4d"}) and not d.may_be_absent
    assert d.narrow("In", ["g6"]) is None
    narrowed = d.narrow("In", ["g5", "g6"])
    assert narrowed is not None and narrowed.possible_values() == frozenset({"g5"})


def test_not_in_and_existence() -> None:
    d = LabelDomain.unknown().narrow("NotIn", ["spot"])
    assert d is not None and d.may_be_absent and d.possible_values() is None
    assert d.narrow("In", ["spot"]) is None
    assert d.narrow("In", ["on-demand"]) is not None
    present = d.narrow("Exists", [])
    assert present is not None and not present.may_be_absent
    assert present.narrow("DoesNotExist", []) is None
    assert LabelDomain.exactly("x").narrow("DoesNotExist", []) is None
    assert LabelDomain.absent().narrow("DoesNotExist", []) == LabelDomain.absent()
    assert LabelDomain.absent().narrow("Exists", []) is None


def test_numeric_bounds() -> None:
    d = LabelDomain.unknown().narrow("Gt", ["4"])
    assert d is not None
    assert d.narrow("In", ["5"]) is not None
    assert d.narrow("In", ["4"]) is None
    assert d.narrow("In", ["five"]) is None
    assert d.narrow("Lt", ["5"]) is None  # nothing is > 4 and < 5
    both = d.narrow("Lt", ["6"])
    assert both is not None and both.narrow("In", ["5"]) is not None
    assert d.narrow("Gt", ["x"]) is None  # an invalid requirement matches nothing, as upstream


@pytest.mark.parametrize(("operator", "values"), [("In", []), ("Bogus", ["a"]), ("Gt", ["1", "2"])])
def test_invalid_requirements_match_nothing(operator: str, values: list[str]) -> None:
    assert LabelDomain.unknown().narrow(operator, values) is None


def test_requirements_on_one_key_intersect() -> None:
    domains = domains_from_requirements(
        [
            {"key": "k", "operator": "In", "values": ["a", "b"]},
            {"key": "k", "operator": "NotIn", "values": ["a"]},
            {"key": "n", "operator": "Gt", "values": ["2"]},
        ]
    )
    k = domains["k"]
    assert k is not None and k.possible_values() == frozenset({"b"})
    contradictory = domains_from_requirements(
        [{"key": "k", "operator": "In", "values": ["a"]}, {"key": "k", "operator": "In", "values": ["b"]}]
    )
    assert contradictory["k"] is None


def test_describe() -> None:
    assert LabelDomain.unknown().narrow("In", ["b", "a"]).describe() == "{a, b}"  # type: ignore[union-attr]
    assert LabelDomain.unknown().narrow("Gt", ["4"]).describe() == "any value > 4"  # type: ignore[union-attr]
    assert LabelDomain.unknown().describe() == "any value or none"

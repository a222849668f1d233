"""Kubernetes' own DRA CEL test table, ported.

Source: kubernetes/dynamic-resource-allocation cel/compile_test.go
@ 3d036712930cdac0b0d46c4c21316a78147c551f (``testcases`` of ``TestCEL``).  Each case keeps
its name, expression, device, expected compile error, match result or match error, and the
expected worst-case cost (``expectCost``, the estimate the API server compares with
1,000,000).  Like the Go test, the actual cost must never exceed the estimate.

Attributes use the ResourceSlice JSON shape ({"int": 1}, {"strings": [...]}, ...).
Cases that only exercise Go-side plumbing (environment versions, feature-gate matrices)
are not ported; the feature-gated ``includes`` and ``allowMultipleAllocations`` cases run
with the gate on, as the Go test's StoredExpressions environment does.
"""

from __future__ import annotations

from typing import Any

import pytest

from policies.dra.cel import Features, compile_selector, prepare_device

DRIVER = "dra.example.com"
LIST_ATTRIBUTES = Features(consumable_capacity=True, list_type_attributes=True)
MAX_LIST = 48  # resourceapi.ResourceSliceMaxAttributeValuesPerDevice
LIST_TYPE_MAX = 64  # max(DeviceAttributeMaxValueLength, ResourceSliceMaxAttributeValuesPerDevice)


def case(
    expression: str,
    *,
    attributes: dict[str, Any] | None = None,
    capacity: dict[str, Any] | None = None,
    driver: str = DRIVER,
    match: bool | None = None,
    match_error: str | None = None,
    compile_error: str | None = None,
    cost: int | None = None,
) -> dict[str, Any]:
    return {
        "expression": expression,
        "attributes": attributes or {},
        "capacity": capacity or {},
        "driver": driver,
        "match": match,
        "match_error": match_error,
        "compile_error": compile_error,
        "cost": cost,
    }


def _values(n: int) -> list[str]:
    return [f"value-{i}" for i in range(n)]


CASES: dict[str, dict[str, Any]] = {
    "true": case("true", match=True, driver="", cost=0),
    "false": case("false", match=False, driver="", cost=0),
    "syntax-error": case("?!", compile_error="Syntax error"),
    "type-error": case("1", compile_error="must evaluate to bool or the unknown type, not int"),
    "runtime-error-lookup-identifier": case(
        'device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))',
        driver="",
        match_error="no such key: noSuchAttr",
        cost=6,
    ),
    "runtime-error-lookup-map": case(
        'device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))',
        driver="",
        match_error="no such key: noSuchAttr",
        cost=6,
    ),
    "domain-check-negative": case('"no-such-domain" in device.attributes', driver="", match=False, cost=3),
    "domain-check-positive": case(
        '"dra.example.com" in device.attributes',
        driver="",
        attributes={"dra.example.com/something": {"bool": True}},
        match=True,
        cost=3,
    ),
    "empty-driver-name": case('device.driver == ""', driver="", match=True, cost=2),
    "real-driver-name": case('device.driver == "dra.example.com"', match=True, cost=4),
    "driver-name-qualifier": case(
        'device.attributes["dra.example.com"].name', attributes={"name": {"bool": True}}, match=True, cost=4
    ),
    "driver-name-qualifier-map-lookup": case(
        'device.attributes["dra.example.com"]["name"]', attributes={"name": {"bool": True}}, match=True, cost=4
    ),
    "bind": case(
        'cel.bind(dra, device.attributes["dra.example.com"], dra.name)',
        attributes={"name": {"bool": True}},
        match=True,
        cost=15,
    ),
    "qualified-attribute-name": case(
        'device.attributes["other.example.com"].name',
        attributes={"other.example.com/name": {"bool": True}},
        match=True,
        cost=4,
    ),
    "bool": case('device.attributes["dra.example.com"].name', attributes={"name": {"bool": True}}, match=True, cost=4),
    "int": case(
        'device.attributes["dra.example.com"].name > 0', attributes={"name": {"int": 1}}, match=True, cost=5
    ),
    "string": case(
        'device.attributes["dra.example.com"].name == "fish"',
        attributes={"name": {"string": "fish"}},
        match=True,
        cost=5,
    ),
    "macro-exists-on-int": case(
        'device.attributes["dra.example.com"].name.exists(x, x > 0)',
        attributes={"name": {"int": 1}},
        match_error="got 'types.Int', expected iterable type",
        cost=5 + (3 + 3) * LIST_TYPE_MAX,
    ),
    "macro-exists-on-bool": case(
        'device.attributes["dra.example.com"].name.exists(x, x == true)',
        attributes={"name": {"bool": True}},
        match_error="got 'types.Bool', expected iterable type",
        cost=5 + (3 + 3) * LIST_TYPE_MAX,
    ),
    "macro-exists-on-string": case(
        'device.attributes["dra.example.com"].name.exists(x, x == "fish")',
        attributes={"name": {"string": "fish"}},
        match_error="got 'types.String', expected iterable type",
        cost=5 + (3 + 3) * LIST_TYPE_MAX,
    ),
    "list-result-type-causes-match-error": case(
        'device.attributes["dra.example.com"].names',
        attributes={"names": {"strings": ["fish", "bird"]}},
        match_error="CEL result of type list could not be converted to bool",
        cost=4,
    ),
    "includes-function-can-evaluate": case(
        'device.attributes["dra.example.com"].name.includes("fish")',
        attributes={"name": {"strings": ["fish", "bird"]}},
        match=True,
        cost=4 + MAX_LIST,
    ),
    "list-of-bool": case(
        'device.attributes["dra.example.com"].names.size() == 2',
        attributes={"names": {"bools": [True, False]}},
        match=True,
        cost=6,
    ),
    "list-of-int": case(
        'device.attributes["dra.example.com"].names.size() == 2',
        attributes={"names": {"ints": [1, 2]}},
        match=True,
        cost=6,
    ),
    "list-of-string": case(
        'device.attributes["dra.example.com"].names.size() == 2',
        attributes={"names": {"strings": ["fish", "bird"]}},
        match=True,
        cost=6,
    ),
    "list-of-semver": case(
        'device.attributes["dra.example.com"].names.size() == 2',
        attributes={"names": {"versions": ["1.0.0", "2.0.0"]}},
        match=True,
        cost=6,
    ),
    "macro-on-list-of-int": case(
        'device.attributes["dra.example.com"].names.exists(x, x > 0)',
        attributes={"names": {"ints": [1, 2]}},
        match=True,
        cost=5 + (3 + 3) * LIST_TYPE_MAX,
    ),
    "macro-on-list-of-string": case(
        'device.attributes["dra.example.com"].names.all(x, x != "")',
        attributes={"names": {"strings": ["fish", "bird"]}},
        match=True,
        cost=5 + (2 + 2) * LIST_TYPE_MAX,
    ),
    "macro-on-list-of-semver": case(
        'device.attributes["dra.example.com"].names.all(x, x.isGreaterThan(semver("0.0.1")))',
        attributes={"names": {"versions": ["1.0.0", "2.0.0"]}},
        match=True,
        cost=5 + (2 + 4) * LIST_TYPE_MAX,
    ),
    **{
        f"includes-function-on-{kind}-{shape}-{sign}": case(
            f'device.attributes["dra.example.com"].name.includes({probe})',
            attributes={"name": value},
            match=expected,
            cost=4 + MAX_LIST + extra,
        )
        for kind, shape, sign, probe, value, expected, extra in [
            ("bool", "scalar", "positive", "true", {"bool": True}, True, 0),
            ("bool", "scalar", "negative", "true", {"bool": False}, False, 0),
            ("bool", "list", "positive", "true", {"bools": [True, False]}, True, 0),
            ("bool", "list", "negative", "false", {"bools": [True, True]}, False, 0),
            ("int", "scalar", "positive", "1", {"int": 1}, True, 0),
            ("int", "scalar", "negative", "1", {"int": 2}, False, 0),
            ("int", "list", "positive", "1", {"ints": [1, 2]}, True, 0),
            ("int", "list", "negative", "3", {"ints": [1, 2]}, False, 0),
            ("string", "scalar", "positive", '"fish"', {"string": "fish"}, True, 0),
            ("string", "scalar", "negative", '"bird"', {"string": "fish"}, False, 0),
            ("string", "list", "positive", '"fish"', {"strings": ["fish", "bird"]}, True, 0),
            ("string", "list", "negative", '"cat"', {"strings": ["fish", "bird"]}, False, 0),
            ("semver", "scalar", "positive", 'semver("1.0.0")', {"version": "1.0.0"}, True, 1),
            ("semver", "scalar", "negative", 'semver("2.0.0")', {"version": "1.0.0"}, False, 1),
            ("semver", "list", "positive", 'semver("1.0.0")', {"versions": ["1.0.0", "2.0.0"]}, True, 1),
            ("semver", "list", "negative", 'semver("3.0.0")', {"versions": ["1.0.0", "2.0.0"]}, False, 1),
        ]
    },
    "includes-function-on-very-long-list-positive": case(
        f'device.attributes["dra.example.com"].name.includes("value-{MAX_LIST}")',
        attributes={"name": {"strings": _values(MAX_LIST)}},
        match=False,
        cost=4 + MAX_LIST,
    ),
    "includes-function-on-very-long-list-runtime-error": case(
        f'device.attributes["dra.example.com"].name.includes("value-{MAX_LIST + 1}")',
        attributes={"name": {"strings": _values(MAX_LIST + 1)}},
        match_error=f"'includes' function cannot be applied to lists longer than {MAX_LIST} values",
        cost=4 + MAX_LIST,
    ),
    "in-operator-on-list": case(
        '1 in device.attributes["dra.example.com"].names',
        attributes={"names": {"ints": [1, 2, 3]}},
        match=True,
        cost=4 + LIST_TYPE_MAX,
    ),
    "version": case(
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))',
        attributes={"name": {"version": "1.0.0"}},
        match=True,
        cost=6,
    ),
    "version_v": case(
        'device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)',
        attributes={"name": {"version": "1.0.0"}},
        match=True,
        cost=7,
    ),
    "macro-exists-on-version": case(
        'device.attributes["dra.example.com"].name.exists(x, x.isGreaterThan(semver("0.0.1")))',
        attributes={"name": {"version": "1.0.0"}},
        match_error="got 'cel.Semver', expected iterable type",
        cost=5 + (3 + 4) * LIST_TYPE_MAX,
    ),
    "quantity": case(
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        capacity={"name": {"value": "1Mi"}},
        match=True,
        cost=6,
    ),
    "check-positive": case(
        '"name" in device.capacity["dra.example.com"] && '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        capacity={"name": {"value": "1Mi"}},
        match=True,
        cost=10,
    ),
    "check-negative": case(
        '!("name" in device.capacity["dra.example.com"]) || '
        'device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))',
        driver="",
        match=True,
        cost=11,
    ),
    "all": case(
        """
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
""",
        attributes={
            "bool": {"bool": True},
            "int": {"int": 1},
            "string": {"string": "fish"},
            "version": {"version": "1.0.0"},
        },
        capacity={"quantity": {"value": "1Mi"}},
        match=True,
        cost=52,
    ),
    "many": case(
        'device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && '
        'device.attributes["dra.example.com"].c',
        attributes={"a": {"bool": True}, "b": {"bool": True}, "c": {"bool": True}},
        match=True,
        cost=12,
    ),
    "check_attribute_domains": case(
        'device.attributes.exists_one(x, x == "dra.example.com")',
        attributes={"services": {"string": "some_example_value"}},
        match=True,
        cost=164,
    ),
    "check_attribute_ids": case(
        'device.attributes["dra.example.com"].exists_one(x, x == "services")',
        attributes={"services": {"string": "some_example_value"}},
        match=True,
        cost=133,
    ),
    "split_attribute": case(
        'device.attributes["dra.example.com"].services.split("example").size() >= 2',
        attributes={"services": {"string": "some_example_value"}},
        match=True,
        cost=19,
    ),
    "regexp_attribute": case(
        'device.attributes["dra.example.com"].services.matches("[^a]?sym")',
        attributes={"services": {"string": "asymetric"}},
        match=True,
        cost=18,
    ),
    "check_capacity_domains": case(
        'device.capacity.exists_one(x, x == "dra.example.com")',
        capacity={"memory": {"value": "1Mi"}},
        match=True,
        cost=164,
    ),
    "check_capacity_ids": case(
        'device.capacity["dra.example.com"].exists_one(x, x == "memory")',
        capacity={"memory": {"value": "1Mi"}},
        match=True,
        cost=133,
    ),
    "allow_multiple_allocations_default": case("device.allowMultipleAllocations == false", match=True, cost=3),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_kubernetes_cel_case(name: str) -> None:
    c = CASES[name]
    selector = compile_selector(c["expression"], LIST_ATTRIBUTES)
    if c["compile_error"]:
        assert selector.issue is not None
        assert c["compile_error"] in selector.issue.detail
        return
    assert selector.issue is None, selector.issue
    assert selector.max_cost == c["cost"], f"estimated {selector.max_cost}, Kubernetes {c['cost']}"
    result = selector.evaluate(prepare_device(c["driver"], c["attributes"], c["capacity"]))
    assert selector.max_cost is not None and result.cost <= selector.max_cost, "the estimate must bound the actual cost"
    if c["match_error"]:
        assert result.matched is None
        assert result.error is not None and c["match_error"] in result.error
    else:
        assert result.error is None and result.unsupported is None, result
        assert result.matched is c["match"]


EXPENSIVE = (
    "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(y, "
    "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z2, "
    "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z3, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z4, "
    "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(z5, int('1'.find('[0-9]*')) < 100)))))))"
)


def test_expensive_case_is_too_complex_with_kubernetes_estimate() -> None:
    """compile_test.go "expensive" (from the VAP integration test): estimate 85,555,551."""
    selector = compile_selector(EXPENSIVE)
    assert selector.issue is not None and selector.issue.kind == "too-complex"
    assert "too complex, exceeds cost limit" in selector.issue.detail
    assert selector.max_cost == 85555551
    assert not selector.evaluable


def test_includes_is_undeclared_without_the_list_type_attributes_gate() -> None:
    """compile_test.go "includes-function-compilation-error" (NewExpressions, gate off)."""
    selector = compile_selector('device.attributes["dra.example.com"].attr.includes("fish")', Features())
    assert selector.issue is not None
    assert "undeclared reference to 'includes'" in selector.issue.detail


def test_allow_multiple_allocations_needs_consumable_capacity() -> None:
    """compile_test.go "allow_multiple_allocations_disabled"."""
    selector = compile_selector("device.allowMultipleAllocations == false", Features(consumable_capacity=False))
    assert selector.issue is not None
    assert "undefined field 'allowMultipleAllocations'" in selector.issue.detail
    enabled = compile_selector("device.allowMultipleAllocations == true")
    assert enabled.ok and enabled.parity_uncertain  # depends on a feature gate
    device = prepare_device(DRIVER, {}, {}, allow_multiple_allocations=True)
    assert enabled.evaluate(device).matched is True

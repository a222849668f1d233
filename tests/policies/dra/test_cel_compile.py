"""Compiling selectors: the API server's rejections, parity flags, references, hostile input."""

from __future__ import annotations

import inspect
import sys
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.dra.cel import MAX_LENGTH, compile_selector, prepare_device

GPU = "gpu.nvidia.com"

REJECTED = [
    # (expression, kind, text in the detail) — messages as cel-go's checker words them (checker/errors.go)
    ("device.atributes['gpu.nvidia.com'].type == 'gpu'", "type", "undefined field 'atributes'"),
    ("devices.driver == 'gpu.nvidia.com'", "type", "undeclared reference to 'devices' (in container '')"),
    ("device.driver == 1", "type", "found no matching overload for '_==_' applied to '(string, int)'"),
    ("device.driver > 1", "type", "found no matching overload for '_>_' applied to '(string, int)'"),
    ("device.driver.lowerAscii(1) == ''", "type", "found no matching overload for 'lowerAscii'"),
    ("device.driver.nosuch()", "type", "undeclared reference to 'nosuch' (in container '')"),
    ("device.driver.foo == 1", "type", "type 'string' does not support field selection"),
    ("device.driver.all(x, true)", "type", "cannot be range of a comprehension"),
    ("[1, 2].all(x, x)", "type", "found no matching overload for '_&&_' applied to '(bool, int)'"),
    ("[1, 'a'].size() == 2", "type", "expected type 'int' but found 'string'"),
    ("device.driver", "result-type", "must evaluate to bool or the unknown type, not string"),
    ("device.capacity['gpu.nvidia.com'].memory", "result-type", "not kubernetes.Quantity"),
    ("[true]", "result-type", "not list(bool)"),
    ("device.driver ==", "syntax", "Syntax error"),
    ("has(device)", "syntax", "invalid argument to has() macro"),
    ("[1].all(x.y, true)", "syntax", "argument must be a simple name"),
    ("9223372036854775808 > 0", "syntax", "invalid int literal"),
    ("'\\q' == ''", "syntax", "invalid escape sequence"),
    ("device.driver.matches('[')", "type", "invalid matches argument"),
]


@pytest.mark.parametrize(("expression", "kind", "text"), REJECTED)
def test_rejected_like_the_api_server(expression: str, kind: str, text: str) -> None:
    selector = compile_selector(expression)
    assert selector.issue is not None, expression
    assert selector.issue.kind == kind
    assert text in selector.issue.detail
    assert "Traceback" not in selector.issue.detail
    assert not selector.evaluable
    result = selector.evaluate(prepare_device(GPU, {}, {}))
    assert result.matched is None and result.error is not None


def test_compile_error_points_at_the_offending_token() -> None:
    selector = compile_selector("device.attributes['gpu.nvidia.com'].type == 'gpu' &&\n  device.drivr == 'x'")
    assert selector.issue is not None
    assert selector.issue.detail == (
        "compilation failed: ERROR: <input>:2:9: undefined field 'drivr'\n"
        " |   device.drivr == 'x'\n"
        " | ........^"
    )


def test_dyn_attributes_accept_any_operation_at_compile_time() -> None:
    """Attribute values are declared dyn: type mistakes surface only at run time."""
    selector = compile_selector(f"device.attributes['{GPU}'].driverVersion == '570.124.06'")
    assert selector.ok
    device = prepare_device(GPU, {"driverVersion": {"version": "570.124.6"}}, {})
    result = selector.evaluate(device)
    # cel.Semver.Equal(string) is MaybeNoSuchOverloadErr (k8s.io/apiserver pkg/cel/semver.go)
    assert result.matched is None and result.error == "no such overload"
    flipped = compile_selector(f"'570.124.06' == device.attributes['{GPU}'].driverVersion")
    assert flipped.evaluate(device).matched is False  # types.String.Equal: false for other types


def test_parity_uncertain_for_unmodelled_functions_and_syntax() -> None:
    url = compile_selector("isURL(device.attributes['example.com'].endpoint)")
    assert url.ok and not url.evaluable and url.parity_uncertain
    assert any("URL library" in r for r in url.uncertain_reasons)
    assert url.evaluate(prepare_device(GPU, {}, {})).unsupported is not None
    optional = compile_selector("device.attributes[?'example.com'].hasValue()")
    assert optional.ok and not optional.evaluable and optional.parity_uncertain
    two_var = compile_selector("device.attributes.all(k, v, k != '')")
    assert two_var.ok and not two_var.evaluable and two_var.parity_uncertain


def test_references_name_what_the_selector_reads() -> None:
    selector = compile_selector(
        "device.driver == 'gpu.nvidia.com' && "
        "device.attributes['gpu.nvidia.com'].index == 0 && "
        "has(device.attributes['gpu.nvidia.com'].uuid) && "
        "'profile' in device.attributes['gpu.nvidia.com'] && "
        "device.attributes['gpu.nvidia.com']['driverVersion'] == '570.124.06' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0 && "
        "cel.bind(g, device.attributes['gpu.nvidia.com'], g.productName.lowerAscii() == 'x')"
    )
    assert selector.ok
    refs = selector.references
    assert refs.reads_driver and refs.driver_literals == ("gpu.nvidia.com",)
    seen = {(r.kind, r.qualified_name, r.presence_test, r.compared_with, r.methods) for r in refs.attributes}
    assert seen == {
        ("attributes", "gpu.nvidia.com/index", False, ("int",), ()),
        ("attributes", "gpu.nvidia.com/uuid", True, (), ()),
        ("attributes", "gpu.nvidia.com/profile", True, (), ()),
        ("attributes", "gpu.nvidia.com/driverVersion", False, ("string",), ()),
        ("capacity", "gpu.nvidia.com/memory", False, (), ("compareTo",)),
        ("attributes", "gpu.nvidia.com/productName", False, (), ("lowerAscii",)),
    }


# --- hostile input ---------------------------------------------------------------------------


def test_too_long_is_rejected_before_parsing() -> None:
    text = "device.driver == '" + "x" * MAX_LENGTH + "'"
    started = time.perf_counter()
    selector = compile_selector(text)
    assert time.perf_counter() - started < 0.05
    assert selector.issue is not None and selector.issue.kind == "too-long"
    assert selector.issue.detail.startswith("Too long: may not be more than 10240 bytes")


def test_length_is_counted_in_bytes() -> None:
    """validation.go compares len(expression), i.e. UTF-8 bytes."""
    text = "device.driver == '" + "é" * 5200 + "'"
    assert len(text) <= MAX_LENGTH < len(text.encode())
    assert compile_selector(text).issue is not None


def test_longest_accepted_chain_compiles_and_evaluates_quickly() -> None:
    term = "device.driver == 'x' || "
    text = term * ((MAX_LENGTH - 4) // len(term)) + "true"
    assert len(text) <= MAX_LENGTH
    started = time.perf_counter()
    selector = compile_selector(text)
    assert selector.ok, selector.issue
    assert selector.evaluate(prepare_device(GPU, {}, {})).matched is True
    assert time.perf_counter() - started < 5


def test_nesting_beyond_cel_go_recursion_limit_is_a_syntax_error() -> None:
    selector = compile_selector("(" * 300 + "true" + ")" * 300)
    assert selector.issue is not None and "expression recursion limit exceeded: 250" in selector.issue.detail


def test_deep_trees_are_left_unevaluated_not_crashed() -> None:
    chain = compile_selector(" + ".join(["1"] * 2000) + " > 0")  # a 2000-level left-deep tree
    assert chain.ok and not chain.evaluable and chain.parity_uncertain
    lists = compile_selector("[" * 200 + "1" + "]" * 200 + " != []")
    assert lists.issue is None and not lists.evaluable


def test_exponential_comprehensions_are_too_complex() -> None:
    inner = "x"
    for _ in range(6):
        inner = f"[1, 2, 3, 4, 5, 6, 7, 8].exists(x, {inner})".replace("exists(x, x)", "exists(x, x > 0)")
    selector = compile_selector(inner)
    assert selector.issue is not None and selector.issue.kind == "too-complex"


def test_runtime_cost_limit_cancels_evaluation() -> None:
    selector = compile_selector("device.attributes['d'].n.all(a, device.attributes['d'].n.all(b, a >= 0 && b >= 0))")
    assert selector.ok
    device = prepare_device("d", {"n": {"ints": list(range(48))}}, {})
    result = selector.evaluate(device, cost_limit=500)
    assert result.matched is None and result.error == "operation cancelled: actual cost limit exceeded"
    assert selector.evaluate(device).matched is True


def test_comparing_list_attribute_elements_is_unbounded_in_kubernetes() -> None:
    """Iteration variables over attributes have no size in DRA's estimator (compile.go
    ``sizeEstimator``: an attribute value has no key/element type), so string comparisons between
    them are estimated as unbounded."""
    selector = compile_selector("device.attributes['d'].n.all(a, device.attributes['d'].n.all(b, a != b))")
    assert selector.issue is not None and selector.issue.kind == "too-complex"


def test_huge_quantities_cost_nothing() -> None:
    selector = compile_selector("quantity('1e999999999').isGreaterThan(quantity('1'))")
    assert selector.ok
    started = time.perf_counter()
    result = selector.evaluate(prepare_device(GPU, {}, {}))
    assert time.perf_counter() - started < 0.5
    assert result.matched is None and result.unsupported is not None


_ATOMS = st.sampled_from(
    [
        "device",
        ".",
        "attributes",
        "capacity",
        "driver",
        "[",
        "]",
        "(",
        ")",
        "'gpu.nvidia.com'",
        "x",
        "==",
        "&&",
        "||",
        "!",
        "1",
        "2.5",
        "true",
        "in",
        "has(",
        ".all(x,",
        ".exists(x,",
        "semver('1.2.3')",
        "quantity('1Gi')",
        ".compareTo(",
        ".lowerAscii()",
        "?",
        ":",
        ",",
        "cel.bind(y,",
        "'\\x41'",
        "\"",
        "{",
        "}",
        "+",
        "-",
        "/",
        "0",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ATOMS, max_size=40).map(" ".join))
def test_arbitrary_token_soup_never_raises(text: str) -> None:
    selector = compile_selector(text)
    device = prepare_device(GPU, {"type": {"string": "gpu"}, "driverVersion": {"version": "1.2.3"}}, {})
    result = selector.evaluate(device)
    assert selector.ok or selector.issue is not None or not selector.evaluable
    assert result.matched in (True, False, None)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_raises(text: str) -> None:
    selector = compile_selector(text)
    selector.evaluate(prepare_device(GPU, {}, {}))


def _at_depth(frames: int, call: Any) -> Any:
    return _at_depth(frames - 1, call) if frames else call()


def test_deep_caller_stacks_degrade_to_unknown_not_tracebacks() -> None:
    """Selectors near the nesting bound, checked from a caller with only ~100 frames to spare."""
    spare = sys.getrecursionlimit() - len(inspect.stack(0)) - 100
    text = "[" * 140 + "2" + "]" * 140 + " != []"
    selector = _at_depth(spare, lambda: compile_selector(text + " "))
    assert selector.issue is None and not selector.evaluable and selector.parity_uncertain
    shallow = compile_selector(text)
    assert shallow.ok and shallow.evaluable
    result = _at_depth(spare, lambda: shallow.evaluate(prepare_device(GPU, {}, {})))
    assert result.unsupported == "too deeply nested to evaluate here" and result.error is None

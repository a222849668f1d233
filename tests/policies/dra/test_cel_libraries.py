"""Kubernetes' CEL semver and quantity libraries and the string, list, set and regex functions.

Ported tables:
- kubernetes/apiserver pkg/cel/library/semver_test.go @ 24a394e516bfda066d7e2221d7d92c052de27c54
- kubernetes/apiserver pkg/cel/library/quantity_test.go @ 24a394e516bfda066d7e2221d7d92c052de27c54
- the examples in the doc comments of kubernetes/apiserver pkg/cel/library/{quantity,semverlib}.go
  and google/cel-go ext/strings.go @ 14f6746a286f198c2a976749331b7bf4aa2d4bd2

Each expression is wrapped as ``(<expr>) == <expected>`` or evaluated directly when boolean, so
the public selector API is what is tested.
"""

from __future__ import annotations

import pytest

from policies.dra.cel import compile_selector, prepare_device
from policies.dra.cel.quantity import parse_quantity
from policies.dra.cel.semver import parse, parse_normalized

NO_DEVICE = prepare_device("dra.example.com", {}, {})


def evaluate(expression: str) -> tuple[bool | None, str | None, str | None]:
    selector = compile_selector(expression)
    if selector.issue is not None:
        return None, None, selector.issue.detail
    result = selector.evaluate(NO_DEVICE)
    return result.matched, result.error, None


# name, expression (boolean), runtime error substring, compile error substring
SEMVER = [
    ("parse", 'semver("1.2.3") == semver("1.2.3")', None, None),
    ("parseInvalidVersion", 'semver("v1.0") == semver("1.0.0")', "No Major.Minor.Patch elements found", None),
    ("isSemver", 'isSemver("1.2.3-beta.1+build.1")', None, None),
    ("isSemver_empty_false", '!isSemver("")', None, None),
    ("isSemver_v_prefix_false", '!isSemver("v1.0.0")', None, None),
    ("isSemver_v_leading_whitespace_false", '!isSemver(" 1.0.0")', None, None),
    ("isSemver_v_contains_whitespace_false", '!isSemver("1. 0.0")', None, None),
    ("isSemver_v_trailing_whitespace_false", '!isSemver("1.0.0 ")', None, None),
    ("isSemver_leading_zeros_false", '!isSemver("01.01.01")', None, None),
    ("isSemver_major_only_false", '!isSemver("1")', None, None),
    ("isSemver_major_minor_only_false", '!isSemver("1.1")', None, None),
    ("isSemver_empty_normalize_false", '!isSemver("", true)', None, None),
    ("isSemver_v_leading_whitespace_normalize_false", '!isSemver(" 1.0.0", true)', None, None),
    ("isSemver_v_contains_whitespace_normalize_false", '!isSemver("1. 0.0", true)', None, None),
    ("isSemver_v_trailing_whitespace_normalize_false", '!isSemver("1.0.0 ", true)', None, None),
    ("isSemver_v_prefix_normalize_true", 'isSemver("v1.0.0", true)', None, None),
    ("isSemver_leading_zeros_normalize_true", 'isSemver("01.01.01", true)', None, None),
    ("isSemver_major_only_normalize_true", 'isSemver("1", true)', None, None),
    ("isSemver_major_minor_only_normalize_true", 'isSemver("1.1", true)', None, None),
    ("isSemver_noOverload", "isSemver([1, 2, 3])", None, "found no matching overload for 'isSemver' applied to"),
    ("equality_normalize", 'semver("v01.01", true) == semver("1.1.0")', None, None),
    ("equality_reflexivity", 'semver("1.2.3") == semver("1.2.3")', None, None),
    ("inequality", '!(semver("1.2.3") == semver("1.0.0"))', None, None),
    ("semver_less", 'semver("1.0.0").isLessThan(semver("1.2.3"))', None, None),
    ("semver_less_false", '!semver("1.0.0").isLessThan(semver("1.0.0"))', None, None),
    ("semver_greater", 'semver("1.2.3").isGreaterThan(semver("1.0.0"))', None, None),
    ("semver_greater_false", '!semver("1.0.0").isGreaterThan(semver("1.0.0"))', None, None),
    ("compare_equal", 'semver("1.2.3").compareTo(semver("1.2.3")) == 0', None, None),
    ("compare_less", 'semver("1.0.0").compareTo(semver("1.2.3")) == -1', None, None),
    ("compare_greater", 'semver("1.2.3").compareTo(semver("1.0.0")) == 1', None, None),
    ("major", 'semver("1.2.3").major() == 1', None, None),
    ("minor", 'semver("1.2.3").minor() == 2', None, None),
    ("patch", 'semver("1.2.3").patch() == 3', None, None),
    # semverlib.go doc comments
    ("doc_prerelease", 'semver("0.1.0-alpha.1").isLessThan(semver("0.1.0"))', None, None),
    ("doc_200K", 'semver("200K") == semver("1.0.0")', "No Major.Minor.Patch elements found", None),
    ("doc_normalize_v", 'semver("v1.0.0", true) == semver("1.0.0")', None, None),
    ("doc_normalize_patch", 'semver("1.0", true) == semver("1.0.0")', None, None),
    ("doc_normalize_zeros", 'semver("01.01.01", true) == semver("1.1.1")', None, None),
]


@pytest.mark.parametrize(("name", "expression", "runtime_error", "compile_error"), SEMVER, ids=[c[0] for c in SEMVER])
def test_semver_library(name: str, expression: str, runtime_error: str | None, compile_error: str | None) -> None:
    matched, error, compile_issue = evaluate(expression)
    if compile_error:
        assert compile_issue is not None and compile_error in compile_issue
    elif runtime_error:
        assert error is not None and runtime_error in error
    else:
        assert (matched, error, compile_issue) == (True, None, None)


QUANTITY = [
    ("parse", 'quantity("12Mi") == quantity("12582912")', None, None),
    ("parseInvalidSuffix", 'quantity("10Mo") == quantity("1")', "quantities must match the regular expression", None),
    ("parseInvalidSuffixPassesRegex", 'quantity("10Mm") == quantity("1")', "unable to parse quantity's suffix", None),
    ("isQuantity", 'isQuantity("20")', None, None),
    ("isQuantity_megabytes", 'isQuantity("20M")', None, None),
    ("isQuantity_mebibytes", 'isQuantity("20Mi")', None, None),
    ("isQuantity_invalidSuffix", '!isQuantity("20Mo")', None, None),
    ("isQuantity_passingRegex", '!isQuantity("10Mm")', None, None),
    ("isQuantity_noOverload", "isQuantity([1, 2, 3])", None, "found no matching overload for 'isQuantity' applied to"),
    ("equality_reflexivity", 'quantity("200M") == quantity("200M")', None, None),
    ("equality_symmetry", 'quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")', None, None),
    (
        "equality_transitivity",
        'quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && '
        'quantity("0.002G") == quantity("2000k")',
        None,
        None,
    ),
    ("inequality", '!(quantity("200M") == quantity("0.3G"))', None, None),
    ("quantity_less", 'quantity("50M").isLessThan(quantity("50Mi"))', None, None),
    ("quantity_less_obvious", 'quantity("50M").isLessThan(quantity("100M"))', None, None),
    ("quantity_less_false", '!quantity("100M").isLessThan(quantity("50M"))', None, None),
    ("quantity_greater", 'quantity("50Mi").isGreaterThan(quantity("50M"))', None, None),
    ("quantity_greater_obvious", 'quantity("150Mi").isGreaterThan(quantity("100Mi"))', None, None),
    ("quantity_greater_false", '!quantity("50M").isGreaterThan(quantity("100M"))', None, None),
    ("compare_equal", 'quantity("200M").compareTo(quantity("0.2G")) == 0', None, None),
    ("compare_less", 'quantity("50M").compareTo(quantity("50Mi")) == -1', None, None),
    ("compare_greater", 'quantity("50Mi").compareTo(quantity("50M")) == 1', None, None),
    ("add_quantity", 'quantity("50k").add(quantity("20")) == quantity("50.02k")', None, None),
    ("add_int", '!quantity("50k").add(20).isLessThan(quantity("50020"))', None, None),
    ("sub_quantity", 'quantity("50k").sub(quantity("20")) == quantity("49.98k")', None, None),
    ("sub_int", 'quantity("50k").sub(20) == quantity("49980")', None, None),
    ("arith_chain_1", 'quantity("50k").add(20).sub(quantity("100k")).asInteger() == -49980', None, None),
    ("arith_chain", 'quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger() == 20', None, None),
    ("as_integer", 'quantity("50k").asInteger() == 50000', None, None),
    (
        "as_integer_error",
        'quantity("9999999999999999999999999999999999999G").asInteger() == 1',
        "cannot convert value to integer",
        None,
    ),
    ("is_integer_false", '!quantity("9999999999999999999999999999999999999G").isInteger()', None, None),
    ("is_integer", 'quantity("50").isInteger()', None, None),
    ("as_float", 'quantity("50.703k").asApproximateFloat() == 50703.0', None, None),
    (
        "add_does_not_mutate_receiver",
        '[quantity("9999999999999999999999999999999999999")].all(x, '
        'x.add(quantity("1")).compareTo(x.add(quantity("2"))) == -1)',
        None,
        None,
    ),
    # quantity.go doc comments
    ("doc_isQuantity_comma", '!isQuantity("1,3G")', None, None),
    ("doc_isQuantity_k", 'isQuantity("10000k")', None, None),
    ("doc_200K", '!isQuantity("200K")', None, None),
    ("doc_sub_float", 'quantity("50k").sub(20000).asApproximateFloat() == 30000.0', None, None),
    ("doc_sign", 'sign(quantity("-1Mi")) == -1 && sign(quantity("0")) == 0', None, None),
    # sign is a global function only (quantity_sign is cel.Overload, not MemberOverload)
    ("sign_member", 'quantity("1").sign() == 1', None, "found no matching overload for 'sign'"),
]


@pytest.mark.parametrize(
    ("name", "expression", "runtime_error", "compile_error"), QUANTITY, ids=[c[0] for c in QUANTITY]
)
def test_quantity_library(name: str, expression: str, runtime_error: str | None, compile_error: str | None) -> None:
    matched, error, compile_issue = evaluate(expression)
    if compile_error:
        assert compile_issue is not None and compile_error in compile_issue
    elif runtime_error:
        assert error is not None and runtime_error in error
    else:
        assert (matched, error, compile_issue) == (True, None, None)


def test_quantity_representation_follows_apimachinery() -> None:
    """AsInt64 fails for inf.Dec and negative scales (apimachinery quantity.go, amount.go)."""
    assert parse_quantity("80Gi").as_int64() == 80 * 2**30
    assert parse_quantity("1.5Ki").as_int64() is None  # BinarySI with a fraction: inf.Dec
    assert parse_quantity("1.0").as_int64() is None  # int64Amount{10, -1}
    assert parse_quantity("1Ei").as_int64() is None  # precision too small for the int64 fast path
    assert parse_quantity("1Ti").as_int64() == 2**40
    assert parse_quantity("1e-12").compare(parse_quantity("1n")) == 0  # rounded up to the nano
    assert parse_quantity("9Ei").compare(parse_quantity("9223372036854775807")) == 0  # BinarySI is capped


def test_blang_semver_parse_rules() -> None:
    """blang/semver v4 semver_test.go formatting and comparison fixtures (@ 4487282d)."""
    assert str(parse("1.2.3-alpha.b.3+build.1")) == "1.2.3-alpha.b.3+build.1"
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11"]
    ordered += ["1.0.0-rc.1", "1.0.0"]
    versions = [parse(v) for v in ordered]
    assert all(versions[i].compare(versions[i + 1]) == -1 for i in range(len(versions) - 1))
    assert parse("1.0.0+build.1") == parse("1.0.0+build.2")  # build metadata has no precedence
    assert str(parse_normalized("v01.02")) == "1.2.0"
    for bad in ("1.2", "1.2.3.", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.3+", "a.b.c"):
        with pytest.raises(ValueError):
            parse(bad)


STRINGS = [
    # cel-go ext/strings.go doc examples (StringsVersion 2, as Kubernetes configures it)
    "'hello'.charAt(4) == 'o'",
    "'hello'.charAt(5) == ''",
    "'hello mellow'.indexOf('') == 0",
    "'hello mellow'.indexOf('ello') == 1",
    "'hello mellow'.indexOf('jello') == -1",
    "'hello mellow'.indexOf('', 2) == 2",
    "'hello mellow'.indexOf('ello', 2) == 7",
    "'hello mellow'.indexOf('ello', 20) == -1",
    "[].join() == ''",
    "[].join('/') == ''",
    "'hello mellow'.lastIndexOf('') == 12",
    "'hello mellow'.lastIndexOf('ello') == 7",
    "'hello mellow'.lastIndexOf('jello') == -1",
    "'hello mellow'.lastIndexOf('ello', 6) == 1",
    "'hello mellow'.lastIndexOf('ello', 20) == -1",
    "'TacoCat'.lowerAscii() == 'tacocat'",
    "'TacoCÆt Xii'.lowerAscii() == 'tacocÆt xii'",
    "'hello hello'.replace('he', 'we') == 'wello wello'",
    "'hello hello'.replace('he', 'we', -1) == 'wello wello'",
    "'hello hello'.replace('he', 'we', 1) == 'wello hello'",
    "'hello hello'.replace('he', 'we', 0) == 'hello hello'",
    "'hello hello'.replace('', '_') == '_h_e_l_l_o_ _h_e_l_l_o_'",
    "'hello hello'.replace('h', '') == 'ello ello'",
    "'hello hello hello'.split(' ') == ['hello', 'hello', 'hello']",
    "'hello hello hello'.split(' ', 0) == []",
    "'hello hello hello'.split(' ', 1) == ['hello hello hello']",
    "'hello hello hello'.split(' ', 2) == ['hello', 'hello hello']",
    "'hello hello hello'.split(' ', -1) == ['hello', 'hello', 'hello']",
    "'tacocat'.substring(4) == 'cat'",
    "'tacocat'.substring(0, 4) == 'taco'",
    "'  \\ttrim\\n    '.trim() == 'trim'",
    "'TacoCat'.upperAscii() == 'TACOCAT'",
    "'TacoCÆt Xii'.upperAscii() == 'TACOCÆT XII'",
    # standard library
    "'hello'.size() == 5 && size('héllo') == 5",
    "'hello'.startsWith('he') && 'hello'.endsWith('lo') && 'hello'.contains('ell')",
    "'NVIDIA H100 80GB HBM3'.lowerAscii().matches('^.*h100.*$')",
    "matches('abc', 'b')",
    "int('42') == 42 && uint(42) == 42u && double(1) == 1.0 && string(42) == '42'",
    "1 < 1.5 && 2u > 1 && 1.0 <= 1",  # Kubernetes enables cross-type numeric comparisons
    "dyn(1) == 1.0 && dyn('a') != 1",  # heterogeneous equality at run time
    "7 / 2 == 3 && -7 / 2 == -3 && -7 % 3 == -1",  # Go truncates toward zero
    "[1, 2, 3].map(x, x * 2) == [2, 4, 6] && [1, 2, 3].filter(x, x > 1) == [2, 3]",
    "[1, 2, 3].map(x, x > 1, x * 10) == [20, 30]",
    "[1, 2, 3].exists_one(x, x == 2) && ![1, 2, 2].exists_one(x, x == 2)",
    "{'a': 1, 'b': 2}.all(k, k in ['a', 'b'])",
    "cel.bind(x, [1, 2], x.size() == 2)",
    # Kubernetes lists library (version 0) and regex library
    "[1, 2, 3].isSorted() && [3, 1].sum() == 4 && [3, 1].min() == 1 && [3, 1].max() == 3",
    "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2",
    "'abc 123'.find('[0-9]+') == '123' && 'a1b22'.findAll('[0-9]+') == ['1', '22']",
    "'a1b22c333'.findAll('[0-9]+', 2) == ['1', '22']",
    # cel-go ext.Sets
    "sets.contains([1, 2, 3], [2, 3]) && sets.equivalent([1, 2], [2, 1]) && sets.intersects([1], [1, 2])",
]


@pytest.mark.parametrize("expression", STRINGS)
def test_function_library(expression: str) -> None:
    assert evaluate(expression) == (True, None, None)


RUNTIME_ERRORS = [
    ("'hello'.charAt(-1) == ''", "index out of range: -1"),
    ("'hello mellow'.indexOf('ello', -1) == 1", "index out of range: -1"),
    ("'tacocat'.substring(-1) == ''", "index out of range: -1"),
    ("'tacocat'.substring(2, 1) == ''", "invalid substring range. start: 2, end: 1"),
    ("1 / 0 == 1", "division by zero"),
    ("9223372036854775807 + 1 > 0", "integer overflow"),
    ("[1, 2][5] == 1", "index out of range: 5"),
    ("{'a': 1}['b'] == 1", "no such key: b"),
    ("[].min() == 1", "min called on empty list"),
    ("int('x') == 1", "invalid syntax"),
]


@pytest.mark.parametrize(("expression", "message"), RUNTIME_ERRORS)
def test_runtime_errors(expression: str, message: str) -> None:
    matched, error, compile_issue = evaluate(expression)
    assert compile_issue is None and matched is None
    assert error is not None and message in error


def test_errors_are_absorbed_like_cel_go() -> None:
    """&&, || and the quantifiers are commutative with respect to errors (cel-spec langdef)."""
    assert evaluate("1 / 0 == 1 && false") == (False, None, None)
    assert evaluate("false && 1 / 0 == 1") == (False, None, None)
    assert evaluate("1 / 0 == 1 || true") == (True, None, None)
    assert evaluate("[0, 1].exists(x, 1 / x == 1)") == (True, None, None)
    assert evaluate("[0, 1].all(x, 1 / x == 5)") == (False, None, None)
    matched, error, _ = evaluate("[0, 1].all(x, 1 / x == 1)")
    assert matched is None and error == "division by zero"


def test_unbounded_estimates_make_selectors_too_complex() -> None:
    """Kubernetes' estimator has no size for list elements without a declared path or for type
    values, so ``join()`` on a non-empty list and comparing ``type()`` results are estimated as
    unbounded and rejected (library/cost.go ``join``, checker/cost.go ``Equals``)."""
    for expression in ("['hello', 'mellow'].join() == 'hellomellow'", "type(1) == int"):
        selector = compile_selector(expression)
        assert selector.issue is not None and selector.issue.kind == "too-complex"
        assert "estimated cost unbounded" in selector.issue.detail
    from policies.dra.cel.library import _join

    assert _join(("hello", "mellow"), " ") == "hello mellow"

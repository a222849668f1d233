"""The NVIDIA runtime's requirement check, against the behaviour of the C and Go code it ports.

Cases marked "toolkit:" are nvidia-container-toolkit's own unit tests
(internal/config/image/cuda_image_test.go @d34b3046: TestParseMajorMinorVersionValid/Invalid,
TestGetRequirements), ported.  libnvidia-container has no unit tests for src/cli/dsl.c; the dsl
cases below follow its control flow line by line (comments name the line of behaviour tested).
"""

from __future__ import annotations

import pytest

from policies.cuda.require import (
    EXPR_MAX,
    INVALID,
    UNKNOWN,
    Cmp,
    Device,
    Environment,
    Outcome,
    Requirements,
    Start,
    check,
    compare_string,
    compare_version,
    cuda_floor,
    evaluate,
    parse_atom,
    parse_bool,
    parse_major_minor,
    requirements,
)

BRANDS_12_8 = ["unknown", "grid", "tesla", "nvidia", "quadro", "quadrortx", "nvidiartx", "vapps", "vpc", "vcs", "vws",
               "cloudgaming"]


def nvidia_cuda_requirement(floor: str, branches: list[int], brands: list[str] = BRANDS_12_8) -> str:
    """The shape of nvidia/cuda images' NVIDIA_REQUIRE_CUDA (shared/reference/domain-facts.md B.2)."""
    terms = [f"cuda>={floor}"]
    terms += [f"brand={b},driver>={n},driver<{n + 1}" for n in branches for b in brands]
    return " ".join(terms)


# --- dsl_compare_version ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("v1", "cmp", "v2", "expected"),
    [
        ("470.256.02", Cmp.LESS, "471", 1),  # numeric per component, not lexical
        ("470.256.02", Cmp.GREATER_EQUAL, "470", 1),  # extra components make v1 greater
        ("470", Cmp.LESS, "470.256.02", 1),
        ("12.4", Cmp.EQUAL, "12.4.0", 1),  # trailing ".0" is skipped by strspn(".0")
        ("12.4.0.0", Cmp.EQUAL, "12.4", 1),
        ("12.4.01", Cmp.GREATER, "12.4", 1),  # "01" → strspn skips the "0", "1" remains
        ("12..4", Cmp.EQUAL, "12.4", 1),  # runs of dots are skipped
        ("12.2", Cmp.GREATER_EQUAL, "12.8", 0),
        ("12.8", Cmp.GREATER_EQUAL, "12.8", 1),
        ("12.9", Cmp.LESS_EQUAL, "12.8", 0),
        ("12.8", Cmp.NOT_EQUAL, "12.8.0", 0),
        ("12.8", Cmp.NOT_EQUAL, "12.8.1", 1),
        ("13", Cmp.NOT_EQUAL, "12", 1),
        ("13", Cmp.EQUAL, "12", 0),
        ("", Cmp.EQUAL, "0.0", 1),  # both run out at once
        ("12.4a", Cmp.EQUAL, "12.4", INVALID),  # strspn("0123456789.") check
        ("12.4", Cmp.EQUAL, "v12.4", INVALID),
        ("12", Cmp.EQUAL, "-12", INVALID),
        (".5", Cmp.EQUAL, "0.5", INVALID),  # strtoumax parses nothing at '.'
        ("18446744073709551615", Cmp.EQUAL, "1", INVALID),  # UINTMAX_MAX
        ("99999999999999999999999", Cmp.EQUAL, "1", INVALID),  # overflow returns UINTMAX_MAX
    ],
)
def test_compare_version(v1: str, cmp: Cmp, v2: str, expected: int) -> None:
    assert compare_version(v1, cmp, v2) == expected


def test_compare_string_is_case_insensitive_equality_only() -> None:
    assert compare_string("Tesla", Cmp.EQUAL, "tesla") == 1
    assert compare_string("Tesla", Cmp.NOT_EQUAL, "TESLA") == 0
    assert compare_string("Unknown", Cmp.EQUAL, "grid") == 0
    assert compare_string("Tesla", Cmp.LESS, "tesla") == INVALID


# --- evaluate_rule parsing --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "parsed"),
    [
        ("cuda>=12.8", ("cuda", Cmp.GREATER_EQUAL, "12.8")),
        ("driver<471", ("driver", Cmp.LESS, "471")),
        ("brand=tesla", ("brand", Cmp.EQUAL, "tesla")),
        ("CUDA>=12", ("CUDA", Cmp.GREATER_EQUAL, "12")),  # str_case_equal on the name
        ("arch!=8.0", ("arch", Cmp.NOT_EQUAL, "8.0")),
        ("arch!8.0", ("arch", Cmp.NOT_EQUAL, "8.0")),  # strncmp("!", "!=", 1) matches
        ("driver<=470", ("driver", Cmp.LESS_EQUAL, "470")),
        ("cuda>=12<13", ("cuda", Cmp.GREATER_EQUAL, "12<13")),  # the value is the rest
        ("cuda==12", None),  # no operator starts with "=="
        ("cuda=>12", None),
        (">=12", None),  # empty name
        ("cuda", None),  # no operator
        ("cuda>=", None),  # empty value
        ("memory>=8", None),  # not a rule
    ],
)
def test_parse_atom(expr: str, parsed: tuple[str, Cmp, str] | None) -> None:
    atom = parse_atom(expr)
    assert (None if atom is None else (atom.prop, atom.cmp, atom.value)) == parsed


# --- dsl_evaluate ------------------------------------------------------------------------------

R535 = Device(cuda="12.2", driver="535.129.03", arch="8.0", brand="Unknown")
R570 = Device(cuda="12.8", driver="570.124.06", arch="9.0", brand="Tesla")


@pytest.mark.parametrize(
    ("predicate", "device", "outcome"),
    [
        ("cuda>=12.0", R535, Outcome.SATISFIED),
        ("cuda>=12.8", R535, Outcome.UNSATISFIED),
        ("cuda>=12.8 driver>=535", R535, Outcome.SATISFIED),  # space: OR
        ("cuda>=12.0,driver>=550", R535, Outcome.UNSATISFIED),  # comma: AND
        ("cuda>=12.8 brand=unknown,driver>=535,driver<536", R535, Outcome.SATISFIED),
        ("cuda>=12.8 brand=tesla,driver>=535,driver<536", R535, Outcome.UNSATISFIED),
        ("", R535, Outcome.SATISFIED),  # ret starts true
        ("   ", R535, Outcome.SATISFIED),  # empty terms are skipped
        ("cuda>=12.8  ,,", R535, Outcome.UNSATISFIED),  # an all-empty term keeps the previous ret
        (", cuda>=99", R535, Outcome.SATISFIED),  # ... and ends the loop: ret is still true
        ("cuda>=99,bogus>=1 cuda>=1", R535, Outcome.SATISFIED),  # AND stops at the first false
        ("cuda>=1 bogus>=1", R535, Outcome.SATISFIED),  # OR stops at the first true term
        ("bogus>=1 cuda>=1", R535, Outcome.INVALID),
        ("cuda>=12.x", R535, Outcome.INVALID),
        ("arch>=8.0", R535, Outcome.SATISFIED),
        ("arch>=9.0", R535, Outcome.UNSATISFIED),
        ("brand<tesla", R535, Outcome.INVALID),
        ("cuda>=12.8", R570, Outcome.SATISFIED),
    ],
)
def test_evaluate_known_device(predicate: str, device: Device, outcome: Outcome) -> None:
    assert evaluate(predicate, device).outcomes == {outcome}


def test_unsatisfied_condition_text_is_the_runtimes() -> None:
    result = evaluate("cuda>=12.8 brand=tesla,driver>=470,driver<471", R535)
    assert result.condition == (
        "cuda>=12.8, please update your driver to a newer version, or use an earlier cuda container"
    )
    assert evaluate("driver>=600 cuda>=13", R535).condition == "driver>=600"


def test_an_unsatisfied_expression_too_long_for_the_error_buffer_is_invalid() -> None:
    # snprintf(buf, EXPR_MAX, "%s %s %s", ...) >= EXPR_MAX: "cuda >= " plus the value
    fits = "13" + ".0" * 58  # 118 characters: 126 in all
    too_long = fits + ".0"  # 128 in all
    assert len(f"cuda >= {too_long}") == EXPR_MAX
    assert evaluate(f"cuda>={fits}", R535).outcomes == {Outcome.UNSATISFIED}
    assert evaluate(f"cuda>={too_long}", R535).outcomes == {Outcome.INVALID}
    assert evaluate(f"cuda<={too_long}", R535).outcomes == {Outcome.SATISFIED}  # only a false one is formatted


def test_unknown_properties_give_every_possible_outcome() -> None:
    no_brand = Device(cuda="12.2", driver="535.129.03", arch="8.0", brand=None)
    req = nvidia_cuda_requirement("12.8", [470, 535, 550, 560, 565])
    assert evaluate(req, no_brand).outcomes == {Outcome.SATISFIED, Outcome.UNSATISFIED}
    # no term admits R525 whatever the brand
    r525 = Device(cuda="12.0", driver="525.147.05", arch=None, brand=None)
    assert evaluate(req, r525).outcomes == {Outcome.UNSATISFIED}
    # a native driver passes on the first term, before any brand is looked at
    r570 = Device(cuda="12.8", driver="570.124.06", arch=None, brand=None)
    assert evaluate(req, r570).outcomes == {Outcome.SATISFIED}
    nothing = Device()
    assert evaluate("cuda>=12.8", nothing).outcomes == {Outcome.SATISFIED, Outcome.UNSATISFIED}
    assert evaluate("cuda>=12.x", nothing).outcomes == {Outcome.INVALID}
    assert evaluate("arch>=8.0,brand<x", nothing).outcomes == {Outcome.UNSATISFIED, Outcome.INVALID}


# --- GetRequirements (nvidia-container-toolkit) ------------------------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    # toolkit: TestParseMajorMinorVersionValid
    [("0", "0.0"), ("8", "8.0"), ("7.5", "7.5"), ("9.0.116", "9.0"),
     ("4294967295.4294967295.4294967295", "4294967295.4294967295"), ("v11.6", "11.6"),
     # beyond the toolkit's cases: semver pre-release and metadata parts are accepted
     ("12.2.2-rc1", "12.2"), ("12.2.2+build.5", "12.2")],
)
def test_parse_major_minor_valid(version: str, expected: str) -> None:
    assert parse_major_minor(version) == expected


@pytest.mark.parametrize(
    "version",
    # toolkit: TestParseMajorMinorVersionInvalid
    ["foo", "foo.5.10", "9.0.116.50", "9.0.116foo", "7.foo", "9.0.bar", "9.4294967296", "9.0.116.", "9..0", "9.",
     ".5.10", "-9", "+9", "-9.1.116", "-9.-1.-116",
     # NGC images write four parts; as a legacy CUDA_VERSION this fails
     "12.2.2.009", "12.2.2-01"],
)
def test_parse_major_minor_invalid(version: str) -> None:
    assert parse_major_minor(version) is None


def _env(*pairs: str) -> Environment:
    return Environment(dict(p.split("=", 1) for p in pairs), complete=True)


@pytest.mark.parametrize(
    ("env", "expected"),
    # toolkit: TestGetRequirements
    [
        (["NVIDIA_REQUIRE_JETPACK=csv-mounts=all"], []),
        (["NVIDIA_REQUIRE_JETPACK_HOST_MOUNTS=base-only"], []),
        (["NVIDIA_REQUIRE_CUDA=cuda>=11.6"], ["cuda>=11.6"]),
        (["NVIDIA_REQUIRE_CUDA=cuda>=11.6", "NVIDIA_REQUIRE_BRAND=brand=tesla"], ["cuda>=11.6", "brand=tesla"]),
        (["CUDA_VERSION=11.6"], ["cuda>=11.6"]),
        (["CUDA_VERSION=11.6", "NVIDIA_REQUIRE_BRAND=brand=tesla"], ["cuda>=11.6", "brand=tesla"]),
        (["NVIDIA_REQUIRE_CUDA=cuda>=11.6", "NVIDIA_REQUIRE_BRAND=brand=tesla", "NVIDIA_DISABLE_REQUIRE=true"], None),
        (["CUDA_VERSION=11.6", "NVIDIA_REQUIRE_BRAND=brand=tesla", "NVIDIA_DISABLE_REQUIRE=true"], None),
        # IsLegacy: an empty NVIDIA_REQUIRE_CUDA counts as absent
        (["CUDA_VERSION=12.2.0", "NVIDIA_REQUIRE_CUDA="], ["", "cuda>=12.2"]),
        (["CUDA_VERSION=12.2.2.009", "NVIDIA_REQUIRE_CUDA=cuda>=9.0"], ["cuda>=9.0"]),
        (["CUDA_VERSION="], []),
    ],
)
def test_get_requirements(env: list[str], expected: list[str] | None) -> None:
    reqs = requirements(_env(*env))
    if expected is None:
        assert reqs.disabled is True
    else:
        assert reqs.disabled is False and reqs.error is None
        assert sorted(t or "" for t in reqs.texts) == sorted(expected)


@pytest.mark.parametrize(
    ("text", "value"),
    [("1", True), ("t", True), ("T", True), ("TRUE", True), ("true", True), ("True", True),
     ("0", False), ("f", False), ("F", False), ("FALSE", False), ("false", False), ("False", False),
     ("yes", None), ("tRuE", None), ("", None), (" true", None)],
)
def test_parse_bool_is_go_strconv(text: str, value: bool | None) -> None:
    assert parse_bool(text) is value


def test_disable_require_that_does_not_parse_leaves_the_check_on() -> None:
    assert requirements(_env("NVIDIA_DISABLE_REQUIRE=yes", "NVIDIA_REQUIRE_CUDA=cuda>=12")).disabled is False
    assert requirements(_env("NVIDIA_DISABLE_REQUIRE=1")).disabled is True


def test_legacy_cuda_version_that_does_not_parse_stops_the_container() -> None:
    reqs = requirements(_env("CUDA_VERSION=12.2.2.009"))
    assert reqs.error == "invalid CUDA version 12.2.2.009"
    refused = check(reqs, R570)
    assert refused.start is Start.REFUSED and "failed to get requirements" in refused.reason


def test_unknown_values_and_open_environments() -> None:
    assert requirements(Environment({"NVIDIA_DISABLE_REQUIRE": UNKNOWN}, complete=True)).disabled is None
    unknown_require = requirements(Environment({"NVIDIA_REQUIRE_CUDA": UNKNOWN}, complete=True))
    assert unknown_require.texts == (None,)
    partial = requirements(Environment({"NVIDIA_REQUIRE_CUDA": "cuda>=13.0"}, complete=False))
    assert partial.disabled is None and None in partial.texts
    # the pod's own requirement fails, but the image might disable the check: unknown
    assert check(partial, R535).start is Start.UNKNOWN
    known_off = requirements(Environment({"NVIDIA_DISABLE_REQUIRE": "true"}, complete=False))
    assert check(known_off, R535).start is Start.OFF


def test_check_combines_requirements_with_and() -> None:
    both = Requirements(False, ("cuda>=12.0", "arch>=9.0"))
    assert check(both, R535).start is Start.REFUSED
    assert check(both, R570).start is Start.STARTS
    assert check(Requirements(False, ("cuda>=12.0", None)), R535).start is Start.UNKNOWN
    refused = check(Requirements(False, ("cuda>=12.8",)), R535)
    assert refused.reason.startswith("requirement error: unsatisfied condition: cuda>=12.8")
    assert check(Requirements(False, ("bogus",)), R535).reason == "requirement error: invalid expression"
    assert check(Requirements(True, ("cuda>=99",)), R535).start is Start.OFF


def test_cuda_floor_reads_the_first_term() -> None:
    assert cuda_floor([nvidia_cuda_requirement("12.8", [470, 535])]) == (12, 8)
    assert cuda_floor(["cuda>=9.0"]) == (9, 0)
    assert cuda_floor(["brand=tesla,driver>=470 cuda>=12.8"]) is None
    assert cuda_floor([None, "", "arch>=8.0"]) is None
    assert cuda_floor(["cuda>=11.8", "cuda>=12.1,driver>=530"]) == (12, 1)

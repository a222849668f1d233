"""Per-node classification at every boundary, severity aggregation and the driver-floor terms."""

from __future__ import annotations

import pytest

from policies.cuda.affinity import affinity_fix, at_least_terms, driver_terms, merged_terms
from policies.cuda.compat import Mode, classify, requirement
from policies.cuda.resolve import Resolution
from policies.facts import LABEL_DRIVER_NEW, LABEL_DRIVER_OLD, NodeFacts
from policies.rules.gpu_cuda_driver_mismatch import _grade
from policies.scheduling import term_matches
from policies.types import Severity

DC = "NVIDIA-A100-SXM4-80GB"
CONSUMER = "NVIDIA-GeForce-RTX-4090"


def _req(version: tuple[int, ...], dc_drivers: tuple[tuple[int, ...], ...] | None = None):  # type: ignore[no-untyped-def]
    req = requirement(Resolution(version, "test", dc_drivers))
    assert req is not None
    return req


@pytest.mark.parametrize(
    ("cuda", "driver", "product", "mode"),
    [
        # exactly the toolkit minimum, and one below it
        ((12, 4, 1), (550, 54, 15), CONSUMER, Mode.NATIVE),
        ((12, 4, 1), (550, 54, 14), CONSUMER, Mode.MINOR),
        ((12, 4), (550, 54, 14), CONSUMER, Mode.NATIVE),
        ((12, 8, 0), (570, 26), CONSUMER, Mode.NATIVE),
        ((12, 8, 1), (570, 26), CONSUMER, Mode.MINOR),
        # the 12.x family floor and one below it
        ((12, 4, 1), (525, 60, 13), CONSUMER, Mode.MINOR),
        ((12, 4, 1), (525, 60, 12), CONSUMER, Mode.INCOMPATIBLE),
        ((12, 4, 1), (525, 60, 12), DC, Mode.FORWARD),  # R525 is in the 12.4 image's list
        # the 11.x floor
        ((11, 8, 0), (450, 80, 2), CONSUMER, Mode.MINOR),
        ((11, 8, 0), (450, 80, 1), CONSUMER, Mode.INCOMPATIBLE),
        # CUDA 10 has no minor-version compatibility
        ((10, 2, 89), (440, 33), CONSUMER, Mode.NATIVE),
        ((10, 2, 89), (440, 32), CONSUMER, Mode.INCOMPATIBLE),
        # forward compatibility: data-center only, and only for the branches the image lists
        ((12, 4, 1), (470, 256, 2), "Tesla-T4", Mode.FORWARD),
        ((12, 4, 1), (470, 256, 2), CONSUMER, Mode.INCOMPATIBLE),
        ((12, 4, 1), (470, 256, 2), None, Mode.INCOMPATIBLE),
        ((12, 4, 1), (510, 47, 3), DC, Mode.INCOMPATIBLE),
        ((13, 0, 2), (535, 129, 3), DC, Mode.FORWARD),
        ((13, 0, 2), (535, 129, 3), CONSUMER, Mode.INCOMPATIBLE),
        ((13, 0, 2), (470, 256, 2), "Tesla-T4", Mode.INCOMPATIBLE),
        ((13, 0, 2), (580, 0), CONSUMER, Mode.MINOR),
        ((13, 0, 2), (579, 99), DC, Mode.INCOMPATIBLE),
        # branch-only rows: any driver of the branch
        ((13, 4, 0), (615, 0), CONSUMER, Mode.NATIVE),
        ((13, 4, 0), (610, 99), CONSUMER, Mode.MINOR),
        # images without forward-compat data get no forward credit
        ((12, 9, 1), (470, 256, 2), DC, Mode.INCOMPATIBLE),
        # unknown driver
        ((12, 4, 1), None, DC, Mode.UNKNOWN),
    ],
)
def test_classify(cuda: tuple[int, ...], driver: tuple[int, ...] | None, product: str | None, mode: Mode) -> None:
    assert classify(_req(cuda), driver, product) is mode


def test_ngc_release_notes_list_overrides_image_branches() -> None:
    # Triton 24.01 (CUDA 12.3.2) accepts R470 from 470.57 on only.
    req = _req((12, 3, 2), ((470, 57), (525, 85), (535, 86), (545, 23)))
    assert classify(req, (470, 57), DC) is Mode.FORWARD
    assert classify(req, (470, 42, 1), DC) is Mode.INCOMPATIBLE


def test_unknown_cuda_versions_have_no_requirement() -> None:
    assert requirement(Resolution((12, 7), "test")) is None
    assert requirement(Resolution((14, 0), "test")) is None


@pytest.mark.parametrize(
    ("modes", "severity"),
    [
        ([Mode.INCOMPATIBLE], Severity.ERROR),
        ([Mode.INCOMPATIBLE, Mode.INCOMPATIBLE], Severity.ERROR),
        ([Mode.INCOMPATIBLE, Mode.UNKNOWN], Severity.WARNING),
        ([Mode.INCOMPATIBLE, Mode.NATIVE], Severity.WARNING),
        ([Mode.INCOMPATIBLE, Mode.MINOR], Severity.WARNING),
        ([Mode.MINOR], Severity.WARNING),
        ([Mode.FORWARD, Mode.MINOR], Severity.WARNING),
        ([Mode.FORWARD, Mode.UNKNOWN], Severity.WARNING),
        ([Mode.NATIVE, Mode.MINOR], Severity.INFO),
        ([Mode.NATIVE, Mode.FORWARD, Mode.UNKNOWN], Severity.INFO),
        ([Mode.NATIVE], None),
        ([Mode.NATIVE, Mode.UNKNOWN], None),
        ([Mode.UNKNOWN], None),
        ([], None),
    ],
)
def test_severity_aggregation(modes: list[Mode], severity: Severity | None) -> None:
    assert _grade(modes) is severity


def _node(driver: str, old_only: bool = False) -> NodeFacts:
    parts = driver.split(".")
    keys = LABEL_DRIVER_OLD if old_only else LABEL_DRIVER_NEW
    return NodeFacts(name="n", labels=dict(zip(keys, parts, strict=False)), taints=(), allocatable={})


@pytest.mark.parametrize("minimum", [(550, 54, 15), (570, 26), (580,), (525, 60, 13), (615, 0)])
@pytest.mark.parametrize(
    "driver",
    ["550.54.15", "550.54.14", "550.54.16", "550.55.01", "550.53.99", "551.0.0", "549.99.99", "570.26", "570.25.99",
     "570.124.06", "580.65.06", "579.1.1", "525.60.13", "525.60.12", "525.85.12", "615.0.0", "610.2.1"],
)
def test_driver_terms_match_exactly_the_drivers_at_or_above_the_minimum(
    minimum: tuple[int, ...], driver: str
) -> None:
    version = tuple(int(p) for p in driver.split("."))
    for old_only in (False, True):
        node = _node(driver, old_only)
        terms = [{"matchExpressions": t} for t in driver_terms(minimum, include_old_labels=True)]
        assert any(term_matches(t, node) for t in terms) is (version >= minimum), (driver, old_only)
    new_only = [{"matchExpressions": t} for t in driver_terms(minimum, include_old_labels=False)]
    assert not any(term_matches(t, _node(driver, old_only=True)) for t in new_only)


def test_terms_compare_zero_padded_labels_as_numbers() -> None:
    node = NodeFacts("n", dict(zip(LABEL_DRIVER_NEW, ("535", "104", "05"), strict=True)), (), {})
    terms = [{"matchExpressions": t} for t in at_least_terms((535, 104, 5), LABEL_DRIVER_NEW)]
    assert any(term_matches(t, node) for t in terms)


def test_affinity_fix_creates_missing_sections() -> None:
    terms = driver_terms((550,), include_old_labels=False)
    (op,) = affinity_fix({}, terms)
    assert op.op == "add" and op.path == ("affinity",)
    (op,) = affinity_fix({"affinity": {"podAntiAffinity": {}}}, terms)
    assert op.path == ("affinity", "nodeAffinity")
    (op,) = affinity_fix({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}}, terms)
    assert op.path == ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
    assert op.value == {"nodeSelectorTerms": [{"matchExpressions": terms[0]}]}


def test_merged_terms_and_every_existing_term_and_keep_empty_ones() -> None:
    existing = [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
        {},
    ]
    terms = driver_terms((550, 54, 15), include_old_labels=False)
    merged = merged_terms(existing, terms)
    assert len(merged) == 2 * len(terms) + 1
    assert merged[-1] == {}
    for term in merged[: len(terms)]:
        assert term["matchExpressions"][0]["key"] == "pool"
    for term in merged[len(terms) : 2 * len(terms)]:
        assert term["matchFields"] == existing[1]["matchFields"]
    assert existing[0]["matchExpressions"] == [{"key": "pool", "operator": "In", "values": ["a"]}]

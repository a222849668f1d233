"""The CUDA knowledge base files: shape, provenance, ordering and mutual consistency."""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import pytest

from policies.cuda.knowledge import DATA_FILES, knowledge
from policies.cuda.versions import major_minor, parse_version

ORDER_KEYS: dict[str, Any] = {
    "cuda_toolkit_drivers.json": lambda r: parse_version(r["cuda"]),
    "cuda_mvc_floors.json": lambda r: r["family"],
    "driver_branches.json": lambda r: r["branch"],
    "cuda_forward_compat.json": lambda r: parse_version(r["cuda"]),
    "datacenter_gpus.json": lambda r: r["pattern"],
    "ngc_cuda.json": lambda r: (r["framework"], r["release"]),
}
REQUIRED_KEYS = {
    "cuda_toolkit_drivers.json": {"cuda", "release", "minDriver", "precision", "source"},
    "cuda_mvc_floors.json": {"family", "minDriver", "precision", "source"},
    "driver_branches.json": {"branch", "cuda", "source"},
    "cuda_forward_compat.json": {"cuda", "acceptedDrivers", "source"},
    "datacenter_gpus.json": {"pattern", "products", "source"},
    "ngc_cuda.json": {"framework", "release", "cuda", "datacenterDrivers", "source"},
}


def _doc(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(resources.files("policies").joinpath("data", name).read_text())
    return doc


@pytest.mark.parametrize("name", DATA_FILES)
def test_data_file_shape_and_sources(name: str) -> None:
    doc = _doc(name)
    assert isinstance(doc["description"], str) and doc["description"]
    rows = doc["rows"]
    assert rows
    for row in rows:
        assert set(row) == REQUIRED_KEYS[name], row
        assert isinstance(row["source"], str) and len(row["source"]) > 10


@pytest.mark.parametrize("name", DATA_FILES)
def test_data_rows_strictly_ordered(name: str) -> None:
    keys = [ORDER_KEYS[name](r) for r in _doc(name)["rows"]]
    assert all(k is not None for k in keys)
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_toolkit_table_covers_every_release_from_10_0() -> None:
    cudas = {major_minor(r.cuda) for r in knowledge().toolkits}
    expected = {(10, 0), (10, 1), (10, 2)} | {(11, m) for m in range(9)}
    expected |= {(12, m) for m in (0, 1, 2, 3, 4, 5, 6, 8, 9)}
    expected |= {(13, m) for m in range(5)}
    assert cudas == expected  # no 12.7 toolkit exists


def test_minimum_drivers_never_decrease() -> None:
    drivers = [r.min_driver for r in knowledge().toolkits]
    assert drivers == sorted(drivers)


def test_every_toolkit_minimum_falls_in_the_branch_of_its_cuda() -> None:
    kb = knowledge()
    for row in kb.toolkits:
        assert kb.branches[row.min_driver[0]] == major_minor(row.cuda), row


def test_mvc_floor_is_at_most_every_minimum_of_its_family() -> None:
    kb = knowledge()
    for row in kb.toolkits:
        floor = kb.mvc_floor(row.cuda[0])
        # CUDA 11.0 shipped before the 450.80.02 floor existed (release notes footnote).
        if floor is not None and major_minor(row.cuda) != (11, 0):
            assert floor <= row.min_driver, row
    assert kb.mvc_floor(10) is None


def test_forward_compat_branches_are_older_than_the_native_minimum() -> None:
    kb = knowledge()
    for cuda, drivers in kb.forward.items():
        native = kb.toolkit(cuda)
        assert native is not None
        assert drivers and all(d < native.min_driver for d in drivers)


def test_ngc_rows_resolve_to_known_toolkits() -> None:
    kb = knowledge()
    for row in kb.ngc.values():
        assert re.fullmatch(r"\d{2}\.\d{2}", row.release)
        assert kb.toolkit(row.cuda) is not None, row


def test_toolkit_lookup_rules() -> None:
    kb = knowledge()
    row = kb.toolkit((12, 4, 1))
    assert row is not None and row.min_driver == (550, 54, 15)
    ga = kb.toolkit((12, 4))
    assert ga is not None and ga.min_driver == (550, 54, 14)
    unlisted_patch = kb.toolkit((12, 3, 2))  # falls back to 12.3 Update 1
    assert unlisted_patch is not None and unlisted_patch.min_driver == (545, 23, 8)
    assert kb.toolkit((12, 7)) is None and kb.toolkit((14, 0)) is None
    branch = kb.toolkit((13, 4, 1))
    assert branch is not None and branch.branch_only and branch.min_driver == (615,)


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [((535, 129, 3), (12, 2)), ((550, 90, 7), (12, 4)), ((470, 256, 2), (11, 4)), ((565, 57, 1), (12, 7)),
     ((580, 65, 6), (13, 0))],
)
def test_native_cuda_of_driver(driver: tuple[int, ...], cuda: tuple[int, int]) -> None:
    assert knowledge().native_cuda(driver) == cuda


@pytest.mark.parametrize(
    ("product", "datacenter"),
    [
        ("Tesla-T4", True),
        ("Tesla-V100-SXM2-16GB", True),
        ("NVIDIA-A100-SXM4-80GB", True),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", True),
        ("NVIDIA-H100-80GB-HBM3", True),
        ("NVIDIA-H200", True),
        ("NVIDIA-B200", True),
        ("NVIDIA-L4", True),
        ("NVIDIA-L40S", True),
        ("NVIDIA-A10G", True),
        ("NVIDIA-A30", True),
        ("NVIDIA-GeForce-RTX-4090", False),
        ("NVIDIA-RTX-A6000", False),
        ("NVIDIA-A1000", False),
        ("NVIDIA-L40X", False),
        ("", False),
        (None, False),
    ],
)
def test_datacenter_products(product: str | None, datacenter: bool) -> None:
    assert knowledge().is_datacenter(product) is datacenter

"""The CUDA knowledge base: typed, validated views of the JSON tables in ``policies/data/``."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from policies import patterns
from policies.cuda.versions import Version, major_minor, parse_version

DATA_FILES = (
    "cuda_toolkit_drivers.json",
    "cuda_mvc_floors.json",
    "driver_branches.json",
    "cuda_forward_compat.json",
    "datacenter_gpus.json",
    "ngc_cuda.json",
)


_MISSING: Any = object()


class KnowledgeError(ValueError):
    """A data file is malformed; raised at load time so a bad table never ships silently."""


@dataclass(frozen=True, slots=True)
class ToolkitRow:
    cuda: Version
    release: str
    min_driver: Version
    branch_only: bool  # only the driver branch is published, not an exact number
    source: str


@dataclass(frozen=True, slots=True)
class NgcRow:
    framework: str
    release: str
    cuda: Version
    datacenter_drivers: tuple[Version, ...]
    source: str


@dataclass(frozen=True)
class Knowledge:
    toolkits: tuple[ToolkitRow, ...]
    mvc_floors: dict[int, tuple[Version, bool]]  # family → (floor, branch_only)
    branches: dict[int, Version]  # driver branch → highest native CUDA
    forward: dict[tuple[int, int], tuple[Version, ...]]  # CUDA major.minor → accepted drivers
    datacenter: tuple[patterns.Pattern, ...]
    ngc: dict[tuple[str, str], NgcRow]
    # The table is immutable; versions asked repeat (one per image), so answers are kept.
    _toolkit_memo: dict[Version, ToolkitRow | None] = field(default_factory=dict, compare=False, repr=False)

    def toolkit(self, cuda: Version) -> ToolkitRow | None:
        """The row whose minimum driver applies to ``cuda``.

        A full version uses the newest listed update of its minor release not newer than it (patch
        releases absent from NVIDIA's table inherit the previous update's driver); ``major.minor``
        alone, or a patch older than every row, uses the minor release's first row.  A minor
        release with no row at all (12.7, an unreleased 14.0) gives None: no guess.
        """
        found = self._toolkit_memo.get(cuda, _MISSING)
        if found is _MISSING:
            same = [r for r in self.toolkits if major_minor(r.cuda) == major_minor(cuda)]
            if not same:
                found = None
            elif len(cuda) < 3:
                found = same[0]
            else:
                older = [r for r in same if r.cuda <= cuda]
                found = older[-1] if older else same[0]
            self._toolkit_memo[cuda] = found
        return found  # type: ignore[no-any-return]

    def mvc_floor(self, family: int) -> Version | None:
        entry = self.mvc_floors.get(family)
        return entry[0] if entry else None

    def native_cuda(self, driver: Version) -> Version | None:
        """The highest CUDA a driver runs natively: its branch's, else derived from the toolkit table."""
        if driver[0] in self.branches:
            return self.branches[driver[0]]
        fits = [r for r in self.toolkits if r.min_driver <= driver]
        return major_minor(fits[-1].cuda) if fits else None

    def forward_drivers(self, cuda: Version) -> tuple[Version, ...]:
        return self.forward.get(major_minor(cuda), ())

    def states_forward(self, cuda: Version) -> bool:
        """Whether cuda_forward_compat.json has a row for the CUDA version's major.minor."""
        return major_minor(cuda) in self.forward

    def is_datacenter(self, product: str | None) -> bool:
        return bool(product) and any(p.match(product or "") for p in self.datacenter)

    def ngc_release(self, framework: str, release: str) -> NgcRow | None:
        return self.ngc.get((framework, release))

    @functools.cached_property
    def _ngc_frameworks(self) -> frozenset[str]:
        return frozenset(f for f, _ in self.ngc)

    def ngc_frameworks(self) -> frozenset[str]:
        return self._ngc_frameworks



def _rows(name: str) -> list[dict[str, Any]]:
    text = resources.files("policies").joinpath("data", name).read_text(encoding="utf-8")
    doc = json.loads(text)
    rows = doc.get("rows") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise KnowledgeError(f"{name}: expected an object with a 'rows' list")
    for i, row in enumerate(rows):
        if not isinstance(row.get("source"), str) or not row["source"].strip():
            raise KnowledgeError(f"{name}: row {i} has no source")
    return rows


def _version(name: str, row: dict[str, Any], key: str) -> Version:
    value = parse_version(row.get(key))
    if value is None:
        raise KnowledgeError(f"{name}: {key}={row.get(key)!r} is not a version")
    return value


def _load() -> Knowledge:
    toolkits = tuple(
        ToolkitRow(
            cuda=_version("cuda_toolkit_drivers.json", r, "cuda"),
            release=str(r.get("release", "")),
            min_driver=_version("cuda_toolkit_drivers.json", r, "minDriver"),
            branch_only=r.get("precision") == "branch",
            source=r["source"],
        )
        for r in _rows("cuda_toolkit_drivers.json")
    )
    floors = {
        int(r["family"]): (_version("cuda_mvc_floors.json", r, "minDriver"), r.get("precision") == "branch")
        for r in _rows("cuda_mvc_floors.json")
    }
    branches = {int(r["branch"]): _version("driver_branches.json", r, "cuda") for r in _rows("driver_branches.json")}
    forward = {
        major_minor(_version("cuda_forward_compat.json", r, "cuda")): tuple(
            _version("cuda_forward_compat.json", {"v": d}, "v") for d in r.get("acceptedDrivers") or ()
        )
        for r in _rows("cuda_forward_compat.json")
    }
    datacenter = tuple(patterns.compile("(?i)" + str(r["pattern"])) for r in _rows("datacenter_gpus.json"))
    ngc = {
        (str(r["framework"]), str(r["release"])): NgcRow(
            framework=str(r["framework"]),
            release=str(r["release"]),
            cuda=_version("ngc_cuda.json", r, "cuda"),
            datacenter_drivers=tuple(
                _version("ngc_cuda.json", {"v": d}, "v") for d in r.get("datacenterDrivers") or ()
            ),
            source=r["source"],
        )
        for r in _rows("ngc_cuda.json")
    }
    return Knowledge(toolkits, floors, branches, forward, datacenter, ngc)


@cache
def knowledge() -> Knowledge:
    return _load()

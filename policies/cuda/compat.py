"""Classify a node's driver against the CUDA version an image needs.

* native — the driver is at least the toolkit's minimum driver (release notes Table 3);
* minor-version compatibility — CUDA 11+ and the driver is at least its major family's floor
  (e.g. 525.60.13 for 12.x): the image runs, but PTX JIT of newer PTX and features that need a
  newer driver fail (cudaErrorUnsupportedPtxVersion, cudaErrorCallRequiresNewerDriver);
* forward compatibility — a data-center GPU on a driver branch the image's NVIDIA_REQUIRE_CUDA
  (or, for NGC images, its release notes) accepts: runs through the image's cuda-compat libraries;
* incompatible — none of the above: the container toolkit refuses to start it
  ("unsatisfied condition: cuda>=X.Y") or CUDA fails to initialise;
* unknown — the node carries no driver labels; never reported as a problem.

Minor-version compatibility is checked before forward compatibility: it needs nothing from the
image, while the compat libraries must actually be loaded.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

from policies.cuda.knowledge import knowledge
from policies.cuda.resolve import Resolution
from policies.cuda.versions import Version, format_driver, format_version, major_minor


class Mode(enum.Enum):
    NATIVE = "native"
    MINOR = "minor-version compatibility"
    FORWARD = "forward compatibility"
    INCOMPATIBLE = "incompatible"
    UNKNOWN = "unknown driver"

    @property
    def runs(self) -> bool:
        return self in (Mode.NATIVE, Mode.MINOR, Mode.FORWARD)

    @property
    def compat_only(self) -> bool:
        return self in (Mode.MINOR, Mode.FORWARD)


@dataclass(frozen=True, slots=True)
class Requirement:
    """What a CUDA version asks of a driver."""

    cuda: Version
    source: str
    native_min: Version
    native_branch_only: bool
    mvc_floor: Version | None
    forward_drivers: tuple[Version, ...]
    # Whether a source states the branches forward compatibility accepts for this CUDA version (NGC's
    # release notes, or an nvidia/cuda image's NVIDIA_REQUIRE_CUDA in cuda_forward_compat.json).  When none
    # does, a data-center GPU below the native driver may still run it through the image's compat
    # libraries: that is uncertain, so it counts as forward compatibility (a warning), not as incompatible.
    forward_stated: bool = True

    def describe_native(self) -> str:
        if self.native_branch_only:
            return f"R{self.native_min[0]} or newer"
        return format_driver(self.native_min) + " or newer"

    @property
    def cuda_text(self) -> str:
        return format_version(self.cuda)


@functools.lru_cache(maxsize=1024)
def requirement(resolution: Resolution) -> Requirement | None:
    """None when the knowledge base does not know the version: the rule then stays silent.

    A pure function of the resolution and the (fixed) knowledge base, asked for every container of
    every evaluation, so cached."""
    kb = knowledge()
    row = kb.toolkit(resolution.version)
    if row is None:
        return None
    forward = (
        resolution.datacenter_drivers
        if resolution.datacenter_drivers is not None
        else kb.forward_drivers(resolution.version)
    )
    return Requirement(
        cuda=resolution.version,
        source=resolution.source,
        native_min=row.min_driver,
        native_branch_only=row.branch_only,
        mvc_floor=kb.mvc_floor(resolution.version[0]),
        forward_drivers=forward,
        forward_stated=resolution.datacenter_drivers is not None or kb.states_forward(resolution.version),
    )


def accepts_forward(accepted: tuple[Version, ...], driver: Version) -> bool:
    """``470.57`` accepts R470 drivers from 470.57 on; ``470`` accepts every R470 driver."""
    return any(driver[0] == a[0] and driver >= a for a in accepted)


def may_forward(req: Requirement, driver: Version) -> bool:
    """Whether forward compatibility may run ``req`` on a data-center GPU with ``driver``: its branch is
    one the sources list, or no source lists any (see ``Requirement.forward_stated``)."""
    return accepts_forward(req.forward_drivers, driver) or not req.forward_stated


def classify(req: Requirement, driver: Version | None, product: str | None) -> Mode:
    if driver is None:
        return Mode.UNKNOWN
    if driver >= req.native_min:
        return Mode.NATIVE
    if req.mvc_floor is not None and driver >= req.mvc_floor:
        return Mode.MINOR
    if knowledge().is_datacenter(product) and may_forward(req, driver):
        return Mode.FORWARD
    return Mode.INCOMPATIBLE


@functools.lru_cache(maxsize=1024)
def native_cuda_text(driver: Version) -> str | None:
    native = knowledge().native_cuda(driver)
    return format_version(major_minor(native)) if native else None

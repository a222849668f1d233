"""One node's verdict on one container: CUDA compatibility, then the runtime's own check.

* native / minor-version / forward / incompatible / unknown by CUDA compatibility
  (``policies.cuda.compat``).  Forward compatibility stays restricted to data-center GPUs: the
  runtime's brand check is looser than NVIDIA's support statement (the CUDA driver refuses the
  compat libraries at ``cuInit`` on other GPUs, error 804).  When the runtime's requirement covers
  the image's CUDA (``Need.informative``), the driver branches it accepts are the ones its
  ``brand=…,driver>=N,driver<N+1`` terms admit; otherwise the knowledge base's lists apply.
* When the legacy runtime would refuse to start the container on that node (an unsatisfied or
  invalid ``NVIDIA_REQUIRE_*``), the node is incompatible whatever CUDA compatibility says: that
  is the image's (or the pod's) own statement, and the runtime enforces it in legacy mode.

Node properties for the runtime's check come from GPU Feature Discovery labels: ``cuda`` from
``nvidia.com/cuda.runtime-version.*`` (else the CUDA of the driver's branch, from the knowledge
base), ``driver`` from ``nvidia.com/cuda.driver-version.*``, ``arch`` from
``nvidia.com/gpu.compute.{major,minor}`` (NVIDIA/k8s-device-plugin docs/gpu-feature-discovery:
"compute capability").  ``brand`` is never labelled and no sourced mapping from the product name to
NVML's brand exists, so it stays unknown: the check then never fails because of it.
"""

from __future__ import annotations

from collections.abc import Mapping

from policies.cuda.compat import Mode, Requirement, may_forward
from policies.cuda.knowledge import knowledge
from policies.cuda.need import Need
from policies.cuda.require import Check, Device, Start, check
from policies.cuda.versions import Version, format_version, major_minor
from policies.facts import LABEL_PRODUCT, cuda_version_of, driver_version_of
from policies.shapes import small_int

LABEL_COMPUTE = ("nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor")


def device_of(labels: Mapping[str, str], driver: Version | None) -> Device:
    cuda = cuda_version_of(labels)
    if cuda is None and driver is not None:
        cuda = knowledge().native_cuda(driver)
    major, minor = (labels.get(k) for k in LABEL_COMPUTE)
    major_n, minor_n = small_int(major or "", 4), small_int(minor or "", 4)
    arch = f"{major_n}.{minor_n}" if major_n is not None and minor_n is not None else None
    return Device(
        cuda=format_version(major_minor(cuda)) if cuda else None,
        driver=format_version(driver) if driver else None,
        arch=arch,
        brand=None,
    )


def node_mode(req: Requirement, need: Need, labels: Mapping[str, str]) -> tuple[Mode, Check | None]:
    """The node's mode and, where modelled, what the legacy runtime would do there."""
    driver = driver_version_of(labels)
    if driver is None:
        return Mode.UNKNOWN, None
    runtime = check(need.requirements, device_of(labels, driver)) if need.requirements is not None else None
    if runtime is not None and runtime.start is Start.REFUSED:
        return Mode.INCOMPATIBLE, runtime
    if driver >= req.native_min:
        return Mode.NATIVE, runtime
    if req.mvc_floor is not None and driver >= req.mvc_floor:
        return Mode.MINOR, runtime
    product = labels.get(LABEL_PRODUCT)
    # Not refused by an informative requirement means its branch terms admit this driver.
    if knowledge().is_datacenter(product) and (need.informative or may_forward(req, driver)):
        return Mode.FORWARD, runtime
    return Mode.INCOMPATIBLE, runtime


VERDICT_NAMES = {
    Mode.NATIVE: "native",
    Mode.MINOR: "minor-version",
    Mode.FORWARD: "forward",
    Mode.INCOMPATIBLE: "incompatible",
    Mode.UNKNOWN: "unknown",
}

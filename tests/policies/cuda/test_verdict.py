"""One node's verdict: CUDA compatibility, then the runtime's own check."""

from __future__ import annotations

from typing import Any

from policies.cuda.compat import Mode, requirement
from policies.cuda.need import container_need
from policies.cuda.require import Device, Start
from policies.cuda.verdict import device_of, node_mode
from policies.images import ImageConfig, ImageLookup
from tests.policies.cuda.test_need import CUDA_12_8, TRITON_23_12


def _labels(driver: str, product: str, cuda: str | None = None, compute: str | None = None) -> dict[str, str]:
    major, minor, rev = driver.split(".")
    labels = {
        "nvidia.com/gpu.product": product,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
    }
    if cuda:
        labels["nvidia.com/cuda.runtime-version.full"] = cuda
    if compute:
        labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"] = compute.split(".")
    return labels


def _mode(image: str, labels: dict[str, str], config: ImageConfig | None = None,
          container: dict[str, Any] | None = None) -> tuple[Mode, Any]:
    lookup = ImageLookup("found", config) if config else None
    need = container_need(image, container or {}, "main", None, (), lookup, "amd64")
    assert need.resolution is not None
    req = requirement(need.resolution)
    assert req is not None
    return node_mode(req, need, labels)


def test_device_from_gfd_labels() -> None:
    labels = _labels("535.129.03", "NVIDIA-A100-SXM4-80GB", cuda="12.2", compute="8.0")
    assert device_of(labels, (535, 129, 3)) == Device(cuda="12.2", driver="535.129.3", arch="8.0", brand=None)
    # no runtime-version label: the CUDA of the driver's branch (knowledge base)
    assert device_of(_labels("550.90.07", "x"), (550, 90, 7)).cuda == "12.4"
    assert device_of({"nvidia.com/gpu.compute.major": "x"}, None) == Device()


def test_the_image_requirement_refuses_an_unlisted_branch_that_mvc_would_run() -> None:
    # CUDA 12.8 image on an R525 data-center node: 525.147 >= 525.60.13 (12.x MVC floor) but the
    # image's NVIDIA_REQUIRE_CUDA admits no R525 driver, so the legacy runtime refuses it.
    mode, runtime = _mode("example.com/app:1", _labels("525.147.05", "NVIDIA-A100-SXM4-80GB", cuda="12.0"), CUDA_12_8)
    assert mode is Mode.INCOMPATIBLE
    assert runtime.start is Start.REFUSED and "cuda>=12.8" in runtime.reason
    # offline the same image (by name) is judged by CUDA compatibility alone
    offline, _ = _mode("nvidia/cuda:12.8.1-base-ubuntu24.04", _labels("525.147.05", "NVIDIA-A100-SXM4-80GB"))
    assert offline is Mode.MINOR


def test_forward_compatibility_follows_the_requirement_and_stays_data_center_only() -> None:
    t4 = _labels("470.256.02", "Tesla-T4", cuda="11.4")
    mode, runtime = _mode("example.com/app:1", t4, CUDA_12_8)
    assert mode is Mode.FORWARD and runtime.start is Start.UNKNOWN  # brand unknown: not refused
    geforce = _labels("470.256.02", "NVIDIA-GeForce-RTX-3090", cuda="11.4")
    assert _mode("example.com/app:1", geforce, CUDA_12_8)[0] is Mode.INCOMPATIBLE
    # R545 is not among the image's branches: minor-version compatible, but the legacy runtime refuses it
    r545 = _labels("545.23.08", "NVIDIA-H100-80GB-HBM3", cuda="12.3")
    mode, runtime = _mode("example.com/app:1", r545, CUDA_12_8)
    assert mode is Mode.INCOMPATIBLE and runtime.start is Start.REFUSED
    r550 = _labels("550.90.07", "NVIDIA-H100-80GB-HBM3", cuda="12.4")
    assert _mode("example.com/app:1", r550, CUDA_12_8)[0] is Mode.MINOR
    r450 = _labels("450.248.02", "NVIDIA-A100-SXM4-80GB", cuda="11.0")
    mode, runtime = _mode("example.com/app:1", r450, CUDA_12_8)
    assert mode is Mode.INCOMPATIBLE and runtime.start is Start.REFUSED


def test_an_uninformative_requirement_uses_the_release_notes_lists() -> None:
    # Triton 23.12 (CUDA 12.3.2) says cuda>=9.0: the runtime starts it anywhere; forward
    # compatibility comes from its release notes (R450 ... R545 on data-center GPUs).
    t4 = _labels("470.256.02", "Tesla-T4", cuda="11.4")
    mode, runtime = _mode("nvcr.io/nvidia/tritonserver:23.12-py3", t4, TRITON_23_12)
    assert mode is Mode.FORWARD and runtime.start is Start.STARTS
    old = _labels("418.226.00", "Tesla-T4", cuda="10.1")
    mode, runtime = _mode("nvcr.io/nvidia/tritonserver:23.12-py3", old, TRITON_23_12)
    assert mode is Mode.INCOMPATIBLE and runtime.start is Start.STARTS  # starts, then fails at cuInit


def test_disabled_check_and_stricter_pod_requirement() -> None:
    r525 = _labels("525.147.05", "NVIDIA-A100-SXM4-80GB", cuda="12.0")
    off = {"env": [{"name": "NVIDIA_DISABLE_REQUIRE", "value": "true"}]}
    mode, runtime = _mode("example.com/app:1", r525, CUDA_12_8, off)
    assert mode is Mode.MINOR and runtime.start is Start.OFF
    stricter = {"env": [{"name": "NVIDIA_REQUIRE_ARCH", "value": "arch>=9.0"}]}
    a100 = _labels("570.124.06", "NVIDIA-A100-SXM4-80GB", cuda="12.8", compute="8.0")
    mode, runtime = _mode("example.com/app:1", a100, CUDA_12_8, stricter)
    assert mode is Mode.INCOMPATIBLE and "arch>=9.0" in runtime.reason
    h100 = _labels("570.124.06", "NVIDIA-H100-80GB-HBM3", cuda="12.8", compute="9.0")
    assert _mode("example.com/app:1", h100, CUDA_12_8, stricter)[0] is Mode.NATIVE


def test_nodes_without_driver_labels_stay_unknown() -> None:
    assert _mode("example.com/app:1", {"nvidia.com/gpu.product": "Tesla-T4"}, CUDA_12_8) == (Mode.UNKNOWN, None)

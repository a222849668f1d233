"""NGC framework image tags resolve to the CUDA version their release notes state."""

from __future__ import annotations

import re

import pytest

from policies.cuda.compat import Mode, classify, requirement
from policies.cuda.knowledge import knowledge
from policies.cuda.resolve import resolve

DC = "NVIDIA-A100-SXM4-80GB"


@pytest.mark.parametrize(
    ("image", "cuda"),
    [
        ("nvcr.io/nvidia/tritonserver:21.12-py3", (11, 5, 0)),
        ("nvcr.io/nvidia/tritonserver:22.06-py3", (11, 7)),  # "CUDA 11.7 Update 1 Preview"
        ("nvcr.io/nvidia/tritonserver:22.08-py3", (11, 7, 1)),  # "CUDA 11.7 Update 1"
        ("nvcr.io/nvidia/tritonserver:23.10-py3", (12, 2, 2)),
        ("nvcr.io/nvidia/tritonserver:24.06-py3", (12, 5, 0)),  # "CUDA 12.5.0.23"
        ("nvcr.io/nvidia/tritonserver:24.12-py3", (12, 6, 3)),
        ("nvcr.io/nvidia/tritonserver:25.04-py3", (12, 9, 0)),
        ("nvcr.io/nvidia/tritonserver:25.10-py3", (13, 0, 2)),  # "CUDA 13.0.2.006"
        ("nvcr.io/nvidia/tensorflow:22.06-tf2-py3", (11, 7)),
        ("nvcr.io/nvidia/tensorflow:21.10-tf1-py3", (11, 4, 2)),
        ("nvcr.io/nvidia/paddlepaddle:22.05-py3", (11, 7)),
    ],
)
def test_ngc_tag_resolves_to_release_notes_cuda(image: str, cuda: tuple[int, ...]) -> None:
    found = resolve(image, "main")
    assert found is not None, image
    assert found.version == cuda
    assert found.source.startswith("NGC ")


def test_ngc_release_notes_driver_list_is_carried() -> None:
    found = resolve("nvcr.io/nvidia/tritonserver:23.08-py3")
    assert found is not None and found.version == (12, 2, 1)
    assert found.datacenter_drivers == ((450, 51), (470, 57), (510, 47), (525, 85), (535, 86))


@pytest.mark.parametrize(
    ("image", "driver", "mode"),
    [
        # the 25.10 notes list R470 for a CUDA 13 image; that list is not used, the nvidia/cuda one is
        ("nvcr.io/nvidia/tritonserver:25.10-py3", (470, 256, 2), Mode.INCOMPATIBLE),
        ("nvcr.io/nvidia/tritonserver:25.10-py3", (535, 261, 3), Mode.FORWARD),
        # a self-consistent list is used as written: R470 from 470.57 on (the 12.2 image accepts any R470)
        ("nvcr.io/nvidia/tritonserver:23.08-py3", (470, 57, 2), Mode.FORWARD),
        ("nvcr.io/nvidia/tritonserver:23.08-py3", (470, 42, 1), Mode.INCOMPATIBLE),
        # CUDA 13.1: the 25.12 notes' list is not used and no nvidia/cuda 13.1 row states one, so on a
        # data-center GPU forward compatibility is possible but not known: a warning, not incompatible
        ("nvcr.io/nvidia/tritonserver:25.12-py3", (570, 133, 20), Mode.FORWARD),
        ("nvcr.io/nvidia/tritonserver:25.12-py3", (470, 256, 2), Mode.FORWARD),
    ],
)
def test_forward_compatibility_of_ngc_images(image: str, driver: tuple[int, ...], mode: Mode) -> None:
    found = resolve(image)
    assert found is not None
    req = requirement(found)
    assert req is not None
    assert classify(req, driver, DC) is mode


def test_forward_compatibility_no_source_states_is_possible_on_data_center_gpus_only() -> None:
    found = resolve("nvcr.io/nvidia/tritonserver:25.12-py3")
    assert found is not None
    req = requirement(found)
    assert req is not None and not req.forward_stated and req.forward_drivers == ()
    assert classify(req, (570, 133, 20), "NVIDIA-GeForce-RTX-4090") is Mode.INCOMPATIBLE  # no compat there
    assert classify(req, (590, 44, 1), DC) is Mode.NATIVE
    stated = requirement(resolve("nvcr.io/nvidia/tritonserver:25.10-py3"))  # 13.0: nvidia/cuda's row
    assert stated is not None and stated.forward_stated


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/tritonserver:24.03-vllm-python-py3",  # the variant matrix starts at 24.04
        "nvcr.io/nvidia/tritonserver:24.10-py3-sdk",  # no statement for the SDK image
        "nvcr.io/nvidia/vllm:26.02-py3",  # no NGC vLLM 26.02 notes
        "nvcr.io/nvidia/nemo:25.04.01",
        "nvidia/cuda:12.4.0-base-ubuntu22.04-sdk",
        "nvcr.io/nvidia/pytorch:23.02-py3",  # no statement for NGC 23.02 at all: no guess
        "nvcr.io/nvidia/pytorch:23.10-igpu",  # a variant tag, not inferred
        "nvcr.io/nvidia/tensorflow:24.10-tf2-py3",
    ],
)
def test_unmapped_ngc_tags_give_no_version(image: str) -> None:
    assert resolve(image) is None


@pytest.mark.parametrize(
    ("variant", "main", "variant_cuda", "main_cuda"),
    [
        # Triton's compatibility matrix: variants lag the month's main image
        ("24.10-trtllm-python-py3", "24.10-py3", (12, 5, 1), (12, 6, 2)),
        ("25.10-trtllm-python-py3", "25.10-py3", (12, 9, 1), (13, 0, 2)),
        ("25.10-vllm-python-py3", "25.10-py3", (13, 0, 2), (13, 0, 2)),
    ],
)
def test_variants_resolve_to_their_own_month(
    variant: str, main: str, variant_cuda: tuple[int, ...], main_cuda: tuple[int, ...]
) -> None:
    found = resolve(f"nvcr.io/nvidia/tritonserver:{variant}")
    plain = resolve(f"nvcr.io/nvidia/tritonserver:{main}")
    assert found is not None and plain is not None
    assert (found.version, plain.version) == (variant_cuda, main_cuda)
    assert found.datacenter_drivers is None  # the nvidia/cuda forward-compat table applies


def test_a_variant_on_an_older_cuda_than_the_driver_needs_is_judged_by_its_own_cuda() -> None:
    """24.10-py3 (12.6.2) needs driver 560 natively; its trtllm variant (12.5.1) runs natively on 555."""
    main, variant = resolve("nvcr.io/nvidia/tritonserver:24.10-py3"), resolve(
        "nvcr.io/nvidia/tritonserver:24.10-trtllm-python-py3"
    )
    assert main is not None and variant is not None
    r_main, r_variant = requirement(main), requirement(variant)
    assert r_main is not None and r_variant is not None
    driver = (555, 42, 6)
    assert classify(r_variant, driver, DC) is Mode.NATIVE
    assert classify(r_main, driver, DC) is not Mode.NATIVE


def test_every_ngc_row_cites_nvidia_material() -> None:
    primary = re.compile(r"^(https://docs\.nvidia\.com/|triton-inference-server/server )")
    for row in knowledge().ngc.values():
        assert primary.match(row.source), row

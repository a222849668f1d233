"""What a GPU container needs: user statements, the image config, the image name, in that order."""

from __future__ import annotations

from typing import Any

from policies.cuda.need import NGC_CAVEAT, container_need
from policies.cuda.require import Start, check
from policies.cuda.resolve import parse_image_rules
from policies.images import ImageConfig, ImageLookup
from tests.policies.cuda.test_require import R535, nvidia_cuda_requirement

CUDA_12_8 = ImageConfig(
    env=(("CUDA_VERSION", "12.8.1"), ("NVIDIA_REQUIRE_CUDA", nvidia_cuda_requirement("12.8", [470, 535, 550, 560, 565]))),
    digest="sha256:" + "ab" * 32,
    source="registry example.com, sha256:abab…",
)
# NGC framework images: a four-part CUDA_VERSION and cuda>=9.0 (shared/reference/cuda-images.md section 1)
TRITON_23_12 = ImageConfig(env=(("CUDA_VERSION", "12.3.2.001"), ("NVIDIA_REQUIRE_CUDA", "cuda>=9.0")))


def _need(image: str | None, container: dict[str, Any] | None = None, lookup: ImageLookup | None = None,
          annotations: dict[str, Any] | None = None, rules: Any = (), arch: str = "amd64") -> Any:
    return container_need(image, container or {}, "main", annotations, rules, lookup, arch)


def test_image_config_decides_and_its_requirement_is_modelled() -> None:
    need = _need("example.com/app:1", lookup=ImageLookup("found", CUDA_12_8))
    assert need.status == "cuda" and need.resolution.version == (12, 8, 1)
    assert need.resolution.source == "image config CUDA_VERSION=12.8.1 (registry example.com, sha256:abab…)"
    assert need.informative and need.requirements is not None and not need.notes
    assert need.image_requirement is not None and need.image_requirement.startswith("cuda>=12.8 brand=unknown")


def test_config_wins_over_the_name_but_keeps_ngc_driver_lists_of_the_same_release() -> None:
    need = _need("nvcr.io/nvidia/tritonserver:23.12-py3", lookup=ImageLookup("found", TRITON_23_12))
    assert need.resolution.version == (12, 3, 2)
    assert need.resolution.datacenter_drivers == ((450, 51), (470, 57), (510, 47), (525, 85), (535, 86), (545, 23))
    assert not need.informative
    assert need.notes == (
        "its NVIDIA_REQUIRE_CUDA (cuda>=9.0) asks for less than CUDA 12.3: the runtime's check will not stop it "
        "on an older driver",
    )


def test_a_name_that_knows_better_than_the_config_wins_with_a_note() -> None:
    # Google Cloud's TGI 2.3 DLC: kernels on CUDA 12.4, final stage nvidia/cuda:12.1.0-base
    tgi = "us-docker.pkg.dev/deeplearning-platform-release/gcr.io/huggingface-text-generation-inference-cu124.2-3.ubuntu2204.py311"
    config = ImageConfig(env=(("CUDA_VERSION", "12.1.0"), ("NVIDIA_REQUIRE_CUDA", "cuda>=12.1 brand=tesla,driver>=470,driver<471")))
    need = _need(tgi, lookup=ImageLookup("found", config))
    assert need.resolution.version == (12, 4)
    assert any("final stage is nvidia/cuda:12.1.0-base" in n for n in need.notes)
    assert any("asks for less than CUDA 12.4" in n for n in need.notes)
    offline = _need(tgi)
    assert offline.resolution.version == (12, 4) and any("understates" in n for n in offline.notes)


def test_user_statements_win_over_the_config() -> None:
    rules, _ = parse_image_rules([{"pattern": "^example.com/", "cudaVersion": "12.2"}])
    need = _need("example.com/app:1", lookup=ImageLookup("found", CUDA_12_8), rules=rules)
    assert need.resolution.version == (12, 2) and need.resolution.source.startswith("imageRules")
    annotated = _need("example.com/app:1", lookup=ImageLookup("found", CUDA_12_8),
                      annotations={"gpuguard.io/cuda-version.main": "11.8"})
    assert annotated.resolution.version == (11, 8)
    assert annotated.requirements is not None  # the runtime still checks the image's requirement


def test_requirement_floor_without_cuda_version() -> None:
    config = ImageConfig(env=(("NVIDIA_REQUIRE_CUDA", "cuda>=12.4 brand=tesla,driver>=470,driver<471"),))
    need = _need("example.com/app:1", lookup=ImageLookup("found", config))
    assert need.resolution.version == (12, 4)
    assert need.resolution.source == "image config NVIDIA_REQUIRE_CUDA=cuda>=12.4"


def test_pending_and_failed_lookups_fall_back_to_the_name_with_a_note() -> None:
    pending = _need("nvidia/cuda:12.4.1-base-ubuntu22.04", lookup=ImageLookup("pending", detail="in flight"))
    assert pending.resolution.version == (12, 4, 1) and pending.requirements is None
    assert pending.notes == ("registry lookup pending: in flight; judged by the image name",)
    failed = _need("example.com/private:1", lookup=ImageLookup("failed", detail="401 Unauthorized"))
    assert failed.status == "unknown"
    assert failed.notes == ("registry lookup failed: 401 Unauthorized; judged by the image name",)


def test_plain_images_need_no_cuda_and_configs_without_cuda_are_unknown() -> None:
    plain = _need("ubuntu:22.04")
    assert plain.status == "no-cuda" and plain.resolution is None
    found = _need("ubuntu:22.04", lookup=ImageLookup("found", ImageConfig(env=(("PATH", "/usr/bin"),))))
    assert found.status == "no-cuda"
    custom = _need("example.com/pip-torch:1", lookup=ImageLookup("found", ImageConfig(env=(("PATH", "/bin"),))))
    assert custom.status == "unknown"
    assert custom.notes == ("its image config declares no CUDA_VERSION or NVIDIA_REQUIRE_CUDA",)


def test_pod_disables_or_overrides_the_check() -> None:
    disabled = _need(
        "example.com/app:1",
        {"env": [{"name": "NVIDIA_DISABLE_REQUIRE", "value": "1"}]},
        ImageLookup("found", CUDA_12_8),
    )
    assert disabled.pod_changes_check and not disabled.informative
    assert disabled.notes == ("the pod sets NVIDIA_DISABLE_REQUIRE=1: the NVIDIA runtime checks no requirement",)
    assert check(disabled.requirements, R535).start is Start.OFF
    overridden = _need(
        "nvidia/cuda:12.8.1-base-ubuntu24.04",  # offline: the pod's own variable is still modelled
        {"env": [{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=12.0"}]},
    )
    assert overridden.pod_changes_check and overridden.requirements is not None
    assert "the pod sets NVIDIA_REQUIRE_CUDA=cuda>=12.0: the runtime checks it instead of the image's" in overridden.notes
    assert check(overridden.requirements, R535).start is Start.UNKNOWN  # the image may add requirements


def test_ngc_images_judged_offline_carry_the_cuda_9_caveat() -> None:
    need = _need("nvcr.io/nvidia/pytorch:24.05-py3")
    assert need.resolution.version == (12, 4, 1)
    assert "same-month NGC release inference" in need.resolution.source
    assert need.notes == (NGC_CAVEAT,)


def test_an_annotated_ngc_image_no_source_covers_gets_no_ngc_caveat() -> None:
    """The caveat is about NGC images the tables resolve; an unknown one the user annotates says nothing."""
    need = _need("nvcr.io/nvidia/vllm:26.02-py3", annotations={"gpuguard.io/cuda-version": "13.1"})
    assert need.status == "cuda" and need.resolution.version == (13, 1)
    assert NGC_CAVEAT not in need.notes
    variant = _need("nvcr.io/nvidia/tritonserver:24.06-py3-sdk", annotations={"gpuguard.io/cuda-version": "12.5"})
    assert variant.notes == ()


def test_ngc_variants_judged_by_their_own_month() -> None:
    need = _need("nvcr.io/nvidia/tritonserver:24.06-trtllm-python-py3")
    assert need.status == "cuda" and need.resolution.version == (12, 4, 0)
    assert need.resolution.datacenter_drivers is None


def test_architecture_specific_offline_rows() -> None:
    assert _need("vllm/vllm-openai:v0.11.0").resolution.version == (12, 8, 1)
    assert _need("vllm/vllm-openai:v0.11.0", arch="arm64").resolution.version == (12, 9, 1)
    assert _need("vllm/vllm-openai:v0.8.5", arch="arm64").status == "unknown"

"""The container's final environment as the NVIDIA runtime sees it."""

from __future__ import annotations

from policies.cuda.environment import final_environment, image_value, pod_env
from policies.cuda.require import UNKNOWN, requirements

IMAGE_ENV = (
    ("PATH", "/usr/local/cuda/bin:/usr/bin"),
    ("CUDA_VERSION", "12.8.1"),
    ("NVIDIA_REQUIRE_CUDA", "cuda>=12.8"),
    ("NVIDIA_VISIBLE_DEVICES", "all"),
)


def test_pod_env_overrides_image_env_and_the_last_duplicate_wins() -> None:
    pod = pod_env(
        {
            "env": [
                {"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=11.0"},
                {"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=12.0"},
                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "t", "key": "k"}}},
            ]
        }
    )
    env = final_environment(IMAGE_ENV, pod)
    assert env.complete
    assert env.values["NVIDIA_REQUIRE_CUDA"] == "cuda>=12.0"
    assert env.values["CUDA_VERSION"] == "12.8.1"
    assert "PATH" not in env.values and "HF_TOKEN" not in env.values  # not read by the runtime
    assert requirements(env).texts == ("cuda>=12.0",)


def test_value_from_references_and_missing_values() -> None:
    pod = pod_env(
        {
            "env": [
                {"name": "NVIDIA_DISABLE_REQUIRE", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
                {"name": "NVIDIA_REQUIRE_ARCH", "value": "arch>=$(MIN_ARCH)"},
                {"name": "CUDA_VERSION"},
                "not-a-mapping",
                {"value": "no name"},
            ]
        }
    )
    assert pod.values == {"NVIDIA_DISABLE_REQUIRE": UNKNOWN, "NVIDIA_REQUIRE_ARCH": UNKNOWN, "CUDA_VERSION": ""}
    reqs = requirements(final_environment(IMAGE_ENV, pod))
    assert reqs.disabled is None


def test_env_from_sources_that_may_set_runtime_variables_make_them_unknown() -> None:
    assert pod_env({"envFrom": [{"configMapRef": {"name": "x"}}]}).open
    assert pod_env({"envFrom": [{"prefix": "NV", "secretRef": {"name": "x"}}]}).open
    assert pod_env({"envFrom": [{"prefix": "NVIDIA_REQUIRE_", "secretRef": {"name": "x"}}]}).open
    assert pod_env({"envFrom": [{"prefix": "CUDA_", "secretRef": {"name": "x"}}]}).open
    assert not pod_env({"envFrom": [{"prefix": "APP_", "configMapRef": {"name": "x"}}]}).open
    opened = final_environment(IMAGE_ENV, pod_env({"envFrom": [{"configMapRef": {"name": "x"}}]}))
    assert not opened.complete and opened.values["NVIDIA_REQUIRE_CUDA"] is UNKNOWN


def test_without_the_image_env_only_the_pods_variables_are_known() -> None:
    env = final_environment(None, pod_env({"env": [{"name": "NVIDIA_DISABLE_REQUIRE", "value": "true"}]}))
    assert not env.complete
    assert requirements(env).disabled is True
    assert final_environment(None, pod_env({})).values == {}


def test_image_value_takes_the_last_duplicate() -> None:
    assert image_value((("A", "1"), ("A", "2")), "A") == "2"
    assert image_value(IMAGE_ENV, "MISSING") is None

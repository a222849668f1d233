"""Registry lookups through the faces: ``gpuguard lint``/``explain-image`` (subprocesses, disk cache)
and the webhook app (per-review budget, pending warnings, metrics), against the real registry."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gpuguard.registry.facts import ResolvedImages
from gpuguard.sources.configmodel import load_config
from policies.config import Config
from policies.engine import Evaluation, Prepared, evaluate
from policies.facts import ClusterFacts
from policies.images import ImageFacts
from tests.support.fake_apiserver import gpu_node
from tests.support.paths import FIXTURES
from tests.support.registry import Hostile, Layout, Registry
from webhook.app import StaticFacts, create_app
from webhook.metrics import Metrics

pytestmark = pytest.mark.integration
GPUGUARD = [sys.executable, "-m", "gpuguard.cli"]


def pod(name: str, *images: str) -> dict[str, Any]:
    containers = [
        {"name": f"c{i}", "image": image, "resources": {"limits": {"nvidia.com/gpu": 1}}} for i, image in enumerate(images)
    ]
    # No GPU: looked up for the NVIDIA_VISIBLE_DEVICES its image may set (gpu-device-access-bypass).
    containers.append({"name": "sidecar", "image": "busybox:1.36"})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"}, "spec": {"containers": containers}}


def cli_env(tmp: Path, registry: Registry) -> dict[str, str]:
    docker = tmp / "docker"
    docker.mkdir(exist_ok=True)
    auth = base64.b64encode(b"reader:read-secret").decode()
    (docker / "config.json").write_text(json.dumps({"auths": {registry.host: {"auth": auth}}}))
    env = {k: v for k, v in os.environ.items() if k not in ("REGISTRY_AUTH_FILE", "XDG_CACHE_HOME")}
    env.update(GPUGUARD_CACHE_DIR=str(tmp / "cache"), DOCKER_CONFIG=str(docker), HOME=str(tmp))
    return env


def run(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUGUARD, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def cached_entries(tmp: Path, kind: str) -> list[dict[str, Any]]:
    folder = tmp / "cache" / "registry-v1" / kind
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []


def test_lint_looks_up_gpu_images_caches_them_and_notes_failures(basic_registry: Registry, tmp_path: Path) -> None:
    env = cli_env(tmp_path, basic_registry)
    (tmp_path / "pod.yaml").write_text(
        yaml.safe_dump(pod("train", f"{basic_registry.host}/cuda/app:12.4", f"{basic_registry.host}/cuda/app:9.9"))
    )
    off = run(["lint", "pod.yaml", "--format", "json"], env, tmp_path)
    assert off.returncode in (0, 1), off.stderr
    assert not (tmp_path / "cache").exists()  # off by default: CI stays hermetic

    on = run(["lint", "pod.yaml", "--registry", "--registry-ca", str(basic_registry.ca.cert), "--format", "json"],
             env, tmp_path)
    assert on.returncode in (0, 1), on.stderr
    assert "Traceback" not in on.stderr
    json.loads(on.stdout)  # the report on stdout is untouched
    assert (
        f"gpuguard lint: note: image {basic_registry.host}/cuda/app:9.9 (linux/amd64): registry {basic_registry.host}: "
        f"not found: manifest {basic_registry.host}/cuda/app:9.9 (MANIFEST_UNKNOWN: manifest unknown); "
        "judged by offline knowledge"
    ) in on.stderr
    assert "12.4" not in on.stderr.replace("app:9.9", "")
    [config] = cached_entries(tmp_path, "configs")
    assert ["CUDA_VERSION", "12.4.1"] in config["config"]["env"]
    assert [t["key"] for t in cached_entries(tmp_path, "tags")] == [f"{basic_registry.host}/cuda/app:12.4"]
    failures = sorted(f["key"] for f in cached_entries(tmp_path, "failures"))
    assert failures == sorted([f"{basic_registry.host}/cuda/app:9.9 linux/amd64", "busybox:1.36 linux/amd64"])

    offline = run(["lint", "pod.yaml", "--registry", "--offline"], env, tmp_path)
    assert "usage" in offline.stderr and offline.returncode == 2  # contradictory flags are a usage error
    (tmp_path / ".gpuguard.yaml").write_text(f"registry: {{enabled: true, ca: {basic_registry.ca.cert}}}\n")
    forbidden = run(["lint", "pod.yaml", "--offline"], env, tmp_path)
    assert "note:" not in forbidden.stderr  # --offline wins over the config
    by_config = run(["lint", "pod.yaml"], env, tmp_path)
    assert "note: image" in by_config.stderr


def test_lint_rejects_bad_registry_flags(tmp_path: Path) -> None:
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod("p", "nvcr.io/nvidia/pytorch:24.05-py3")))
    bad_host = run(["lint", "pod.yaml", "--registry", "--insecure-registry", "http://x:5000"], dict(os.environ), tmp_path)
    assert bad_host.returncode == 2
    assert "--insecure-registry: expected HOST or HOST:PORT" in bad_host.stderr
    bad_ca = run(["lint", "pod.yaml", "--registry", "--registry-ca", str(tmp_path / "nope.pem")], dict(os.environ), tmp_path)
    assert bad_ca.returncode == 2
    assert "cannot load the registry CA" in bad_ca.stderr and "Traceback" not in bad_ca.stderr


def test_explain_image_reads_the_config_per_node_architecture(
    basic_registry: Registry, layout: Layout, tmp_path: Path
) -> None:
    env = cli_env(tmp_path, basic_registry)
    arm = gpu_node("gh200-0", product="NVIDIA-GH200-480GB")
    arm["metadata"]["labels"]["kubernetes.io/arch"] = "arm64"
    amd = gpu_node("h100-0")
    amd["metadata"]["labels"]["kubernetes.io/arch"] = "amd64"
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [amd, arm]}))
    image = f"{basic_registry.host}/cuda/app:multi"
    done = run(["explain-image", image, "--cluster", "cluster.yaml", "--registry", "--registry-ca",
                str(basic_registry.ca.cert), "--format", "json"], env, tmp_path)
    assert done.returncode == 0, done.stderr
    section = {e["arch"]: e for e in json.loads(done.stdout)["registry"]}
    assert section["amd64"]["env"]["CUDA_VERSION"] == "12.8.1"
    assert section["arm64"]["env"]["CUDA_VERSION"] == "12.6.3"
    assert section["arm64"]["env"]["NVIDIA_REQUIRE_CUDA"] == "cuda>=12.6"
    assert section["arm64"]["digest"] == layout.platform_digests["multi"]["arm64"]
    text = run(["explain-image", f"{basic_registry.host}/cuda/app:9.9", "--registry", "--registry-ca",
                str(basic_registry.ca.cert)], env, tmp_path)
    assert text.returncode == 0
    assert "registry (linux/amd64): failed: registry" in text.stdout
    assert "MANIFEST_UNKNOWN" in text.stdout and "judged by offline knowledge" in text.stdout


# -- the webhook ---------------------------------------------------------------------------------------------


def review_of(obj: dict[str, Any]) -> dict[str, Any]:
    review: dict[str, Any] = json.loads((FIXTURES / "admission" / "pod-gpu-with-limit.json").read_text())
    review["request"]["object"] = copy.deepcopy(obj)
    return review


class Recorder:
    """The real engine, remembering the image facts each review was evaluated with."""

    def __init__(self) -> None:
        self.seen: list[ImageFacts | None] = []

    def __call__(self, obj: dict[str, Any], config: Config, facts: ClusterFacts, images: ImageFacts | None = None,
                 prepared: Prepared | None = None) -> Evaluation:
        self.seen.append(images)
        return evaluate(obj, config, facts, images, prepared=prepared)


def webhook_config(ca: Path, budget_ms: int, **extra: Any) -> Config:
    return load_config({"registry": {"enabled": True, "ca": str(ca), "reviewBudgetMilliseconds": budget_ms, **extra}})


async def post(client: httpx.AsyncClient, review: dict[str, Any]) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    resp = await client.post("/validate", json=review)
    assert resp.status_code == 200
    response: dict[str, Any] = resp.json()["response"]
    return response, time.monotonic() - started


def test_webhook_first_review_is_pending_later_reviews_use_the_result(
    basic_registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = cli_env(tmp_path, basic_registry)
    monkeypatch.setenv("DOCKER_CONFIG", env["DOCKER_CONFIG"])
    image = f"{basic_registry.host}/cuda/app:12.4"
    recorder = Recorder()
    metrics = Metrics()
    app = create_app(webhook_config(basic_registry.ca.cert, 0), StaticFacts(), metrics=metrics, evaluator=recorder)

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://webhook") as client:
            first, _ = await post(client, review_of(pod("a", image)))
            assert first["allowed"] is True
            assert f"gpuguard: image {image}: registry lookup pending; judged by offline knowledge" in first["warnings"]
            view = recorder.seen[-1]
            assert view is not None
            pending = view.lookup(image, "amd64")
            assert pending is not None and pending.status == "pending"
            # Not a GPU container: looked up for its image's NVIDIA_VISIBLE_DEVICES, but never warned about.
            assert isinstance(view, ResolvedImages) and "busybox:1.36" in view.quiet
            assert not any("busybox" in w for w in first["warnings"])
            service = app.state.image_lookups
            await asyncio.wait_for(asyncio.gather(*service._in_flight.values()), timeout=20)
            second, _ = await post(client, review_of(pod("b", image)))
            assert not any("registry lookup" in w for w in second.get("warnings", []))
            found = recorder.seen[-1].lookup(image, "amd64")  # type: ignore[union-attr]
            assert found is not None and found.status == "found"
            assert found.config is not None and ("CUDA_VERSION", "12.4.1") in found.config.env
            text = (await client.get("/metrics")).text
            # The GPU image and the sidecar's (busybox:1.36, on Docker Hub, which tests cannot reach).
            assert 'gpuguard_image_lookups_total{result="hit"} 2' in text
            assert 'gpuguard_image_lookups_total{result="miss"} 2' in text
            assert 'gpuguard_image_lookups_total{result="pending"} 2' in text
            await service.aclose()

    asyncio.run(scenario())


def test_webhook_never_waits_past_its_budget_for_a_hanging_registry(hostile: Hostile) -> None:
    hostile.hang.add("/v2/stuck/app/manifests/1")
    image = f"{hostile.host}/stuck/app:1"
    config = webhook_config(hostile.ca or Path(), 200, readTimeoutSeconds=1, negativeTTLSeconds=60)
    metrics = Metrics()
    app = create_app(config, StaticFacts(), metrics=metrics)

    async def scenario() -> None:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://webhook") as client:
            first, took = await post(client, review_of(pod("a", image)))
            assert took < 1.0  # the 200 ms budget, not the registry's hang
            assert first["allowed"] is True
            assert f"gpuguard: image {image}: registry lookup pending; judged by offline knowledge" in first["warnings"]
            service = app.state.image_lookups
            await asyncio.wait_for(asyncio.gather(*service._in_flight.values()), timeout=20)
            later, took = await post(client, review_of(pod("b", image)))
            assert took < 1.0
            assert later["allowed"] is True
            [warning] = [w for w in later["warnings"] if "registry lookup" in w]
            assert warning.startswith(f"gpuguard: image {image}: registry lookup failed (")  # with its reason
            assert len(warning) <= 256
            text = (await client.get("/metrics")).text
            assert 'gpuguard_image_lookups_total{result="failure"} 2' in text  # the sidecar's too, unsaid
            await service.aclose()

    asyncio.run(scenario())
    assert len([p for p, _ in hostile.requests if p == "/v2/stuck/app/manifests/1"]) == 1  # one lookup for both reviews


def test_registry_lookups_off_by_default_in_the_webhook() -> None:
    app = create_app(Config(), StaticFacts())
    assert app.state.image_lookups is None

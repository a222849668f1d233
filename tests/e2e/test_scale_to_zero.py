"""A Karpenter cluster scaled to zero GPU nodes, through both faces: ``gpuguard serve`` as a real
process over real TLS answering AdmissionReviews, and ``gpuguard lint`` on the same pods.

The snapshot (tests/fixtures/clusters/karpenter-scale-to-zero.yaml) has one system node and two
real NodePools: a GPU pool of g5-and-newer instances tainted nvidia.com/gpu, and a c/m/r pool.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from certs.tls import Bundle, generate_bundle
from tests.support.lint import run_lint
from tests.support.paths import FIXTURES
from tests.support.webhook_server import LOCAL_SANS, Server, call, decoded_patch, start_server, stop_server
from webhook import admission

pytestmark = pytest.mark.integration

SNAPSHOT = FIXTURES / "clusters" / "karpenter-scale-to-zero.yaml"
UNKNOWN_SHAPE = FIXTURES / "nodepools" / "aws-docs-gpu-p3.yaml"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def gpu_pod(name: str, gpus: int = 1, tolerate: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{
            "name": "train",
            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "resources": {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "8", "memory": "64Gi"}},
        }],
    }
    if tolerate:
        spec["tolerations"] = [copy.deepcopy(TOLERATION)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"}, "spec": spec}


def review(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": obj["metadata"]["name"],
            "namespace": "ml",
            "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": obj,
            "dryRun": False,
        },
    }


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    return generate_bundle("gpuguard", "gpuguard", tmp_path_factory.mktemp("certs"), extra_sans=LOCAL_SANS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, bundle: Bundle) -> Iterator[Server]:
    srv = start_server(
        tmp_path_factory.mktemp("scale-to-zero"), bundle, "--cluster", str(SNAPSHOT),
        config="mutate: [gpu-taint-not-tolerated]\n",
    )
    yield srv
    stop_server(srv)


@pytest.fixture(scope="module")
def unknown_shape_server(tmp_path_factory: pytest.TempPathFactory, bundle: Bundle) -> Iterator[Server]:
    """Only a NodePool whose GPU shape cannot be known (the Karpenter docs' p3 pool) offers GPUs."""
    tmp = tmp_path_factory.mktemp("unknown-shape")
    snapshot = yaml.safe_load(SNAPSHOT.read_text())
    snapshot["items"] = [i for i in snapshot["items"] if i["metadata"]["name"] != "gpu"]
    snapshot["items"] += [d for d in yaml.safe_load_all(UNKNOWN_SHAPE.read_text()) if d]
    path = tmp / "snapshot.yaml"
    path.write_text(yaml.safe_dump(snapshot))
    srv = start_server(tmp, bundle, "--cluster", str(path))
    yield srv
    stop_server(srv)


def test_a_pod_only_a_scaling_pool_fits_is_admitted(server: Server) -> None:
    with server.client() as client:
        response = call(client, "validate", review(gpu_pod("fits-pool", gpus=8)))
    assert response["allowed"] is True, response
    assert not any("taint" in w or "unknown" in w for w in response.get("warnings", []))


def test_a_pod_no_pool_fits_is_denied_naming_the_pool(server: Server) -> None:
    with server.client() as client:
        untolerated = call(client, "validate", review(gpu_pod("no-toleration", tolerate=False)))
        too_big = call(client, "validate", review(gpu_pod("too-big", gpus=16)))
    assert untolerated["allowed"] is False
    message = untolerated["status"]["message"]
    assert "[gpu-taint-not-tolerated]" in message and "Karpenter NodePool 'gpu' (scales up on demand)" in message
    assert too_big["allowed"] is False
    assert "[gpu-exceeds-node-capacity]" in too_big["status"]["message"]
    assert "no single node has more than 8 allocatable (Karpenter NodePool 'gpu'" in too_big["status"]["message"]


def test_mutate_adds_the_toleration_that_opens_the_pool(server: Server) -> None:
    pod = gpu_pod("fix-me", tolerate=False)
    with server.client() as client:
        response = call(client, "mutate", review(pod))
        ops = decoded_patch(response)
        assert ops == [{"op": "add", "path": "/spec/tolerations",
                        "value": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}]
        pod["spec"]["tolerations"] = ops[0]["value"]
        assert call(client, "validate", review(pod))["allowed"] is True


def test_a_pool_of_unknown_shape_gives_a_warning_not_a_denial(unknown_shape_server: Server) -> None:
    with unknown_shape_server.client() as client:
        response = call(client, "validate", review(gpu_pod("maybe")))
    assert response["allowed"] is True, response
    assert any(w.startswith("gpu-resource-unknown") for w in response["warnings"]), response
    assert all(len(w) <= admission.WARNING_LIMIT for w in response["warnings"])


def test_the_linter_agrees_on_the_same_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pods = [gpu_pod("fits-pool", gpus=8), gpu_pod("no-toleration", tolerate=False), gpu_pod("too-big", gpus=16)]
    manifests = tmp_path / "pods.yaml"
    manifests.write_text(yaml.safe_dump_all(pods))
    code, out, _ = run_lint([str(manifests), "--cluster", str(SNAPSHOT), "--format", "json"], capsys, monkeypatch)
    report = json.loads(out)
    assert code == 1
    errors = sorted((f["name"], f["rule"]) for f in report["findings"] if f["severity"] == "error")
    assert errors == [("no-toleration", "gpu-taint-not-tolerated"), ("too-big", "gpu-exceeds-node-capacity")]
    assert report["summary"]["scaling_pools"] == ["Karpenter NodePool 'general-purpose'", "Karpenter NodePool 'gpu'"]
    assert report["summary"]["extended_resource_toleration"] is None
    code, text, _ = run_lint([str(manifests), "--cluster", str(SNAPSHOT)], capsys, monkeypatch)
    assert "note: cluster: 2 node pools scale up and count as nodes" in text

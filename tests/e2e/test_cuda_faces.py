"""gpu-cuda-driver-mismatch through both faces: `gpuguard lint` (with --fix) and the webhook."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import orjson
import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from policies.facts import ClusterFacts
from policies.facts_build import facts_from_objects
from tests.support.lint import run_lint
from tests.support.paths import ROOT
from webhook.app import StaticFacts, create_app

EXAMPLE_CLUSTER = ROOT / "examples" / "cluster.yaml"

# A CUDA 12.4 image on a pod that tolerates every GPU pool of the example cluster plus a GeForce
# pool on R470: the H100 pool runs it natively, the A100 pool under minor-version compatibility,
# the Tesla T4 under forward compatibility, and the GeForce pool (no forward compatibility on
# consumer GPUs, below the 12.x family floor) not at all.
MANIFEST = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: cuda13-smoke
  namespace: ml
spec:
  template:
    spec:
      restartPolicy: Never
      tolerations:
        - operator: Exists
      containers:
        - name: smoke
          image: nvidia/cuda:12.4.1-runtime-ubuntu22.04  # pinned
          resources:
            limits:
              nvidia.com/gpu: 1
              memory: 1Gi
"""


def _cluster_objects() -> list[dict[str, Any]]:
    (snapshot,) = [d for d in yaml.safe_load_all(EXAMPLE_CLUSTER.read_text()) if d]
    t4 = next(n for n in snapshot["items"] if n["metadata"]["name"] == "t4-pool-1")
    rtx = copy.deepcopy(t4)
    rtx["metadata"]["name"] = "rtx-pool-1"
    rtx["metadata"]["uid"] = "6c1f0b7e-3d2a-4f7e-9a51-000000000099"
    rtx["metadata"]["labels"].update(
        {"kubernetes.io/hostname": "rtx-pool-1", "pool": "rtx", "nvidia.com/gpu.product": "NVIDIA-GeForce-RTX-3090"}
    )
    snapshot["items"].append(rtx)
    return [snapshot]


@pytest.fixture()
def cluster_file(tmp_path: Path) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(_cluster_objects()))
    return str(path)


@pytest.fixture()
def facts() -> ClusterFacts:
    return facts_from_objects(_cluster_objects())


def test_lint_reports_the_image_line_and_fixes_with_affinity(
    tmp_path: Path, cluster_file: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(MANIFEST)
    code, out, _ = run_lint([str(path), "--cluster", cluster_file, "--format", "json"], capsys, monkeypatch)
    report = json.loads(out)
    (finding,) = [f for f in report["findings"] if f["rule"] == "gpu-cuda-driver-mismatch"]
    assert finding["severity"] == "warning"
    assert (finding["line"], finding["column"]) == (14, 11)
    assert finding["path"] == "/spec/template/spec/containers/0/image"
    assert "12.4" in finding["message"] and "rtx-pool-1" in finding["message"]
    assert finding["fix"]
    assert code == 0  # a warning stays under the default --fail-on error

    before = yaml.safe_load(MANIFEST)
    run_lint([str(path), "--cluster", cluster_file, "--fix"], capsys, monkeypatch)
    text = path.read_text()
    assert "# pinned" in text
    fixed = yaml.safe_load(text)
    assert fixed == jsonpatch.apply_patch(before, finding["fix"])
    terms = fixed["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    keys = {e["key"] for t in terms for e in t["matchExpressions"]}
    assert keys & {"nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver.major"}
    _, out, _ = run_lint([str(path), "--cluster", cluster_file, "--format", "json"], capsys, monkeypatch)
    assert all(f["fix"] is None for f in json.loads(out)["findings"])


def _review(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "0b4f1f9a-1c0e-4d1e-9a55-6f1f0c1d2e3f",
                "kind": {"group": "batch", "version": "v1", "kind": "Job"},
                "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
                "requestKind": {"group": "batch", "version": "v1", "kind": "Job"},
                "requestResource": {"group": "batch", "version": "v1", "resource": "jobs"},
                "name": "cuda13-smoke",
                "namespace": "ml",
                "operation": "CREATE",
                "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
                "object": obj,
                "oldObject": None,
                "dryRun": False,
                "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
            },
        }
    )


def _post(app: Any, path: str, body: bytes) -> dict[str, Any]:
    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://webhook") as client:
            return await client.post(path, content=body, headers={"content-type": "application/json"})

    response = asyncio.run(go())
    assert response.status_code == 200
    result: dict[str, Any] = response.json()["response"]
    return result


def test_webhook_warns_then_mutation_steers_and_is_idempotent(facts: ClusterFacts) -> None:
    obj = yaml.safe_load(MANIFEST)
    app = create_app(load_config({"mutate": ["gpu-cuda-driver-mismatch"], "mutateTemplates": True}), StaticFacts(facts))
    verdict = _post(app, "/validate", _review(obj))
    assert verdict["allowed"] is True
    assert any("gpu-cuda-driver-mismatch" in w for w in verdict["warnings"])
    mutation = _post(app, "/mutate", _review(obj))
    patch = json.loads(base64.b64decode(mutation["patch"]))
    patched = jsonpatch.apply_patch(obj, patch)
    assert "affinity" in patched["spec"]["template"]["spec"]
    again = _post(app, "/mutate", _review(patched))
    assert "patch" not in again


def test_webhook_denies_when_no_candidate_can_run_the_image(facts: ClusterFacts) -> None:
    obj = yaml.safe_load(MANIFEST)
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"pool": "rtx"}
    verdict = _post(create_app(load_config({}), StaticFacts(facts)), "/validate", _review(obj))
    assert verdict["allowed"] is False
    assert verdict["status"]["code"] == 403
    assert "[gpu-cuda-driver-mismatch] spec.template.spec.containers[0].image" in verdict["status"]["message"]

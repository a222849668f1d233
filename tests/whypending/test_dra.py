"""``gpuguard why-pending`` in a cluster where NVIDIA's DRA driver serves ``nvidia.com/gpu``
(tests/fixtures/dra/nvidia-mixed-cluster.yaml): from a dump and from a live cluster, the DRA objects
reach both the engine's static findings and the device-plugin counts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuguard.cli import main
from gpuguard.kube.live import list_cluster
from policies.pending import diagnose as dg
from tests.policies.pending.test_dra import h100_pod, mixed_items, without_dra
from tests.support.fake_apiserver import ALL_RESOURCES, DRA_RESOURCES, TYPE_META, FakeApiServer, api_client, serving

POD = "ml/dra-served"


def report(capsys: pytest.CaptureFixture[str], path: Path, items: list[dict[str, Any]]) -> dict[str, Any]:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    code = main(["why-pending", POD, "--dump", str(path), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_a_dra_served_gpu_is_neither_unschedulable_nor_insufficient(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    [pod] = report(capsys, tmp_path / "dra.json", [*mixed_items(), h100_pod()])["pods"]
    assert [r["kind"] for r in pod["reasons"]] == [dg.DRA_SERVED]
    assert "DeviceClass gpu.nvidia.com" in pod["reasons"][0]["message"]


def test_without_the_dra_objects_the_same_pod_looks_unschedulable(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    [pod] = report(capsys, tmp_path / "plain.json", [*without_dra(mixed_items()), h100_pod()])["pods"]
    kinds = [r["kind"] for r in pod["reasons"]]
    assert kinds == [dg.STATIC, dg.INSUFFICIENT]
    assert "gpu-node-selector-mismatch" in pod["reasons"][0]["message"]


RESOURCE_OF = {meta["kind"]: resource for resource, meta in TYPE_META.items()}


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer((*ALL_RESOURCES, *DRA_RESOURCES))
    for obj in [*mixed_items(), h100_pod()]:
        state.put(RESOURCE_OF[obj["kind"]], obj)
    with serving(state):
        yield state


@pytest.mark.integration
def test_a_live_listing_reads_the_dra_objects_at_the_served_version(api: FakeApiServer) -> None:
    with api_client(api) as c:
        listing = list_cluster(c, page_size=2)
    assert listing.notes == []
    kinds = sorted(o["kind"] for o in listing.objects.dra)
    assert kinds == sorted(o["kind"] for o in mixed_items() if o["apiVersion"].startswith("resource.k8s.io/"))
    assert {o["apiVersion"] for o in listing.objects.dra} == {"resource.k8s.io/v1"}
    slices = [o for o in listing.objects.dra if o["kind"] == "ResourceSlice"]
    assert all(o["spec"]["devices"] for o in slices)  # kept whole, not pruned


@pytest.mark.integration
def test_a_cluster_without_dra_lists_none_and_says_nothing() -> None:
    state = FakeApiServer(ALL_RESOURCES)
    for obj in without_dra(mixed_items()):
        state.put(RESOURCE_OF[obj["kind"]], obj)
    with serving(state), api_client(state) as c:
        listing = list_cluster(c)
    assert listing.objects.dra == [] and listing.notes == []

"""Placement cells of the audit's node-pool matrix: the scheduler model's verdict per node group and
the CUDA verdict of the images there, for the before/after snapshots of tests/fixtures/audit."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuguard.sources.configmodel import load_config
from gpuguard.sources.snapshot import load_cluster_facts
from policies.config import Config
from policies.facts import ClusterFacts
from policies.facts_build import facts_from_objects
from policies.placement import Cell, Placer, gpu_groups, merge_cells
from policies.podspec import extract
from tests.support.paths import FIXTURES, load_yaml_docs

AUDIT = FIXTURES / "audit"
BEFORE = load_cluster_facts(str(AUDIT / "cluster-before.yaml"))
AFTER = load_cluster_facts(str(AUDIT / "cluster-after.yaml"))
WORKLOADS = {(o["kind"], o["metadata"]["name"]): o for o in load_yaml_docs(AUDIT / "workloads.yaml")[0]["items"]}


def cells_by_product(facts: ClusterFacts, obj: dict[str, Any], config: Config | None = None,
                     template: int = 0) -> dict[str, list[Cell]]:
    placer = Placer(facts, config or Config())
    pod = extract(obj)[template]
    cells = placer.cells(obj, pod)
    assert cells is not None
    out: dict[str, list[Cell]] = {}
    for group, cell in zip(placer.groups, cells, strict=True):
        key = group.representative.gpu_product or "?"
        if "nvidia.com/mig-1g.10gb" in group.representative.allocatable:
            key += " MIG"
        out.setdefault(key, []).append(cell)
    return out


def test_gpu_groups_leave_cpu_nodes_out() -> None:
    products = {g.representative.gpu_product for g in gpu_groups(BEFORE, Config())}
    assert products == {"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "Tesla-T4"}
    assert all(g.representative.name != "cpu-1" for g in gpu_groups(BEFORE, Config()))


def test_a_selector_rules_out_other_pools_with_the_schedulers_reason() -> None:
    cells = cells_by_product(BEFORE, WORKLOADS[("Deployment", "t4-batch")])
    assert {c.status for c in cells["Tesla-T4"]} == {"fits"}
    assert all(c.cuda == "native" for c in cells["Tesla-T4"])  # Triton 23.10 is CUDA 12.2.2, the driver 535.216.01
    for product in ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"):
        for cell in cells[product]:
            assert cell.status == "no"
            assert "labels do not match the nodeSelector/required node affinity" in cell.reasons


def test_a_driver_rollback_turns_native_into_minor_version_compatibility() -> None:
    job = WORKLOADS[("PyTorchJob", "llama-ft")]
    before = cells_by_product(BEFORE, job)["NVIDIA-A100-SXM4-80GB"]
    after = cells_by_product(AFTER, job)["NVIDIA-A100-SXM4-80GB"]
    assert {(c.status, c.cuda) for c in before} == {("fits", "native")}
    assert {(c.status, c.cuda) for c in after} == {("compat", "minor-version")}
    assert any("needs CUDA 12.4.1" in r and "on driver 535.216.01" in r for c in after for r in c.reasons)


def test_a_cuda_13_image_runs_forward_compatible_on_r535_and_not_on_r470() -> None:
    # CUDA 13.0 needs driver 580+; no minor-version compatibility reaches back to R535 or R470, and
    # forward compatibility (data-center GPUs, T4 included) covers R535 but not R470, as the rule's
    # own documented example says (policies/rules/gpu_cuda_driver_mismatch.py)
    batch = copy.deepcopy(WORKLOADS[("Deployment", "t4-batch")])
    batch["spec"]["template"]["spec"]["containers"][0]["image"] = "nvidia/cuda:13.0.2-runtime-ubuntu22.04"
    assert {(c.status, c.cuda) for c in cells_by_product(BEFORE, batch)["Tesla-T4"]} == {("compat", "forward")}
    nodes = copy.deepcopy(load_yaml_docs(AUDIT / "cluster-before.yaml")[0]["items"])
    for node in nodes:
        if node["metadata"]["name"].startswith("t4-"):
            labels = node["metadata"]["labels"]
            labels.update({"nvidia.com/cuda.driver-version.full": "470.256.02",
                           "nvidia.com/cuda.driver-version.major": "470",
                           "nvidia.com/cuda.driver-version.minor": "256",
                           "nvidia.com/cuda.driver-version.revision": "02",
                           "nvidia.com/cuda.runtime-version.full": "11.4",
                           "nvidia.com/cuda.runtime-version.major": "11",
                           "nvidia.com/cuda.runtime-version.minor": "4"})
    old = facts_from_objects(nodes)
    cells = cells_by_product(old, batch)["Tesla-T4"]
    assert {(c.status, c.cuda) for c in cells} == {("cuda", "incompatible")}
    assert any("on driver 470.256.02" in r for c in cells for r in c.reasons)


def test_a_new_taint_and_a_mig_repartition_say_why_not() -> None:
    vllm = WORKLOADS[("Deployment", "vllm-llama")]
    after = cells_by_product(AFTER, vllm)
    (tainted,) = after["NVIDIA-H100-80GB-HBM3"]
    assert tainted.status == "no" and tainted.reasons == ("untolerated taint dedicated=training:NoSchedule",)
    (mig,) = after["NVIDIA-H100-80GB-HBM3 MIG"]
    assert mig.status == "no" and mig.reasons == ("offers no nvidia.com/gpu",)
    probe = cells_by_product(AFTER, WORKLOADS[("Job", "mig-probe")])
    assert [c.status for c in probe["NVIDIA-H100-80GB-HBM3 MIG"]] == ["fits"]


def test_a_pod_bound_to_a_node_fits_only_there() -> None:
    scratch = WORKLOADS[("Pod", "scratch")]  # spec.nodeName: h100-1
    placer = Placer(BEFORE, Config())
    cells = placer.cells(scratch, extract(scratch)[0])
    assert cells is not None
    by_node = {m.name: c for g, c in zip(placer.groups, cells, strict=True) for m in g.members}
    assert by_node["h100-1"].status == "fits"
    assert by_node["a100-1"] == Cell("no", ("the pod is bound to node h100-1",), None)


def test_cuda_verdicts_follow_the_config() -> None:
    job = WORKLOADS[("PyTorchJob", "llama-ft")]
    off = load_config({"rules": {"gpu-cuda-driver-mismatch": {"severity": "off"}}})
    after = cells_by_product(AFTER, job, off)["NVIDIA-A100-SXM4-80GB"]
    assert {(c.status, c.cuda) for c in after} == {("fits", None)}
    pinned = load_config({"rules": {"gpu-cuda-driver-mismatch": {"options": {"imageRules": [
        {"pattern": "^nvcr.io/nvidia/pytorch:24.05", "cudaVersion": "12.2"}]}}}})
    assert {(c.status, c.cuda) for c in cells_by_product(AFTER, job, pinned)["NVIDIA-A100-SXM4-80GB"]} == {
        ("fits", "native")}


def test_templates_without_gpu_requests_have_no_cells() -> None:
    web = WORKLOADS[("Deployment", "frontend")]
    assert Placer(BEFORE, Config()).cells(web, extract(web)[0]) is None


@pytest.mark.parametrize(
    ("cells", "expected"),
    [
        ([Cell("fits", (), "native")] * 3, Cell("fits", (), "native")),
        ([Cell("no", ("x",), None), Cell("fits", (), "native")],
         Cell("fits", ("not on every node of this column (elsewhere: no)",), "native")),
        ([Cell("cuda", ("old driver",), "incompatible"), Cell("compat", ("mvc",), "minor-version")],
         Cell("compat", ("mvc", "not on every node of this column (elsewhere: cuda)"), "minor-version")),
        ([], Cell("no", ("not evaluated",), None)),
    ],
)
def test_merged_cells_keep_the_most_permissive_verdict(cells: list[Cell], expected: Cell) -> None:
    assert merge_cells(cells) == expected

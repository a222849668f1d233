"""The audit of tests/fixtures/audit/workloads.yaml against a planned change with three parts: the A100
driver rolled back (550.127.05 → 535.216.01), the T4 pool retired, h100-1 reserved for training with
a new taint and h100-2 repartitioned with MIG (see .ci/audit_fixtures.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuguard.audit.auditor import MAX_MATRIX_ROWS, Auditor
from gpuguard.audit.dumps import DumpReader
from gpuguard.audit.model import LIVE, AuditResult
from gpuguard.sources.snapshot import load_cluster_facts
from policies.config import Config
from policies.facts import ClusterFacts
from policies.facts_build import facts_from_objects
from policies.types import Severity
from tests.support.paths import FIXTURES

AUDIT = FIXTURES / "audit"
WORKLOADS = str(AUDIT / "workloads.yaml")
BEFORE = load_cluster_facts(str(AUDIT / "cluster-before.yaml"))
AFTER = load_cluster_facts(str(AUDIT / "cluster-after.yaml"))

INTRODUCED = {
    # the T4 pool is gone: t4-batch's selector picks no node, and every node left is tainted
    ("gpu-node-selector-mismatch", "Deployment", "t4-batch", "error", None),
    ("gpu-taint-not-tolerated", "Deployment", "t4-batch", "error", None),
    # h100-1 gets dedicated=training, h100-2 offers MIG slices only: nowhere for vllm-llama
    ("gpu-taint-not-tolerated", "Deployment", "vllm-llama", "error", None),
    ("gpu-taint-not-tolerated", "Pod", "scratch", "error", None),  # bound to h100-1
    # the A100 driver rollback: CUDA 12.4.1 images run only under minor-version compatibility
    ("gpu-cuda-driver-mismatch", "PyTorchJob", "llama-ft", "warning", None),  # Master
    ("gpu-cuda-driver-mismatch", "PyTorchJob", "llama-ft", "warning", None),  # Worker
    # native on some nodes before (info), compat-only on the A100s left after (warning)
    ("gpu-cuda-driver-mismatch", "StatefulSet", "jupyter", "warning", "info"),
    ("gpu-cuda-driver-mismatch", "CronJob", "nightly-eval", "warning", "info"),
}
RESOLVED = {("gpu-resource-unknown", "Job", "mig-probe", "error", None)}  # h100-2 now offers 1g.10gb slices
UNCHANGED = {("gpu-shared-memory", "Pod", "scratch", "warning", None)}


def audit(facts: ClusterFacts, after: ClusterFacts | None = None, **kwargs: Any) -> AuditResult:
    auditor = Auditor(Config(), facts, after, cluster="before", cluster_after="after" if after else None, **kwargs)
    DumpReader(auditor).read([WORKLOADS])
    return auditor.finish()


def rows(result: AuditResult, change: str) -> list[tuple[Any, ...]]:
    return sorted(
        (f.finding.rule, f.ref.kind, f.ref.name, str(f.severity),
         str(f.previous_severity) if f.previous_severity is not None else None)
        for f in result.by_change(change)  # type: ignore[arg-type]
    )


def test_the_planned_change_introduces_resolves_and_keeps_exactly_these_findings() -> None:
    result = audit(BEFORE, AFTER)
    assert result.errors == []
    introduced = rows(result, "introduced")
    assert sorted(set(introduced)) == sorted(INTRODUCED)
    assert len(introduced) == 8  # both PyTorchJob templates
    paths = sorted(f.finding.path for f in result.by_change("introduced") if f.ref.kind == "PyTorchJob")
    assert paths == ["/spec/pytorchReplicaSpecs/Master/template/spec/containers/0/image",
                     "/spec/pytorchReplicaSpecs/Worker/template/spec/containers/0/image"]
    assert rows(result, "resolved") == sorted(RESOLVED)
    assert rows(result, "unchanged") == sorted(UNCHANGED)
    assert result.change_counts() == {"introduced": 8, "resolved": 1, "unchanged": 1}
    assert result.exit_code() == 1  # introduced errors, --fail-on error


def test_exit_codes_follow_introduced_findings_only() -> None:
    result = audit(BEFORE, BEFORE)  # no change at all
    assert result.change_counts()["introduced"] == 0 and result.change_counts()["unchanged"] == 4
    assert result.exit_code() == 0  # mig-probe is an error today, but the change does not introduce it
    today = audit(BEFORE)
    assert today.exit_code() == 1  # without --cluster-after, as lint: an error exists


def test_pods_and_children_are_reported_through_their_owners() -> None:
    result = audit(BEFORE)
    c = result.counts
    assert (c.objects, c.gpu_workloads, c.through_owners, c.terminal_pods, c.exempt) == (8, 7, 11, 1, 1)
    owned = {ref.name: result.pods_through(ref) for ref in result.gpu_objects}
    assert owned == {"vllm-llama": 3, "t4-batch": 3, "llama-ft": 2, "jupyter": 1, "mig-probe": 1,
                     "nightly-eval": 1, "scratch": 0}
    assert all(f.ref.kind != "ReplicaSet" and (f.ref.kind != "Pod" or f.ref.name == "scratch")
               for f in result.findings)


def test_findings_carry_the_object_and_where_it_was_read() -> None:
    (mig,) = [f for f in audit(BEFORE).findings if f.ref.name == "mig-probe"]
    d = mig.to_dict()
    assert (d["kind"], d["name"], d["namespace"], d["apiVersion"]) == ("Job", "mig-probe", "research", "batch/v1")
    assert d["uid"] == "5f0c2a7e-91d3-4b6a-8e2f-000000000040"
    assert d["file"] == WORKLOADS and isinstance(d["line"], int) and d["line"] > 1
    assert "change" not in d


def test_the_matrix_has_one_column_per_node_pool_and_marks_what_changed() -> None:
    result = audit(BEFORE, AFTER, matrix=True)
    matrix = result.matrix
    assert matrix is not None and matrix.facts == "after"
    assert [c.label for c in matrix.columns] == ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3",
                                                 "NVIDIA-A100-SXM4-80GB"]
    assert [c.nodes for c in matrix.columns] == [1, 1, 2]  # the two A100s (zones a and b) share a column
    assert matrix.removed == ["Tesla-T4 (3 nodes; g4dn.xlarge; driver 535.216.01; 1 nvidia.com/gpu)"]
    by_name = {(r.ref.name, r.template): r for r in matrix.rows}
    assert len(by_name) == 8  # the seven GPU workloads, one row per pod template (PyTorchJob: two)
    probe = by_name[("mig-probe", "spec.template")]
    assert [c.status for c in probe.cells] == ["no", "fits", "no"]
    assert [b.status if b else None for b in probe.before] == ["no", "no", "no"]
    # a pod bound to h100-1 never ran on h100-2 either: its cell there did not change
    scratch = by_name[("scratch", "")]
    assert [c.status for c in scratch.cells] == ["no", "no", "no"]
    assert [b.status if b else None for b in scratch.before] == ["fits", "no", "no"]
    master = by_name[("llama-ft", "spec.pytorchReplicaSpecs.Master.template")]
    assert master.cells[2].status == "compat" and master.before[2] is not None and master.before[2].status == "fits"
    assert master.worst is Severity.WARNING
    # rows with findings come first, most severe first
    assert [r.worst for r in matrix.rows][:4] == [Severity.ERROR] * 3 + [Severity.WARNING]


def test_without_facts_the_rules_that_need_them_are_skipped_and_named() -> None:
    result = audit(ClusterFacts.empty())
    assert "gpu-taint-not-tolerated" in result.skipped_rules
    assert {f.finding.rule for f in result.findings} == {"gpu-shared-memory"}


def test_bounded_mode_keeps_the_most_severe_findings_per_namespace() -> None:
    result = audit(BEFORE, limit_per_namespace=1)
    research = [f for f in result.findings if f.ref.namespace == "research"]
    assert [str(f.severity) for f in research] == ["error"]  # mig-probe's error beats two infos
    assert result.truncated == {"research": 2}
    assert result.summary()["findings_dropped"] == {"research": 2}


def test_the_same_object_read_twice_is_counted_once(tmp_path: Path) -> None:
    copy = tmp_path / "again.yaml"
    copy.write_text((AUDIT / "workloads.yaml").read_text())
    auditor = Auditor(Config(), BEFORE)
    DumpReader(auditor).read([WORKLOADS, str(copy)])
    result = auditor.finish()
    assert result.counts.objects == 8 and result.counts.duplicates == 21  # every object of the second dump
    assert len(result.findings) == len(audit(BEFORE).findings)


@pytest.mark.parametrize("count", [MAX_MATRIX_ROWS + 5])
def test_the_matrix_is_bounded(count: int) -> None:
    auditor = Auditor(Config(), BEFORE, matrix=True)
    base: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [
        {"name": "c", "image": "nvidia/cuda:12.4.1-base-ubuntu22.04",
         "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}}
    for i in range(count):
        auditor.feed({**base, "metadata": {"name": f"p{i}", "namespace": "ml", "uid": f"u{i}"}}, LIVE)
    result = auditor.finish()
    assert result.matrix is not None
    assert len(result.matrix.rows) == MAX_MATRIX_ROWS and result.matrix.omitted == 5
    assert result.counts.gpu_workloads == count


MIXED = FIXTURES / "dra" / "nvidia-mixed-cluster.yaml"


def _gpu_pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "ml", "uid": f"u{i}"},
            "spec": {"tolerations": [{"operator": "Exists"}], "containers": [
                {"name": "main", "image": "ubuntu:22.04", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}


def test_a_node_serving_gpus_both_ways_is_one_finding_on_the_node_not_one_per_pod() -> None:
    auditor = Auditor(Config(), load_cluster_facts(str(MIXED)))
    for i in range(10):
        auditor.feed(_gpu_pod(i), LIVE)
    result = auditor.finish()
    mixed = [f for f in result.findings if f.finding.rule == "gpu-dra-mixed-allocation"]
    on_nodes = [f for f in mixed if f.ref.kind == "Node"]
    assert [(f.ref.name, f.ref.api_version, f.severity) for f in on_nodes] == [("mixed-l4-0", "v1", Severity.WARNING)]
    assert {f.severity for f in mixed if f.ref.kind == "Pod"} == {Severity.INFO}
    assert result.severity_counts()["warning"] == 1
    assert result.counts.objects == 10  # the node is no audited object


def test_a_planned_change_that_fixes_the_node_resolves_its_finding() -> None:
    import copy

    import yaml

    objects = list(yaml.safe_load_all(MIXED.read_text()))
    fixed = copy.deepcopy(objects)
    for obj in (fixed[0]["items"] if fixed[0].get("kind") == "List" else fixed):
        if obj.get("kind") == "Node" and obj["metadata"]["name"] == "mixed-l4-0":
            # the GPU Operator's nvidia.com/gpu.deploy.device-plugin=false: the device plugin is gone
            obj["status"] = {"allocatable": {k: v for k, v in obj["status"]["allocatable"].items() if "/" not in k}}
    auditor = Auditor(Config(), facts_from_objects(objects), facts_from_objects(fixed),
                      cluster="before", cluster_after="after")
    result = auditor.finish()
    assert [(f.ref.kind, f.ref.name, f.change) for f in result.findings] == [("Node", "mixed-l4-0", "resolved")]

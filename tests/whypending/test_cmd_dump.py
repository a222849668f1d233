"""``gpuguard why-pending --dump``: which pods, the reasons and evidence, JSON shape, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuguard.cli import main
from policies.engine import evaluate
from policies.facts_build import facts_from_objects
from policies.pending import diagnose as dg
from tests.support.cluster_objects import all_objects, scenario
from tests.support.fake_apiserver import nodepool
from tests.support.inprocess import gpuguard_here
from tests.support.proc import gpuguard
from tests.whypending.support import cluster, objects, pod_keys, reasons, write_dump

SHAPES = ("list", "docs", "json")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("dumps")
    items = objects()
    return {shape: write_dump(items, base / f"cluster-{shape}.{'json' if shape == 'json' else 'yaml'}", shape)
            for shape in SHAPES}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["why-pending", *args])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = run(capsys, *args, "--format", "json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_every_dump_shape_gives_the_same_report(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path]) -> None:
    docs = [as_json(capsys, "--dump", str(dumps[shape]), "-A") for shape in SHAPES]
    assert docs[0] == docs[1] == docs[2]


def test_json_is_the_issues_shape(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path]) -> None:
    doc = as_json(capsys, "--dump", str(dumps["json"]), "-A")
    assert set(doc) == {"pods", "workloads", "cluster"} and set(doc["cluster"]) == {"pools"}
    for p in doc["pods"]:
        assert set(p) == {"name", "namespace", "gpus", "reasons"}
        kinds = [r["kind"] for r in p["reasons"]]
        assert [dg.KINDS.index(k) for k in kinds] == sorted(dg.KINDS.index(k) for k in kinds)
        for r in p["reasons"]:
            assert set(r) <= {"kind", "message", "nodes", "pods"} and r["message"]
    for pool in doc["cluster"]["pools"]:
        assert set(pool) == {"name", "resource", "allocatable", "allocated", "free"}  # no "idle" without Prometheus
    l4 = next(p for p in doc["cluster"]["pools"] if p["name"] == "NVIDIA-L4 (g6.12xlarge)")
    # l4-notready 4 free + l4-b 4 − kata-infer's 2
    assert (l4["allocatable"], l4["allocated"], l4["free"]) == (8, 2, 6)


def test_pods_the_scheduler_tried_and_gated_ones(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path]) -> None:
    code, out, err = run(capsys, "--dump", str(dumps["list"]), "-A", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    # cpu-pending asks no GPU; just-created has no PodScheduled=False condition and no event;
    # fits-now has only an events.k8s.io event (the condition is missing): events are the fallback
    assert pod_keys(doc) == ["ml/big-train", "ml/fits-now", "ml/gated", "ml/medium", "research/urgent",
                             "serving/l4-infer"]
    assert [r["kind"] for r in reasons(doc, "ml/gated").values()] == [dg.GATED]
    assert "example.com/quota" in reasons(doc, "ml/gated")[dg.GATED]["message"]
    assert "1 unbound GPU pod has no scheduling attempt recorded yet" in err


def test_fragmentation_evidence(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path]) -> None:
    doc = as_json(capsys, "--dump", str(dumps["json"]), "-n", "ml", "big-train")
    found = reasons(doc, "ml/big-train")
    assert list(found) == [dg.STATIC, dg.SCHEDULER, dg.FRAGMENTATION]
    frag = found[dg.FRAGMENTATION]
    # h100-a: 8 − train-a 4 − notebook 2; h100-b: 8 − init-pod 3 (init container peak) − sidecar-pod 3
    # (sidecar 1 + main 2); done-job and crashed are terminal and hold nothing
    assert frag["nodes"] == ["h100-a", "h100-b"]
    assert "4 free on the 3 nodes that fit the pod otherwise, at most 2 on one; the pod needs 4" in frag["message"]
    scheduler = found[dg.SCHEDULER]["message"]
    assert scheduler.startswith("PodScheduled condition: 3 of 10 nodes: not enough nvidia.com/gpu left")
    assert "preemptionPolicy: Never" in scheduler


def test_overhead_strands_gpus(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path]) -> None:
    doc = as_json(capsys, "--dump", str(dumps["json"]), "-n", "serving")
    assert pod_keys(doc) == ["serving/l4-infer"]
    found = reasons(doc, "serving/l4-infer")
    assert list(found) == [dg.STATIC, dg.SCHEDULER, dg.INSUFFICIENT, dg.UNHEALTHY]
    assert "l4-b" in found[dg.INSUFFICIENT]["nodes"]
    assert found[dg.UNHEALTHY]["nodes"] == ["l4-notready"]
    code, text, _ = run(capsys, "--dump", str(dumps["json"]), "-n", "serving")
    # 48 cpu − 44 requested − 250m RuntimeClass overhead = 3750m < 4
    assert "l4-b (NVIDIA-L4 (g6.12xlarge)): 2 nvidia.com/gpu free — Insufficient cpu (3750m free, the pod asks 4)" \
        in " ".join(text.split())
    assert code == 0


def test_health_and_preemption(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path]) -> None:
    doc = as_json(capsys, "--dump", str(dumps["json"]), "-A", "ml/medium", "research/urgent")
    medium = reasons(doc, "ml/medium")
    assert medium[dg.PLUGIN_DOWN]["nodes"] == ["a100-down", "a100-gone", "a100-never"]
    assert medium[dg.PREEMPTIBLE]["pods"] == ["ml/notebook-idle"]
    urgent = reasons(doc, "research/urgent")
    assert urgent[dg.PREEMPTIBLE]["message"].startswith("preemption is under way: waiting for ml/terminating")


def test_static_reasons_are_the_engines_findings(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path]) -> None:
    doc = as_json(capsys, "--dump", str(dumps["json"]), "-n", "ml", "big-train")
    parts = cluster()
    facts = facts_from_objects([*parts["nodes"], *parts["runtimeclasses"]])
    big = next(p for p in parts["pods"] if p["metadata"]["name"] == "big-train")
    findings = evaluate(big, None, facts).findings
    assert findings
    expected = [f"{f.severity} {f.rule}: {f.message}" for f in findings]
    got = [r["message"] for r in doc["pods"][0]["reasons"] if r["kind"] == dg.STATIC]
    assert got == expected


def test_config_turns_a_rule_off(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path], tmp_path: Path) -> None:
    config = tmp_path / "gpuguard.yaml"
    config.write_text("rules:\n  gpu-shared-memory: off\n")
    doc = as_json(capsys, "--dump", str(dumps["json"]), "-n", "ml", "big-train", "--config", str(config))
    assert dg.STATIC not in reasons(doc, "ml/big-train")


def test_karpenter_nodepools_count_for_the_static_checks(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    parts = scenario()
    waiting = next(p for p in parts["pods"] if p["metadata"]["name"] == "fits-now")
    waiting["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": "gpu"}
    items = all_objects(parts)
    without = as_json(capsys, "--dump", str(write_dump(items, tmp_path / "a.json", "json")), "-n", "ml", "fits-now")
    assert any("gpu-node-selector-mismatch" in r["message"] for r in reasons(without, "ml/fits-now").values())
    pools = write_dump([*items, nodepool("gpu", ["g5"])], tmp_path / "b.json", "json")
    code, out, err = run(capsys, "--dump", str(pools), "-n", "ml", "fits-now", "--format", "json")
    assert code == 0 and dg.STATIC not in reasons(json.loads(out), "ml/fits-now")
    assert "1 Karpenter NodePool can add nodes" in err


def test_namespace_default_and_all(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path]) -> None:
    code, out, err = run(capsys, "--dump", str(dumps["json"]))
    assert code == 0 and err == ""
    assert out.startswith("gpuguard why-pending: no pending GPU pods in namespace default (-A for all namespaces)")
    assert "GPU pools" in out
    doc = as_json(capsys, "--dump", str(dumps["json"]), "-n", "research")
    assert pod_keys(doc) == ["research/urgent"]
    # -A with a bare name finds it in any namespace
    assert pod_keys(as_json(capsys, "--dump", str(dumps["json"]), "-A", "urgent")) == ["research/urgent"]


def test_named_pods_that_are_not_pending_or_missing(capsys: pytest.CaptureFixture[str],
                                                    dumps: dict[str, Path]) -> None:
    code, out, err = run(capsys, "--dump", str(dumps["json"]), "-n", "ml", "big-train", "train-a", "done-job",
                         "no-such-pod", "just-created")
    assert code == 2  # a named pod does not exist; the report for the others is still written
    assert "gpuguard why-pending: pod no-such-pod not found in namespace ml" in err
    flat = " ".join(out.split())
    assert "ml/train-a is not pending: it is bound to node h100-a, phase Running" in flat
    assert "ml/done-job has finished (Succeeded)" in flat
    assert "ml/just-created: no scheduling attempt recorded yet" in flat
    assert "2 pending GPU pods among the 5 named" in flat
    code, out, err = run(capsys, "--dump", str(dumps["json"]), "-n", "ml", "web-x", "--format", "json")
    assert code == 2 and out == ""  # no pod named exists: the error, and no report
    assert err == "gpuguard why-pending: pod web-x not found in namespace ml\n"


@pytest.mark.parametrize(("args", "message"), [
    (["--idle-window", "an hour"], "'an hour' is not a Prometheus duration"),
    (["--idle-window", "0h"], "'0h' is an empty window"),
    (["--prometheus", "ftp://prom:9090"], "Prometheus URL must be http(s)://host"),
    (["ml/x/y"], "'ml/x/y' is not a pod name"),
    (["/x"], "'/x' is not a pod name"),
])
def test_usage_errors(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path], args: list[str],
                      message: str) -> None:
    code, out, err = run(capsys, *args, "--dump", str(dumps["json"]))  # pod names go before --dump FILE…
    assert code == 2 and out == ""
    assert err.startswith("gpuguard why-pending: ") and message in err


def test_exclusive_options_are_usage_errors(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path]) -> None:
    for args in (["-n", "ml", "-A"], ["--in-cluster", "--kubeconfig", "k"], ["--kubeconfig", "k", "--dump", "x"]):
        code, _, err = run(capsys, *args)
        assert code == 2 and "not allowed with argument" in err


def test_bad_dumps_fail_with_file_and_line(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path],
                                           tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: List\nitems:\n  - kind: Node\n    metadata: {name: [\n")
    empty = tmp_path / "empty.yaml"
    empty.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"kind": "List", "items": [1,]}')
    code, out, err = run(capsys, "--dump", str(dumps["json"]), str(broken), str(empty), str(bad_json),
                         str(tmp_path / "missing.yaml"))
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert any(line.startswith(f"gpuguard why-pending: {broken}:") and "invalid YAML" in line for line in lines)
    assert f"gpuguard why-pending: {empty}:1: no Node, Pod, Event or PriorityClass objects found" in lines[1]
    assert any(f"{bad_json}:1: invalid JSON" in line for line in lines)
    assert f"gpuguard why-pending: cannot read {tmp_path / 'missing.yaml'}: No such file or directory" in lines
    assert "Traceback" not in err


def test_config_errors_name_file_and_key(capsys: pytest.CaptureFixture[str], dumps: dict[str, Path],
                                         tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("rules:\n  no-such-rule: off\n")
    code, out, err = run(capsys, "--dump", str(dumps["json"]), "--config", str(config))
    assert code == 2 and out == ""
    assert f"{config}:2:3: config error: rules.no-such-rule: unknown rule id" in err  # at the key


def test_stdin_dump_through_the_console_command(dumps: dict[str, Path]) -> None:
    """The real command in a child process, the dump on stdin."""
    done = gpuguard("why-pending", "--dump", "-", "-A", "--format", "json", stdin=dumps["json"].read_bytes())
    assert done.code == 0, done.stderr
    assert pod_keys(json.loads(done.stdout))[0] == "ml/big-train"


def test_pods_of_another_scheduler_get_a_note(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    parts = scenario()
    for p in parts["pods"]:
        if p["metadata"]["name"] in ("big-train", "medium"):
            p["spec"]["schedulerName"] = "volcano"
    dump = write_dump(all_objects(parts), tmp_path / "c.json", "json")
    code, _, err = run(capsys, "--dump", str(dump), "-A", "--format", "json")
    assert code == 0
    assert "note: some pods name another scheduler: volcano (2 pods); the analysis models kube-scheduler's" in err


def test_a_missing_pod_is_said_first_and_alone(dumps: dict[str, Path]) -> None:
    done = gpuguard_here("why-pending", "nope", "--dump", str(dumps["json"]))
    assert done.code == 2 and done.stdout == ""
    assert done.stderr == "gpuguard why-pending: pod nope not found in namespace default\n"
    both = gpuguard_here("why-pending", "-n", "ml", "nope", "big-train", "--dump", str(dumps["json"]))
    assert both.code == 2 and both.stderr.startswith("gpuguard why-pending: pod nope not found in namespace ml\n")
    assert "ml/big-train" in both.stdout  # the others still get their report


def _t4_cluster_with(pod_annotations: dict[str, str]) -> list[dict[str, Any]]:
    """A pending NGC PyTorch pod (CUDA 12.4.1) whose only nodes are Tesla T4s on driver R470."""
    from tests.support.cluster_objects import container, node, pod

    t4 = node("t4-1", product="Tesla-T4", instance="g4dn.12xlarge", capacity=4, allocatable=4)
    t4["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"] = "470.256.02"
    message = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    pending = pod("ml", "ngc", containers=[container("main", 1)], scheduled_message=message)
    pending["metadata"]["annotations"] = pod_annotations
    return [t4, pending]


def test_the_engine_faces_of_why_pending_say_what_lint_says(tmp_path: Path) -> None:
    dump = write_dump(_t4_cluster_with({"gpuguard.io/ignore": "gpu-limit-missin"}), tmp_path / "c.json", "json")
    done = gpuguard("why-pending", "-A", "--dump", str(dump))
    assert done.code == 0, done.stderr
    flat = " ".join(done.stdout.split())
    assert "driver 470.256.02. Note: NGC framework images set NVIDIA_REQUIRE_CUDA" in flat
    assert ("ml/ngc: gpuguard.io/ignore names no rule: gpu-limit-missin (did you mean gpu-limit-missing?)"
            in flat)
    doc = json.loads(gpuguard_here("why-pending", "-A", "--dump", str(dump), "--format", "json").stdout)
    (static,) = [r for r in doc["pods"][0]["reasons"] if r["kind"] == dg.STATIC]
    assert ". Note: NGC framework images" in static["message"]

"""``gpuguard audit`` end to end: dumps and a live cluster, a planned change, every output format, exit codes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuguard.cli import main as gpuguard
from tests.support.fake_apiserver import ALL_RESOURCES, FakeApiServer, serving
from tests.support.kubeconfig import write_kubeconfig
from tests.support.paths import FIXTURES, SARIF_SCHEMA
from tests.support.prometheus import HistorySeries, prometheus_with_history
from tests.support.reports import validate_report

AUDIT = FIXTURES / "audit"
WORKLOADS = str(AUDIT / "workloads.yaml")
BEFORE = str(AUDIT / "cluster-before.yaml")
AFTER = str(AUDIT / "cluster-after.yaml")
CHANGE = [WORKLOADS, "--cluster", BEFORE, "--cluster-after", AFTER]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = gpuguard(["audit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_text_shows_what_the_change_introduces_first(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(CHANGE, capsys)
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"planned change: {BEFORE} -> {AFTER}"
    sections = [i for i, line in enumerate(lines) if line.split(" (")[0] in ("INTRODUCED", "RESOLVED", "UNCHANGED")]
    assert [lines[i] for i in sections] == ["INTRODUCED (8)", "RESOLVED (1)", "UNCHANGED (1)"]
    introduced = [line for line in lines[sections[0]:sections[1]] if line.startswith("  ") and
                  not line.startswith("      ")]
    assert [line.split()[0] for line in introduced] == ["error"] * 4 + ["warning"] * 4  # the worst first
    assert any(line.startswith("  warning (was info) gpu-cuda-driver-mismatch research/StatefulSet/jupyter [+1 owned]")
               for line in introduced)
    assert "  error gpu-resource-unknown research/Job/mig-probe [+1 owned]" in lines[sections[1] + 1]
    assert lines[-1].startswith("8 introduced (4 errors, 4 warnings, 0 info), 1 resolved, 1 unchanged; after the "
                                "change: 4 errors, 5 warnings, 0 info; 0 input errors (8 objects judged, "
                                "7 GPU workloads, 11 reported through their owners)")


def test_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([WORKLOADS, "--cluster", BEFORE, "--cluster-after", BEFORE], capsys)[0] == 0  # nothing introduced
    assert run([WORKLOADS, "--cluster", BEFORE], capsys)[0] == 1  # as lint: mig-probe is an error today
    assert run([*CHANGE, "--fail-on", "warning"], capsys)[0] == 1
    scratch = [o for o in yaml.safe_load(Path(WORKLOADS).read_text())["items"] if o["metadata"]["name"] == "scratch"]
    only = tmp_path / "scratch.yaml"
    only.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": scratch}))
    assert run([str(only), "--cluster", BEFORE], capsys)[0] == 0  # a warning only
    assert run([str(only), "--cluster", BEFORE, "--fail-on", "warning"], capsys)[0] == 1
    broken = tmp_path / "broken.json"
    broken.write_text('{"kind": "List", "items": [')
    code, out, _ = run([str(only), str(broken), "--cluster", BEFORE], capsys)
    assert code == 2 and f"{broken}:1: input error: invalid JSON" in out and "gpu-shared-memory" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "nothing to audit"),
        ([WORKLOADS, "--kubeconfig", "k"], "not both"),
        ([WORKLOADS, "--cluster-after", AFTER], "--cluster-after needs the current facts too"),
        ([WORKLOADS, "--cluster", "absent.yaml"], "gpuguard audit: cannot read absent.yaml: No such file or directory"),
        ([WORKLOADS, "--prometheus", "localhost:9090"], "--prometheus must be an http(s) URL"),
        ([WORKLOADS, "--prometheus", "http://p", "--idle-window", "an hour"], "--idle-window"),
    ],
)
def test_bad_usage_exits_2_with_a_message(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(argv, capsys)
    assert code == 2 and out == "" and message in err and "Traceback" not in err


def test_json_has_lints_shape_with_the_object_and_its_change(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([*CHANGE, "--format", "json"], capsys)
    doc = json.loads(out)
    assert code == 1 and set(doc) == {"findings", "errors", "summary"}
    first = doc["findings"][0]
    assert {"rule", "severity", "message", "remediation", "kind", "name", "namespace", "uid", "apiVersion", "path",
            "fix", "file", "line", "change"} <= set(first)
    assert {f["change"] for f in doc["findings"]} == {"introduced", "resolved", "unchanged"}
    jupyter = [f for f in doc["findings"] if f["name"] == "jupyter"]
    assert [(f["change"], f["severity"], f["previous_severity"], f["owned"]) for f in jupyter] == [
        ("introduced", "warning", "info", 1)]
    summary = doc["summary"]
    assert summary["changes"] == {"introduced": 8, "resolved": 1, "unchanged": 1}
    assert summary["introduced_by_severity"] == {"error": 4, "warning": 4, "info": 0}
    assert summary["by_severity"] == {"error": 4, "warning": 5, "info": 0}
    assert (summary["cluster"], summary["cluster_after"]) == (BEFORE, AFTER)
    # nodes and pods are known (the --cluster snapshot and the dump): the per-pool summary
    assert {(p["name"], p["allocatable"], p["allocated"], p["free"]) for p in summary["pools"]} == {
        ("NVIDIA-A100-SXM4-80GB (p4de.24xlarge)", 16, 16, 0), ("NVIDIA-H100-80GB-HBM3 (p5.48xlarge)", 16, 5, 11),
        ("Tesla-T4 (g4dn.xlarge)", 3, 3, 0)}


def test_sarif_validates_and_names_the_objects(capsys: pytest.CaptureFixture[str]) -> None:
    import jsonschema  # type: ignore[import-untyped]

    code, out, _ = run([*CHANGE, "--format", "sarif"], capsys)
    sarif = json.loads(out)
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()))
    results = sarif["runs"][0]["results"]
    assert code == 1 and len(results) == 10
    resolved = [r for r in results if r["properties"]["change"] == "resolved"]
    assert [(r["kind"], r["level"]) for r in resolved] == [("pass", "none")]
    locations = results[0]["locations"][0]
    assert locations["logicalLocations"][0]["kind"] == "object"
    assert locations["physicalLocation"]["artifactLocation"]["uri"] == WORKLOADS


@pytest.mark.parametrize("fmt", ["policyreport", "openreports"])
def test_report_formats_are_lists_of_valid_reports(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([WORKLOADS, "--cluster", BEFORE, "--format", fmt], capsys)
    listed = yaml.safe_load(out)
    assert code == 1 and (listed["apiVersion"], listed["kind"]) == ("v1", "List")
    for report in listed["items"]:
        validate_report(report)
    assert sum(r["summary"]["fail"] for r in listed["items"]) == 1


def test_output_goes_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "audit.json"
    code, out, err = run([*CHANGE, "--format", "json", "--output", str(target)], capsys)
    assert code == 1 and out == "" and err == f"gpuguard audit: wrote {target}: 4 errors, 5 warnings, 0 info\n"
    assert json.loads(target.read_text())["summary"]["changes"]["introduced"] == 8
    code, _, err = run([*CHANGE, "--output", str(tmp_path / "no" / "such" / "dir.txt")], capsys)
    assert code == 2 and "cannot write" in err


# --- a live cluster --------------------------------------------------------------------------------

RESOURCE_OF = {"Deployment": "deployments", "ReplicaSet": "replicasets", "StatefulSet": "statefulsets",
               "DaemonSet": "daemonsets", "Job": "jobs", "CronJob": "cronjobs", "PyTorchJob": "pytorchjobs",
               "Pod": "pods", "Node": "nodes", "RuntimeClass": "runtimeclasses"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[FakeApiServer, Path]]:
    state = FakeApiServer(ALL_RESOURCES)
    state.absent.discard("pytorchjobs")
    for name in ("workloads.yaml", "cluster-before.yaml"):
        for obj in yaml.safe_load((AUDIT / name).read_text())["items"]:
            state.put(RESOURCE_OF[obj["kind"]], obj)
    with serving(state):
        kubeconfig = tmp_path / "kubeconfig"
        write_kubeconfig(kubeconfig, f"http://127.0.0.1:{state.port}", token="t")
        yield state, kubeconfig


def live_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code, out, err = run([*argv, "--format", "json"], capsys)
    assert "Traceback" not in err
    return code, json.loads(out)


@pytest.mark.integration
def test_a_live_cluster_is_its_own_facts_with_the_pool_summary(cluster: tuple[FakeApiServer, Path],
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    api, kubeconfig = cluster
    code, live = live_json(["--kubeconfig", str(kubeconfig)], capsys)
    _, dumped = live_json([WORKLOADS, "--cluster", BEFORE], capsys)
    assert code == 1 and live["errors"] == []
    key = ("rule", "name", "namespace", "uid", "path", "severity")
    assert sorted(tuple(f[k] for k in key) for f in live["findings"]) == sorted(
        tuple(f[k] for k in key) for f in dumped["findings"])
    assert all("file" not in f for f in live["findings"])
    assert live["summary"]["cluster"] == "live cluster"
    assert live["summary"]["pools"] == dumped["summary"]["pools"]
    code, planned = live_json(["--kubeconfig", str(kubeconfig), "--cluster-after", AFTER], capsys)
    assert code == 1 and planned["summary"]["changes"] == {"introduced": 8, "resolved": 1, "unchanged": 1}
    assert not any(method in ("POST", "PUT") for method, _, _ in api.writes)


@pytest.mark.integration
def test_an_unreadable_cluster_exits_2(cluster: tuple[FakeApiServer, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    api, kubeconfig = cluster
    api.forbidden.add("cronjobs")
    code, doc = live_json(["--kubeconfig", str(kubeconfig)], capsys)
    assert code == 2 and [e["file"] for e in doc["errors"]] == ["/apis/batch/v1/cronjobs"]
    assert "grant `list` on cronjobs" in doc["errors"][0]["message"]
    code, _, err = run(["--kubeconfig", str(tmp_path / "absent")], capsys)
    assert code == 2 and "cannot load Kubernetes credentials" in err


STEP = 30


@pytest.mark.integration
def test_prometheus_adds_idle_gpus_to_the_pool_summary(cluster: tuple[FakeApiServer, Path], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    _, kubeconfig = cluster
    end = (int(time.time()) // 60) * 60 - 120
    span = range(end - 3 * 3600, end + 1, STEP)

    def series(pod: str, namespace: str, host: str, gpu: int, value: float) -> HistorySeries:
        labels = {"gpu": str(gpu), "UUID": f"GPU-{host}-{gpu}", "Hostname": host, "pod": pod,
                  "namespace": namespace, "container": "main", "modelName": "NVIDIA H100 80GB HBM3"}
        return HistorySeries("DCGM_FI_DEV_GPU_UTIL", labels, [(float(t), value) for t in span])

    history = [series("jupyter-0", "research", "h100-2", 0, 0.0),  # a notebook holding a GPU, idle
               series("scratch", "notebooks", "h100-1", 1, 0.0), series("scratch", "notebooks", "h100-1", 2, 0.0),
               series("vllm-llama-7c9f8d5b6d-x2k8p", "inference", "h100-1", 0, 71.0)]
    (tmp_path / "prom").mkdir()
    with prometheus_with_history(history, tmp_path / "prom") as prom:
        code, doc = live_json(["--kubeconfig", str(kubeconfig), "--prometheus", prom.url, "--idle-window", "1h"],
                              capsys)
    pools = {p["name"]: p for p in doc["summary"]["pools"]}
    assert pools["NVIDIA-H100-80GB-HBM3 (p5.48xlarge)"]["idle"] == 3  # jupyter-0 (1) and scratch (2)
    assert pools["NVIDIA-A100-SXM4-80GB (p4de.24xlarge)"]["idle"] == 0
    unreachable = "http://127.0.0.1:9"
    code, doc = live_json(["--kubeconfig", str(kubeconfig), "--prometheus", unreachable], capsys)
    assert code == 1 and all("idle" not in p for p in doc["summary"]["pools"])
    assert any("GPU utilization unavailable (unreachable)" in n for n in doc["summary"]["notes"])


def test_a_misspelled_ignore_id_and_a_cuda_note_as_audit_says_them(tmp_path: Path) -> None:
    from tests.support.proc import gpuguard as in_a_process

    dump = tmp_path / "pods.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", "uid": "u-1",
                     "annotations": {"gpuguard.io/ignore": "gpu-limit-missin, gpu-taint-not-tolerated"}},
        "spec": {"containers": [{"name": "c", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                 "resources": {"requests": {"nvidia.com/gpu": 1}}}]},
    }]}))
    message = "gpuguard.io/ignore names no rule: gpu-limit-missin (did you mean gpu-limit-missing?)"
    done = in_a_process("audit", str(dump), "--cluster", "sample")
    assert f"note: {dump}:3: ml/Pod/p: {message}\n" in done.stdout
    assert "driver 470.256.02. Note: NGC framework images" in done.stdout and "02 Note:" not in done.stdout
    report = json.loads(in_a_process("audit", str(dump), "--cluster", "sample", "--format", "json").stdout)
    assert f"{dump}:3: ml/Pod/p: {message}" in report["summary"]["notes"]
    sarif = json.loads(in_a_process("audit", str(dump), "--cluster", "sample", "--format", "sarif").stdout)
    (cuda,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "gpu-cuda-driver-mismatch"]
    assert ". Note: NGC framework images" in cuda["message"]["text"]


def test_an_unreadable_dump_has_no_line(tmp_path: Path) -> None:
    from tests.support.proc import gpuguard as in_a_process

    missing = tmp_path / "gone.yaml"
    done = in_a_process("audit", str(missing))
    assert done.code == 2 and f"input error: cannot read {missing}: No such file or directory" in done.stdout
    report = json.loads(in_a_process("audit", str(missing), "--format", "json").stdout)
    assert report["errors"] == [{"file": str(missing), "line": None,
                                 "message": f"cannot read {missing}: No such file or directory"}]
    sarif = json.loads(in_a_process("audit", str(missing), "--format", "sarif").stdout)
    (note,) = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    assert "region" not in note["locations"][0]["physicalLocation"]

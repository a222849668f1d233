"""examples/pending-dump.yaml and the README's command for it: fragmentation, a device plugin down,
the scheduler's message in plain words and, with a real Prometheus holding DCGM history, the idle
GPU holder; and ``--dump DIR`` reading a directory as ``audit`` does."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.pending import diagnose as dg
from tests.support.inprocess import gpuguard_here
from tests.support.paths import ROOT
from tests.support.proc import gpuguard
from tests.support.prometheus import HistorySeries, prometheus_with_history
from tests.whypending.support import reasons

EXAMPLE = ROOT / "examples" / "pending-dump.yaml"
PENDING = "ml/finetune-llama-0-h2xq7"


def readme_command() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    (line,) = [line for line in readme.splitlines()
               if line.startswith("gpuguard why-pending") and "examples/pending-dump.yaml" in line]
    argv = shlex.split(line.split("#", 1)[0])
    assert argv[0] == "gpuguard"
    return argv[1:]


def test_the_dump_is_what_kubectl_prints() -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    assert doc["kind"] == "List" and doc["apiVersion"] == "v1" and doc["metadata"] == {"resourceVersion": ""}
    kinds = [item["kind"] for item in doc["items"]]
    assert set(kinds) == {"Node", "Pod", "Event"}
    for item in doc["items"]:
        meta = item["metadata"]
        assert item["apiVersion"] == "v1" and meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
        if item["kind"] == "Pod":  # API defaulting has run: what the server returns, not a manifest
            spec = item["spec"]
            assert spec["schedulerName"] == "default-scheduler" and "priority" in spec
            assert spec["dnsPolicy"] == "ClusterFirst" and spec["terminationGracePeriodSeconds"] == 30
            assert any(v["name"].startswith("kube-api-access-") for v in spec["volumes"])
            assert item["status"]["qosClass"] and item["status"]["phase"]


def test_the_readme_command_names_every_reason() -> None:
    argv = readme_command()
    done = gpuguard(*argv)
    assert done.code == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert f"{PENDING}: 4 nvidia.com/gpu" in text
    assert "fragmentation fragmented: enough GPUs are free in total, but not on any single node" in text
    assert "device-plugin-down device plugin down on 1 node, 8 GPUs not advertised" in text
    assert "ip-10-0-1-23.ec2.internal: nvidia.com/gpu: capacity 8 but allocatable 0" in text
    assert "1 of 4 nodes: not tried, as evicting pods cannot fix what rejected the node" in text
    doc = json.loads(gpuguard_here(*argv, "--format", "json").stdout)
    found = reasons(doc, PENDING)
    assert set(found) == {dg.SCHEDULER, dg.FRAGMENTATION, dg.PLUGIN_DOWN}
    assert found[dg.FRAGMENTATION]["nodes"] == ["ip-10-0-1-21.ec2.internal", "ip-10-0-1-22.ec2.internal"]


def test_a_directory_is_read_like_audit_reads_one(tmp_path: Path) -> None:
    dumps = tmp_path / "dumps"
    (dumps / "nested").mkdir(parents=True)
    doc = yaml.safe_load(EXAMPLE.read_text())
    nodes = [i for i in doc["items"] if i["kind"] == "Node"]
    rest = [i for i in doc["items"] if i["kind"] != "Node"]
    (dumps / "nodes.json").write_text(json.dumps({**doc, "items": nodes}))
    (dumps / "nested" / "pods.yaml").write_text(yaml.safe_dump({**doc, "items": rest}))
    shutil.copy(ROOT / "examples" / "manifests" / "inference-vllm.yaml", dumps / "not-a-dump.yaml")
    (dumps / "README.txt").write_text("not read")
    whole = json.loads(gpuguard_here("why-pending", "-A", "--dump", str(EXAMPLE), "--format", "json").stdout)
    done = gpuguard_here("why-pending", "-A", "--dump", str(dumps), "--format", "json")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout) == whole
    empty = tmp_path / "empty"
    empty.mkdir()
    done = gpuguard_here("why-pending", "-A", "--dump", str(empty))
    assert done.code == 2 and done.stdout == ""
    assert f"no *.yaml, *.yml or *.json file in directory {empty}" in done.stderr


def _series(pod: str, namespace: str, host: str, gpus: range, value: float | None) -> list[HistorySeries]:
    end = (int(time.time()) // 60) * 60 - 60
    start = end - 2 * 3600
    out = []
    for gpu in gpus:
        labels = {"gpu": str(gpu), "UUID": f"GPU-{host[:14]}-{gpu:02d}-0000-000000000000", "device": f"nvidia{gpu}",
                  "modelName": "NVIDIA H100 80GB HBM3", "Hostname": host, "pod": pod, "namespace": namespace,
                  "container": "main"}
        points = [(float(ts), 80.0 + (ts // 30) % 17 if value is None else value) for ts in range(start, end + 1, 30)]
        out.append(HistorySeries("DCGM_FI_DEV_GPU_UTIL", labels, points))
    return out


@pytest.mark.integration
def test_with_prometheus_the_idle_notebook_is_named(tmp_path: Path) -> None:
    history = [*_series("pretrain-7b-0-x8k2p", "ml", "ip-10-0-1-21", range(4), None),
               *_series("notebook-0", "research", "ip-10-0-1-21", range(4, 6), 0.0),
               *_series("eval-sweep-3-9fj4d", "ml", "ip-10-0-1-22", range(6), None)]
    with prometheus_with_history(history, tmp_path) as prom:
        done = gpuguard(*readme_command(), "--prometheus", prom.url, "--format", "json")
    assert done.code == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    idle = reasons(doc, PENDING)[dg.IDLE_HOLDERS]
    assert idle["pods"] == ["research/notebook-0"] and idle["nodes"] == ["ip-10-0-1-21.ec2.internal"]
    assert re.match(r"2 GPUs the pod could use are held by pods whose utilization stayed below 1%", idle["message"])

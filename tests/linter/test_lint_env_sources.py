"""`gpuguard lint` reads the ConfigMaps and Secrets of all its inputs for the containers' envFrom."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.support.inprocess import gpuguard_here

DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "tgi", "namespace": "ml"},
    "spec": {"selector": {"matchLabels": {"app": "tgi"}}, "template": {
        "metadata": {"labels": {"app": "tgi"}},
        "spec": {"containers": [{
            "name": "tgi", "image": "ghcr.io/huggingface/text-generation-inference:2.4.1",
            "envFrom": [{"configMapRef": {"name": "tgi-config"}}],
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}],
        }], "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}]},
    }},
}


def config_map(data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tgi-config", "namespace": "ml"},
            "data": data}


def bypass(tmp_path: Path, *files: list[dict[str, Any]], stdin: bytes | None = None) -> list[tuple[str, str]]:
    paths = []
    for i, docs in enumerate(files):
        path = tmp_path / f"f{i}.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        paths.append(str(path))
    result = gpuguard_here("lint", "--format", "json", *(paths or ["-"]), stdin=stdin or b"")
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    return [(f["severity"], f["message"]) for f in report["findings"] if f["rule"] == "gpu-device-access-bypass"]


def test_a_config_map_in_another_input_is_read(tmp_path: Path) -> None:
    assert bypass(tmp_path, [DEPLOYMENT], [config_map({"MODEL_ID": "bigscience/bloom-560m"})]) == []
    [(severity, message)] = bypass(tmp_path, [DEPLOYMENT], [config_map({"NVIDIA_VISIBLE_DEVICES": "all"})])
    assert severity == "error" and "NVIDIA_VISIBLE_DEVICES=all from ConfigMap 'tgi-config'" in message


def test_a_source_no_input_carries_is_a_note(tmp_path: Path) -> None:
    [(severity, message)] = bypass(tmp_path, [DEPLOYMENT])
    assert severity == "info" and "not among the inputs" in message


def test_a_stream_reads_its_own_sources(tmp_path: Path) -> None:
    text = yaml.safe_dump_all([config_map({"NVIDIA_VISIBLE_DEVICES": "all"}), DEPLOYMENT]).encode()
    assert [s for s, _ in bypass(tmp_path, stdin=text)] == ["error"]

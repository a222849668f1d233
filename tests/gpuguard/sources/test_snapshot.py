"""Cluster snapshots: JSON as JSON, YAML streamed item by item, the same facts either way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gpuguard.sources.snapshot import load_cluster_facts
from gpuguard.sources.yamlsafe import InputError
from tests.support.paths import EXAMPLES


def _as_json(tmp_path: Path) -> Path:
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text()) if d]
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(docs[0] if len(docs) == 1 else {"apiVersion": "v1", "kind": "List", "items": docs}))
    return path


def test_json_and_yaml_give_the_same_facts(tmp_path: Path) -> None:
    from_yaml = load_cluster_facts(str(EXAMPLES / "cluster.yaml"))
    from_json = load_cluster_facts(str(_as_json(tmp_path)))
    assert from_json.nodes == from_yaml.nodes
    assert from_json.runtime_classes == from_yaml.runtime_classes
    assert [g.members for g in from_json.groups] == [g.members for g in from_yaml.groups]


def test_a_list_of_objects_and_multi_document_yaml_are_read(tmp_path: Path) -> None:
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text()) if d]
    items = [i for d in docs for i in (d.get("items") or [d])]
    multi = tmp_path / "multi.yaml"
    multi.write_text(yaml.safe_dump_all(items))
    as_array = tmp_path / "array.json"
    as_array.write_text(json.dumps(items))
    expected = load_cluster_facts(str(EXAMPLES / "cluster.yaml")).nodes
    assert load_cluster_facts(str(multi)).nodes == expected
    assert load_cluster_facts(str(as_array)).nodes == expected


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('{"apiVersion": "v1",\n "kind": "List", "items": [\n  {"kind": "Node",,}]}', 3, "invalid JSON"),
        ("- a\n- b\n", 1, "must hold Kubernetes objects"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", 1, "no Node or NodePool objects"),
        ("", 1, "empty cluster snapshot"),
        ("apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  metadata: {name: a}\n  metadata: {name: b}\n", 6,
         "duplicate key"),
    ],
)
def test_bad_snapshots_are_input_errors_with_a_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = tmp_path / ("bad.json" if text.startswith("{") else "bad.yaml")
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_cluster_facts(str(path))
    assert caught.value.line == line and message in caught.value.message

"""Dumps of the scenario cluster in every shape kubectl writes, and bad dumps."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from gpuguard.kube.dump import load_dumps
from policies.pending.state import ClusterObjects
from tests.gpuguard.kube.support import summary
from tests.support.cluster_objects import all_objects, as_list_document, scenario
from tests.support.paths import FIXTURES


@pytest.fixture(scope="module")
def expected() -> dict[str, object]:
    return summary(ClusterObjects.sort(all_objects()))


def _yaml(path: Path, docs: Sequence[object]) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def test_yaml_list_dump_gives_the_same_analysis(tmp_path: Path, expected: dict[str, object]) -> None:
    dump = _yaml(tmp_path / "cluster.yaml", [as_list_document(all_objects())])
    load = load_dumps([str(dump)])
    assert load.errors == [] and load.files == [str(dump)]
    assert summary(load.objects) == expected
    assert len(load.objects.nodes) == 10 and len(load.objects.priority_classes) == 5


def test_multi_document_yaml_and_split_files(tmp_path: Path, expected: dict[str, object]) -> None:
    parts = scenario()
    nodes = _yaml(tmp_path / "nodes.yaml", parts["nodes"])
    rest = _yaml(tmp_path / "rest.yaml", [as_list_document(parts["pods"]), *parts["events"],
                                          *parts["priorityclasses"]])
    load = load_dumps([str(nodes), str(rest)])
    assert load.errors == []
    assert summary(load.objects) == expected


def test_json_dump_prunes_bound_pods_and_keeps_pending_ones_whole(tmp_path: Path,
                                                                   expected: dict[str, object]) -> None:
    dump = tmp_path / "cluster.json"
    dump.write_text(json.dumps(as_list_document(all_objects()), indent=4))  # kubectl -o json indents by 4
    load = load_dumps([str(dump)])
    assert load.errors == []
    assert summary(load.objects) == expected
    pods = {p["metadata"]["name"]: p for p in load.objects.pods}
    assert "volumes" not in pods["train-a"]["spec"] and "qosClass" not in pods["train-a"]["status"]
    assert pods["big-train"]["spec"]["volumes"] == [{"name": "shm", "emptyDir": {"medium": "Memory"}}]
    node = next(n for n in load.objects.nodes if n["metadata"]["name"] == "h100-a")
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8" and "nodeInfo" not in node["status"]


def test_single_kind_api_list_items_without_kind(tmp_path: Path) -> None:
    pods = scenario()["pods"]
    for p in pods:
        del p["kind"], p["apiVersion"]  # as the API server sends list items
    dump = tmp_path / "pods.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": pods}))
    load = load_dumps([str(dump)])
    assert load.errors == [] and len(load.objects.pods) == len(pods)
    assert {p["kind"] for p in load.objects.pods} == {"Pod"}


def test_wrongly_typed_fields_fall_back_to_the_whole_object(tmp_path: Path) -> None:
    parts = scenario()
    weird = parts["pods"][0]
    weird["status"] = "not a map"
    dump = tmp_path / "weird.json"
    dump.write_text(json.dumps(as_list_document([weird, *parts["nodes"]])))
    load = load_dumps([str(dump)])
    assert load.errors == []
    assert load.objects.pods[0]["status"] == "not a map"
    # containers that are no list cannot be analysed: the damaged dump says where
    weird["spec"]["containers"] = "not a list"
    dump.write_text(json.dumps(as_list_document([weird, *parts["nodes"]])))
    (error,) = load_dumps([str(dump)]).errors
    assert "items[0]: Pod ml/train-a: spec.containers is a string, but a Pod holds a list of containers" in error.message


def test_a_top_level_json_array_is_read_as_audit_reads_it(tmp_path: Path, expected: dict[str, object]) -> None:
    """``kubectl get … -o json | jq .items`` writes a bare array; audit read it, why-pending called it
    invalid JSON."""
    dump = tmp_path / "items.json"
    dump.write_text(json.dumps(all_objects()))
    load = load_dumps([str(dump)])
    assert load.errors == []
    assert summary(load.objects) == expected


def test_valid_json_of_another_shape_is_not_called_invalid(tmp_path: Path) -> None:
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"kind": "List", "metadata": [], "items": [scenario()["nodes"][0]]}))
    load = load_dumps([str(odd)])
    assert load.errors == [] and len(load.objects.nodes) == 1


@pytest.mark.parametrize(
    ("name", "text", "line", "words"),
    [
        ("broken.yaml", "apiVersion: v1\nkind: List\nitems:\n  - kind: Node\n   metadata: {}\n", 5, "invalid YAML"),
        ("broken.json", '{\n  "kind": "List",\n  "items": [\n    {"kind": "Node",}\n  ]\n}\n', 4, "invalid JSON"),
        ("deep.json", '{"kind": "List", "items": [{"kind": "Pod", "spec": ' + "[" * 100_000 + "]" * 100_000 + "}]}",
         1, "invalid JSON: nested too deeply"),
        ("empty.yaml", "", 1, "no Node, Pod, Event or PriorityClass objects"),
        ("deployments.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n", 1,
         "no Node, Pod, Event or PriorityClass objects"),
        ("scalars.yaml", "- a\n- b\n", 1, "expected Kubernetes objects"),
        ("scalar-items.json", '{"kind": "List", "items": [7]}', 0, "items[0] is not a Kubernetes object"),
        # A Pod whose spec is no object once made the JSON fast path raise (an internal error).
        ("list-spec.json", '{"kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": '
         '{"name": "p", "namespace": "ml"}, "spec": [1, 2]}]}', 0, "items[0]: Pod ml/p: spec is a list"),
        ("string-spec.yaml", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: p},"
         " spec: gpu}\n", 1, "Pod /p: spec is a string"),
    ],
)
def test_bad_dumps_are_input_errors_with_a_line(tmp_path: Path, name: str, text: str, line: int,
                                                words: str) -> None:
    bad = tmp_path / name
    bad.write_text(text)
    good = _yaml(tmp_path / "good.yaml", scenario()["nodes"])
    load = load_dumps([str(bad), str(good)])
    (error,) = load.errors
    assert error.file == str(bad) and error.line == line and words in error.message
    assert len(load.objects.nodes) == 10  # the other file is still read


def test_alias_bomb_missing_file_and_size_limit(tmp_path: Path) -> None:
    bomb = FIXTURES / "lint" / "bad-inputs" / "alias-bomb.yaml"
    load = load_dumps([str(bomb), str(tmp_path / "missing.yaml")])
    assert [e.file for e in load.errors] == [str(bomb), str(tmp_path / "missing.yaml")]
    assert "alias" in load.errors[0].message and "cannot read" in load.errors[1].message
    big = _yaml(tmp_path / "big.yaml", scenario()["nodes"])
    (too_big,) = load_dumps([str(big)], max_bytes=1000).errors
    assert "limit" in too_big.message
    (yaml_too_big,) = load_dumps([str(big)], max_yaml_bytes=1000).errors
    assert "-o json" in yaml_too_big.message
    as_json = tmp_path / "big.json"
    as_json.write_text(json.dumps(as_list_document(scenario()["nodes"])))
    assert load_dumps([str(as_json)], max_yaml_bytes=1000).errors == []

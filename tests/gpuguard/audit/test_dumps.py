"""Dumps in every shape kubectl and the API write them; bad input is an error with a line, never lost objects."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuguard.audit import dumps
from gpuguard.audit.auditor import Auditor
from gpuguard.audit.dumps import DumpReader
from gpuguard.audit.model import AuditResult
from gpuguard.sources.snapshot import load_cluster_facts
from policies.config import Config
from tests.support.paths import FIXTURES

AUDIT = FIXTURES / "audit"
FACTS = load_cluster_facts(str(AUDIT / "cluster-before.yaml"))
ITEMS: list[dict[str, Any]] = yaml.safe_load((AUDIT / "workloads.yaml").read_text())["items"]


def read(*paths: str | Path, pods: list[bytes] | None = None) -> AuditResult:
    auditor = Auditor(Config(), FACTS)
    sink = (lambda raw: pods.append(bytes(raw))) if pods is not None else None
    DumpReader(auditor, pods=sink).read([str(p) for p in paths])
    return auditor.finish()


def summary(result: AuditResult) -> tuple[Any, ...]:
    return (sorted((f.finding.rule, f.ref.qualified()) for f in result.findings), result.counts.objects,
            result.counts.through_owners, result.counts.terminal_pods)


EXPECTED = summary(read(AUDIT / "workloads.yaml"))


def test_the_yaml_list_fixture_reads_every_object() -> None:
    rules, objects, through, terminal = EXPECTED
    assert (objects, through, terminal) == (8, 11, 1) and len(rules) == 4


def test_json_lists_take_the_fast_path_with_the_same_result(tmp_path: Path) -> None:
    listed = tmp_path / "dump.json"
    listed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": ITEMS}, indent=4))
    result = read(listed)
    assert summary(result) == EXPECTED
    assert {f.origin.file for f in result.findings} == {str(listed)} and {f.origin.line for f in result.findings} == {
        None}


def test_api_lists_carry_the_kind_on_the_list_only(tmp_path: Path) -> None:
    deployments = [dict(o) for o in ITEMS if o["kind"] == "Deployment"]
    for d in deployments:
        del d["kind"], d["apiVersion"]
    api_list = tmp_path / "deployments.json"
    api_list.write_text(json.dumps({"apiVersion": "apps/v1", "kind": "DeploymentList", "metadata": {},
                                    "items": deployments}))
    result = read(api_list)
    assert result.errors == [] and result.counts.objects == 3
    assert {r.api_version for r in result.gpu_objects} == {"apps/v1"}


def test_multi_document_yaml_and_stdin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = yaml.safe_dump_all(ITEMS)
    multi = tmp_path / "multi.yaml"
    multi.write_text(text)
    assert summary(read(multi)) == EXPECTED
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    result = read("-")
    assert summary(result) == EXPECTED
    assert {f.origin.file for f in result.findings} == {"<stdin>"}


def test_a_directory_of_dumps(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": ITEMS[:12]}))
    (tmp_path / "b.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": ITEMS[12:]}))
    assert summary(read(tmp_path)) == EXPECTED


def test_malformed_json_is_an_error_with_its_line_and_other_files_still_count(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "apiVersion": "v1",\n  "kind": "List",\n  "items": [\n    {"kind": "Pod",},\n  ]\n}\n')
    result = read(bad, AUDIT / "workloads.yaml")
    (error,) = result.errors
    assert error.file == str(bad) and error.line == 5 and "invalid JSON" in error.message
    assert summary(result) == EXPECTED


def test_json_nested_too_deeply_is_an_error_not_a_crash(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "spec": '
                    + "[" * 100_000 + "]" * 100_000 + "}]}")
    whole = tmp_path / "whole.json"
    whole.write_text('{"a": ' * 100_000 + "1" + "}" * 100_000)
    result = read(deep, whole, AUDIT / "workloads.yaml")
    assert sorted((e.file, e.line, e.message) for e in result.errors) == sorted(
        (str(p), 1, "invalid JSON: nested too deeply") for p in (deep, whole))
    assert summary(result) == EXPECTED


def test_items_that_are_no_objects_are_errors(tmp_path: Path) -> None:
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [ITEMS[0], {"name": "x"}, 3]}))
    result = read(dump)
    assert [e.message for e in result.errors] == [
        "items[1] is not a Kubernetes object (no apiVersion/kind)",
        "items[2] is not a Kubernetes object (no apiVersion/kind)",
    ]
    assert result.counts.objects == 1
    as_json = tmp_path / "dump.json"
    as_json.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [ITEMS[0], ["x"]]}))
    assert [e.message for e in read(as_json).errors] == ["items[1] is not a Kubernetes object (no apiVersion/kind)"]


def test_a_document_with_items_that_is_no_list_is_one_object(tmp_path: Path) -> None:
    # a CRD object with a top-level `items:` field: its "items" are not objects of the dump
    odd = {"apiVersion": "example.com/v1", "kind": "Inventory", "metadata": {"name": "inv", "uid": "i1"},
           "items": [ITEMS[0]]}
    dump = tmp_path / "odd.yaml"
    dump.write_text(yaml.safe_dump(odd, sort_keys=True))
    result = read(dump)
    assert result.errors == [] and result.counts.objects == 1
    # judged whole: a kind gpuguard cannot read that names a GPU resource (gpu-kind-unknown)
    assert [(f.finding.rule, f.ref.kind) for f in result.findings] == [("gpu-kind-unknown", "Inventory")]


def test_broken_yaml_and_refused_documents(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: [}\n")
    (error,) = read(broken).errors
    assert error.line == 6 and error.message.startswith("invalid YAML")
    dup = tmp_path / "dup.yaml"
    dup.write_text(yaml.safe_dump(ITEMS[-1]) + "kind: Deployment\n")
    (error,) = read(dup).errors
    assert "duplicate key" in error.message


def test_missing_and_oversized_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = read(tmp_path / "absent.yaml")
    assert [(e.line, e.message) for e in result.errors] == [
        (0, f"cannot read {tmp_path / 'absent.yaml'}: No such file or directory")]
    monkeypatch.setattr(dumps, "MAX_YAML_BYTES", 1000)
    (error,) = read(AUDIT / "workloads.yaml").errors
    assert "YAML is read up to" in error.message and "-o json" in error.message


def test_pods_go_to_the_pool_summary_sink(tmp_path: Path) -> None:
    pods: list[bytes] = []
    read(AUDIT / "workloads.yaml", pods=pods)
    names = sorted(json.loads(p)["metadata"]["name"] for p in pods)
    assert len(names) == 11 and "scratch" in names and "nightly-eval-29404560-k8d2s" in names
    listed = tmp_path / "dump.json"
    listed.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": ITEMS}))
    again: list[bytes] = []
    read(listed, pods=again)
    assert sorted(json.loads(p)["metadata"]["name"] for p in again) == names


def test_a_workload_whose_template_is_no_object_is_an_input_error(tmp_path: Path) -> None:
    """The API server never writes one, so a dump that holds one is damaged: it is said, with the
    object and the place, and the rest is judged."""
    bad = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml"},
           "spec": {"template": ["not", "a", "template"]}}
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [bad, *ITEMS]}))
    result = read(dump)
    (error,) = result.errors
    assert error.file == str(dump)
    assert error.message.startswith("Deployment ml/d: spec.template is a list, but a Deployment holds a pod template")
    assert summary(result)[0] == EXPECTED[0]

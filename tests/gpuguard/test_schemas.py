"""gpuguard/schemas: the JSON Schemas of the ``--format json`` reports hold real output (lint over
the corpus, the examples and bad inputs; audit over its fixtures with and without a planned change;
why-pending over the test cluster and the example dump), are printed by ``gpuguard schema``, and are
not trivially permissive: a fixed shape forbids undeclared properties, and mutated reports fail."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from gpuguard.cli import main
from gpuguard.schemas import SCHEMAS, load, text
from policies.pending import diagnose as dg
from policies.registry import RULES
from tests.support.paths import FIXTURES, ROOT
from tests.support.proc import gpuguard
from tests.whypending.support import objects, write_dump

CORPUS = ROOT / "tests" / "corpus"
EXAMPLES = ROOT / "examples"
AUDIT = FIXTURES / "audit"


def validator(name: str) -> jsonschema.Draft202012Validator:
    schema = load(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def _json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    main(argv)
    out = capsys.readouterr().out
    doc: dict[str, Any] = json.loads(out)
    return doc


def lint_reports(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Reports of every corpus file (alone, and all at once), the examples, the bad inputs, a
    missing file, a misspelled ignore annotation and a --fix run."""
    files = sorted(p for p in CORPUS.rglob("*") if p.suffix in (".yaml", ".yml", ".json") and p.is_file())
    assert len(files) > 100
    yield "corpus", _json(["lint", str(CORPUS), "--cluster", "sample", "--format", "json"], capsys)
    for path in files[::7]:
        yield path.name, _json(["lint", str(path), "--format", "json"], capsys)
    yield "examples", _json(["lint", str(EXAMPLES / "manifests"), "--cluster", "sample", "--format", "json"], capsys)
    yield "bad inputs", _json(["lint", str(FIXTURES / "lint" / "bad-inputs"), "--format", "json"], capsys)
    yield "missing", _json(["lint", str(tmp_path / "missing.yaml"), "--format", "json"], capsys)
    fixed = tmp_path / "fix.yaml"
    fixed.write_text((FIXTURES / "lint" / "pod-limit-missing.yaml").read_text())
    yield "fix", _json(["lint", str(fixed), "--fix", "--format", "json"], capsys)


def test_lint_reports_hold(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    check = validator("lint-report")
    seen: set[str] = set()
    for label, report in lint_reports(capsys, tmp_path):
        errors = sorted(check.iter_errors(report), key=lambda e: list(e.path))
        assert not errors, (label, errors[0].message, list(errors[0].path))
        seen |= {k for f in report["findings"] for k, v in f.items() if v is not None}
        seen |= {"errors"} if report["errors"] else set()
        seen |= {"null line"} if any(e["line"] is None for e in report["errors"]) else set()
        seen |= {"fixed_files"} if "fixed_files" in report["summary"] else set()
    assert {"fix", "source", "errors", "null line", "fixed_files"} <= seen  # the optional parts were exercised


def audit_reports(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    workloads = str(AUDIT / "workloads.yaml")
    before, after = str(AUDIT / "cluster-before.yaml"), str(AUDIT / "cluster-after.yaml")
    yield "plain", _json(["audit", workloads, "--format", "json"], capsys)
    yield "cluster", _json(["audit", workloads, "--cluster", before, "--format", "json"], capsys)
    yield "change", _json(["audit", workloads, "--cluster", before, "--cluster-after", after, "--format", "json"],
                          capsys)
    yield "sample", _json(["audit", str(EXAMPLES / "manifests"), "--cluster", "sample", "--format", "json"], capsys)
    yield "corpus", _json(["audit", str(CORPUS / "real"), "--cluster", "sample", "--format", "json"], capsys)
    yield "missing", _json(["audit", str(tmp_path / "missing.yaml"), "--format", "json"], capsys)


def test_audit_reports_hold(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    check = validator("audit-report")
    seen: set[str] = set()
    for label, report in audit_reports(capsys, tmp_path):
        errors = sorted(check.iter_errors(report), key=lambda e: list(e.path))
        assert not errors, (label, errors[0].message, list(errors[0].path))
        seen |= {k for f in report["findings"] for k in f} | set(report["summary"])
    assert {"change", "owned", "file", "cluster_after", "pools"} <= seen


def why_pending_reports(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                        only: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    dump = write_dump(objects(), tmp_path / "cluster.json", "json")
    for label, argv in (("all", ["-A"]), ("ml", ["-n", "ml"]), ("named", ["-n", "ml", "big-train", "gated"]),
                        ("example", ["-A", "--dump", str(EXAMPLES / "pending-dump.yaml")]),
                        ("whole-jobs", ["-A", "--dump", str(EXAMPLES / "pending-gangs-dump.yaml")])):
        if only is not None and label != only:
            continue
        full = argv if "--dump" in argv else [*argv, "--dump", str(dump)]
        assert main(["why-pending", *full, "--format", "json"]) == 0
        yield label, json.loads(capsys.readouterr().out)


def test_why_pending_reports_hold(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    check = validator("why-pending-report")
    kinds: set[str] = set()
    for label, report in why_pending_reports(capsys, tmp_path):
        errors = sorted(check.iter_errors(report), key=lambda e: list(e.path))
        assert not errors, (label, errors[0].message, list(errors[0].path))
        kinds |= {r["kind"] for p in report["pods"] for r in p["reasons"]}
        kinds |= {r["kind"] for w in report["workloads"] for r in w["reasons"]}
    assert len(kinds) >= 6 and {"gang", "queue", "quota"} <= kinds
    # the schema names exactly the reasons the engine knows
    assert set(load("why-pending-report")["$defs"]["reason"]["properties"]["kind"]["enum"]) == {
        *dg.KINDS, *dg.WORKLOAD_KINDS}


def _objects_with_properties(schema: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(schema, dict):
        if "properties" in schema:
            yield where, schema
        for key, value in schema.items():
            yield from _objects_with_properties(value, f"{where}/{key}")
    elif isinstance(schema, list):
        for i, value in enumerate(schema):
            yield from _objects_with_properties(value, f"{where}/{i}")


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_fixed_shapes_forbid_undeclared_properties(name: str) -> None:
    loose = [where for where, obj in _objects_with_properties(load(name)) if obj.get("additionalProperties") is not False]
    assert loose == []


def _mutations(report: dict[str, Any], name: str) -> Iterator[tuple[str, dict[str, Any]]]:
    def changed(how: str, edit: Any) -> tuple[str, dict[str, Any]]:
        doc = copy.deepcopy(report)
        edit(doc)
        return how, doc

    yield changed("extra top-level key", lambda d: d.update(extra=1))
    if name == "why-pending-report":
        yield changed("pods not a list", lambda d: d.update(pods={}))
        yield changed("unknown reason kind", lambda d: d["pods"][0]["reasons"][0].update(kind="vibes"))
        yield changed("pool without free", lambda d: d["cluster"]["pools"][0].pop("free"))
        yield changed("negative allocatable", lambda d: d["cluster"]["pools"][0].update(allocatable=-1))
        yield changed("no workloads", lambda d: d.pop("workloads"))
        yield changed("workload without a kind", lambda d: d["workloads"].append({"name": "j", "namespace": "ml",
                                                                                 "reasons": []}))
        yield changed("workload with no reason", lambda d: d["workloads"].append(
            {"name": "j", "namespace": "ml", "kind": "Job", "reasons": []}))
        return
    yield changed("summary without by_severity", lambda d: d["summary"].pop("by_severity"))
    yield changed("count as a string", lambda d: d["summary"]["by_severity"].update(error="1"))
    yield changed("unknown severity", lambda d: d["findings"][0].update(severity="fatal"))
    yield changed("finding without message", lambda d: d["findings"][0].pop("message"))
    yield changed("extra finding key", lambda d: d["findings"][0].update(colour="red"))
    yield changed("line 0", lambda d: d["findings"][0].update(line=0))
    yield changed("fix not a patch", lambda d: d["findings"][0].update(fix=[{"op": "delete", "path": "/x"}]))
    yield changed("error line 0", lambda d: d["errors"].append({"file": "f", "line": 0, "message": "m"}))
    yield changed("rule id shape", lambda d: d["findings"][0].update(rule="Limit Missing"))


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_mutated_reports_fail(name: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    if name == "lint-report":
        report = _json(["lint", str(EXAMPLES / "manifests"), "--cluster", "sample", "--format", "json"], capsys)
    elif name == "audit-report":
        report = _json(["audit", str(AUDIT / "workloads.yaml"), "--format", "json"], capsys)
    else:
        [(_, report)] = why_pending_reports(capsys, tmp_path, only="example")
    check = validator(name)
    assert check.is_valid(report)
    assert report.get("findings", report.get("pods"))
    for how, doc in _mutations(report, name):
        assert not check.is_valid(doc), how


def test_the_command_prints_the_shipped_files(tmp_path: Path) -> None:
    for name in SCHEMAS:
        done = gpuguard("schema", name)
        assert done.code == 0 and done.stdout == text(name)
        assert done.stdout == (ROOT / "gpuguard" / "schemas" / f"{name}.json").read_text()
        assert json.loads(done.stdout)["$id"].endswith(f"/gpuguard/schemas/{name}.json")
    done = gpuguard("schema", "lint")
    assert done.code == 2 and "invalid choice: 'lint'" in done.stderr


def test_rule_ids_fit_the_pattern() -> None:
    import re

    pattern = load("lint-report")["$defs"]["finding"]["properties"]["rule"]["pattern"]
    assert all(re.fullmatch(pattern.strip("^$"), rule) for rule in RULES)

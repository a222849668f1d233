"""--fix / --diff: the fixed file equals the engine's JSON Patch applied by `jsonpatch`, comments and
layout survive, a second run finds nothing to fix, and only fixed documents change."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonpatch
import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from linter.fixer import FixError, fix_document
from policies import evaluate
from policies.registry import RULES
from policies.types import PatchOp
from tests.support.lint import only_rules, run_lint
from tests.support.paths import FIXTURES

LINT = FIXTURES / "lint"
ONLY_LIMIT = load_config({"rules": {rid: "off" for rid in RULES if rid != "gpu-limit-missing"}})


def _ops(obj: dict[str, object]) -> list[dict[str, object]]:
    return [op.to_dict() for op in evaluate(obj, ONLY_LIMIT).patch()]


def _expected_after_patch(text: str) -> list[object]:
    out: list[object] = []
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict) and doc.get("kind") == "List":
            doc["items"] = [jsonpatch.apply_patch(item, _ops(item)) for item in doc["items"]]
        elif isinstance(doc, dict) and "kind" in doc:
            doc = jsonpatch.apply_patch(doc, _ops(doc))
        out.append(doc)
    return out


@pytest.mark.parametrize("name", ["pod-limit-missing.yaml", "multi-doc.yaml", "list.yaml", "helm-rendered.yaml"])
def test_fix_parity_idempotence_and_comments(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / name
    shutil.copyfile(LINT / name, target)
    original = target.read_text()
    config = only_rules(tmp_path, "gpu-limit-missing")

    code, out, _ = run_lint([str(target), "--config", config, "--fix", "--format", "json"], capsys, monkeypatch)
    fixed = target.read_text()
    report = json.loads(out)
    assert fixed != original
    assert code == 0 and report["findings"] == [] and report["errors"] == []
    assert report["summary"]["fixed_files"] == [str(target)]
    assert list(yaml.safe_load_all(fixed)) == _expected_after_patch(original)

    comments = [line.strip() for line in original.splitlines() if line.strip().startswith("#")]
    assert comments == [line.strip() for line in fixed.splitlines() if line.strip().startswith("#")]
    assert "# keep this name" in fixed or "# keep this name" not in original

    code, _, _ = run_lint([str(target), "--config", config, "--fix"], capsys, monkeypatch)
    assert code == 0
    assert target.read_text() == fixed, "a second --fix changes nothing"


def test_fix_only_adds_lines_and_keeps_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "pod.yaml"
    shutil.copyfile(LINT / "pod-limit-missing.yaml", target)
    config = only_rules(tmp_path, "gpu-limit-missing")
    code, out, err = run_lint([str(target), "--config", config, "--diff"], capsys, monkeypatch)
    assert code == 1, "--diff writes nothing, so the finding remains"
    assert target.read_text() == (LINT / "pod-limit-missing.yaml").read_text()
    changed = [line for line in out.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert changed == ["+        limits:", "+          nvidia.com/gpu: 1"]
    assert "error gpu-limit-missing" in err  # the report moves to stderr


def test_multi_document_fix_touches_only_the_fixed_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "multi.yaml"
    shutil.copyfile(LINT / "multi-doc.yaml", target)
    original = target.read_text()
    run_lint([str(target), "--config", only_rules(tmp_path, "gpu-limit-missing"), "--fix"], capsys, monkeypatch)
    fixed = target.read_text()
    head = original[: original.rindex("---")]
    assert fixed.startswith(head)
    assert len(list(yaml.safe_load_all(fixed))) == 3


def test_fix_from_stdin_prints_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = (LINT / "helm-rendered.yaml").read_bytes()
    config = only_rules(tmp_path, "gpu-limit-missing")
    code, out, err = run_lint(["-", "--config", config, "--fix"], capsys, monkeypatch, stdin=source)
    assert code == 0
    assert list(yaml.safe_load_all(out)) == _expected_after_patch(source.decode())
    assert "# Source: gpu-app/templates/job.yaml" in out
    assert "0 errors" in err


def test_new_containers_follow_flow_style() -> None:
    text = "spec:\n  resources: {requests: {nvidia.com/gpu: 1}}\n"
    out = fix_document(text, [PatchOp("add", "/spec/resources/limits", {"nvidia.com/gpu": 1})])
    assert out == "spec:\n  resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 1}}\n"


@pytest.mark.parametrize(
    "op",
    [PatchOp("replace", "/spec/missing", 1), PatchOp("add", "/nope/deeper", 1), PatchOp("remove", "/spec/list/5")],
)
def test_inapplicable_ops_are_refused(op: PatchOp) -> None:
    with pytest.raises(FixError):
        fix_document("spec:\n  list: [1]\n", [op])


def test_list_ops_follow_rfc6902() -> None:
    text = "spec:\n  items:\n  - a\n  - b\n"
    ops = [
        PatchOp("add", "/spec/items/1", "x"),
        PatchOp("add", "/spec/items/-", "z"),
        PatchOp("remove", "/spec/items/0"),
    ]
    out = fix_document(text, ops)
    assert yaml.safe_load(out) == jsonpatch.apply_patch(yaml.safe_load(text), [o.to_dict() for o in ops])


@pytest.mark.parametrize("layout", ["pretty", "one-line", "compact"])
def test_fix_keeps_json_manifests_json(
    layout: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    original = json.loads((LINT / "deployment.json").read_text())
    text = {
        "pretty": json.dumps(original, indent=4) + "\n",
        "one-line": json.dumps(original),
        "compact": json.dumps(original, separators=(",", ":")),
    }[layout]
    target = tmp_path / "deployment.json"
    target.write_text(text)
    config = only_rules(tmp_path, "gpu-limit-missing")
    run_lint([str(target), "--config", config, "--fix"], capsys, monkeypatch)
    fixed = target.read_text()
    assert json.loads(fixed) == jsonpatch.apply_patch(original, _ops(original))
    assert fixed.endswith("\n") == text.endswith("\n")
    if layout == "pretty":
        assert '\n    "kind": "Deployment",\n' in fixed
    else:
        assert "\n" not in fixed.strip()
        assert (", " in fixed) == (layout == "one-line")
    code, _, _ = run_lint([str(target), "--config", config, "--fix"], capsys, monkeypatch)
    assert code == 0 and target.read_text() == fixed

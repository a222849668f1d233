"""Smoke test over the public corpus: real manifests lint without input errors; unrendered
templates are input errors naming each file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuguard.sources.yamlsafe import read_text
from linter.lint import lint_text
from policies import ClusterFacts, Config
from tests.support.lint import run_lint
from tests.support.paths import CORPUS

REAL = CORPUS / "real"
TEMPLATES = CORPUS / "helm-templates"

pytestmark = pytest.mark.slow


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml", ".json"))


def test_every_real_manifest_is_linted(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    files = _files(REAL)
    for path in files:
        result = lint_text(read_text(path), str(path), Config(), ClusterFacts.empty())
        # The only input errors are unrendered placeholders (pinned in test_corpus_precision.py).
        assert all(e.message.startswith("unrendered placeholder") for e in result.errors), path.name
        assert result.documents > 0, path.name
    code, out, _ = run_lint([str(REAL), "--format", "json", "--cluster", "sample"], capsys, monkeypatch)
    report = json.loads(out)
    assert code == 2  # the placeholders
    assert all(e["message"].startswith("unrendered placeholder") for e in report["errors"])
    assert report["summary"]["files"] == len(files)
    assert report["summary"]["objects"] > len(files) / 2
    for finding in report["findings"]:
        assert finding["line"] >= 1 and finding["column"] >= 1


def test_unrendered_templates_are_input_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _files(TEMPLATES)
    code, out, _ = run_lint([str(TEMPLATES), "--format", "json"], capsys, monkeypatch)
    report = json.loads(out)
    assert code == 2
    assert sorted(e["file"] for e in report["errors"]) == sorted(str(p) for p in files)
    assert report["findings"] == []
    for error in report["errors"]:
        assert error["line"] >= 1
        assert "unrendered template" in error["message"] or "invalid YAML" in error["message"], error

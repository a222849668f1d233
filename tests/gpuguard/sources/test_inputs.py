"""Bad inputs: each a precise error with file and line, or a quiet skip — never a traceback."""

from __future__ import annotations

import json
import time
import tracemalloc
from pathlib import Path

import pytest

from gpuguard.sources import inputs, yamlsafe
from gpuguard.sources.loader import parse_text
from tests.support.lint import run_lint
from tests.support.paths import FIXTURES

BAD = FIXTURES / "lint" / "bad-inputs"
GOOD_POD = FIXTURES / "lint" / "pod-limit-missing.yaml"


@pytest.mark.parametrize(
    ("name", "line", "message"),
    [
        ("broken.yaml", 8, "invalid YAML: did not find expected ',' or ']'"),
        (
            "unrendered.yaml",
            4,
            "unrendered template (Helm/Go template syntax `{{` at line 4); render it with `helm template` first",
        ),
        ("binary.yaml", 0, "binary file, not YAML"),
        ("not-utf8.yaml", 4, "not UTF-8 text"),
        ("alias-bomb.yaml", None, "alias bomb"),
        ("recursive-alias.yaml", 3, "recursive YAML alias"),
        ("duplicate-keys.yaml", 9, "duplicate key 'containers' (first at line 6)"),
        ("list-document.yaml", 1, "document is a YAML list of 1 item, not a Kubernetes object"),
    ],
)
def test_bad_input_is_an_error_with_line(
    name: str, line: int | None, message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(BAD / name)
    code, out, _ = run_lint([path, str(GOOD_POD), "--format", "json"], capsys, monkeypatch)
    report = json.loads(out)
    assert code == 2
    (error,) = report["errors"]
    assert error["file"] == path
    assert message in error["message"]
    if line is not None:  # 0: the error has no line, which JSON says as null
        assert error["line"] == (line if line > 0 else None)
    assert any(f["file"] == str(GOOD_POD) for f in report["findings"]), "other inputs are still linted"


@pytest.mark.parametrize("name", ["not-kubernetes.yaml", "empty.yaml", "scalar.yaml"])
def test_non_kubernetes_input_is_skipped_quietly(
    name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run_lint([str(BAD / name), "--format", "json"], capsys, monkeypatch)
    report = json.loads(out)
    assert (code, report["errors"], report["findings"]) == (0, [], [])
    assert report["summary"]["objects"] == 0


def test_alias_bomb_is_bounded_in_time_and_memory() -> None:
    text = (BAD / "alias-bomb.yaml").read_text()
    tracemalloc.start()
    start = time.perf_counter()
    parsed = parse_text(text, "bomb.yaml")
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert parsed.documents == [] and len(parsed.errors) == 1
    assert elapsed < 2.0
    assert peak < 20 * 1024 * 1024


def test_anchors_within_reason_are_fine() -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - name: a\n    image: x\n    env: &env [{name: A, value: '1'}]\n"
        "  - name: b\n    image: x\n    env: *env\n"
    )
    parsed = parse_text(text, "anchors.yaml")
    assert parsed.errors == []
    assert parsed.documents[0].data["spec"]["containers"][1]["env"] == [{"name": "A", "value": "1"}]


def test_deep_nesting_is_an_error() -> None:
    text = "a: " + "[" * 300 + "]" * 300 + "\n"
    parsed = parse_text(text, "deep.yaml")
    assert parsed.documents == []
    assert "nesting deeper than" in parsed.errors[0].message


def test_huge_document_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    huge = tmp_path / "huge.yaml"
    blob = "x" * 1024
    lines = "".join(f"  k{i}: {blob}\n" for i in range(3 * 1024 + 10))
    huge.write_text(f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: huge\ndata:\n{lines}")
    code, out, _ = run_lint([str(huge), "--format", "json"], capsys, monkeypatch)
    (error,) = json.loads(out)["errors"]
    assert code == 2
    assert "MiB; the API server accepts at most 3 MiB per object" in error["message"]


def test_file_size_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlsafe, "MAX_FILE_BYTES", 100)
    monkeypatch.setattr(inputs, "MAX_FILE_BYTES", 100)
    code, out, _ = run_lint([str(GOOD_POD), "--format", "json"], capsys, monkeypatch)
    (error,) = json.loads(out)["errors"]
    assert code == 2 and "gpuguard reads at most" in error["message"]
    code, out, _ = run_lint(["-", "--format", "json"], capsys, monkeypatch, stdin=GOOD_POD.read_bytes())
    (error,) = json.loads(out)["errors"]
    assert code == 2 and error["file"] == "<stdin>" and "gpuguard reads at most" in error["message"]


def test_timestamps_stay_strings() -> None:
    parsed = parse_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  creationTimestamp: 2024-05-01T10:00:00Z\n", "t")
    assert parsed.documents[0].data["metadata"]["creationTimestamp"] == "2024-05-01T10:00:00Z"

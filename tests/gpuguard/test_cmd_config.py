"""`gpuguard config schema` and `gpuguard config check FILE`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuguard.cli import main
from gpuguard.sources.configmodel import TOP_LEVEL_KEYS
from tests.support.paths import ROOT


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["config", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_schema_is_the_models(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "schema")
    assert (code, err) == (0, "")
    schema = json.loads(out)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert tuple(schema["properties"]) == TOP_LEVEL_KEYS
    assert out == (ROOT / "deploy" / "gpuguard-config.schema.json").read_text()


def test_check_a_valid_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / ".gpuguard.yaml"
    path.write_text("enforcement: warn\nrules:\n  gpu-shared-memory: off\n")
    code, out, err = run(capsys, "check", str(path))
    assert (code, err) == (0, "")
    assert out == f"{path}: valid gpuguard config (sets enforcement, rules; 1 rule configured)\n"
    path.write_text("# nothing set yet\n")
    assert run(capsys, "check", str(path))[1] == f"{path}: valid gpuguard config (empty: every setting has its default)\n"


def test_check_reports_every_problem_at_file_line_column(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("enforcment: warn\nrules:\n  gpu-shared-memory: {severity: loud}\n")
    code, out, err = run(capsys, "check", str(path))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"{path}:1:1: config error: enforcment: unknown key; did you mean 'enforcement'?",
        f"{path}:3:23: config error: rules.gpu-shared-memory.severity: expected one of error, warning, info, off, "
        "got 'loud'",
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        (b"rules: [\n", "invalid YAML"),
        (b"\xff\xfe\x00\x00", "binary file"),
        (b"a: 1\n---\nb: 2\n", "config must be a single YAML document"),
    ],
)
def test_check_unreadable_input_without_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "policy.yaml"
    if content is not None:
        path.write_bytes(content)
    code, out, err = run(capsys, "check", str(path))
    assert (code, out) == (2, "")
    # the file, with its line where it has one ("cannot read FILE: …" names it without)
    assert err.startswith("gpuguard config check: ") and str(path) in err and message in err
    assert "Traceback" not in err


def test_an_action_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys)
    assert code == 2 and "ACTION" in err

"""Run ``gpuguard lint`` in-process and build small configs for it."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from linter import cmd_lint
from policies.registry import RULES


def run_lint(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stdin: bytes = b""
) -> tuple[int, str, str]:
    """Run ``gpuguard lint ARGV`` in-process; return (exit code, stdout, stderr)."""
    parser = argparse.ArgumentParser()
    cmd_lint.add_arguments(parser)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = cmd_lint.run(parser.parse_args(argv))
    out, err = capsys.readouterr()
    return code, out, err


def only_rules(tmp_path: Path, *enabled: str, **severity: str) -> str:
    """A config file that turns every rule off except ``enabled`` (severities by rule id)."""
    rules: dict[str, Any] = {rid: "off" for rid in RULES if rid not in enabled}
    for rid in enabled:
        rules[rid] = {"severity": severity.get(rid.replace("-", "_"), "error")}
    path = tmp_path / "gpuguard-config.yaml"
    path.write_text(yaml.safe_dump({"rules": rules}))
    return str(path)


def line_of(text: str, needle: str, after: int = 0) -> tuple[int, int]:
    """1-based (line, column) of the first ``needle`` at or after line ``after``."""
    for i, line in enumerate(text.splitlines()[after:], start=after):
        if needle in line:
            return i + 1, line.index(needle) + 1
    raise AssertionError(f"{needle!r} not found")

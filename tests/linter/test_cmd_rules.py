"""gpuguard rules: the catalogue and one rule's documentation."""

from __future__ import annotations

import argparse
import json

import pytest

from linter import cmd_rules
from policies.registry import RULES
from policies.rule import rule_doc


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    cmd_rules.add_arguments(parser)
    code = cmd_rules.run(parser.parse_args(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_catalogue_lists_every_rule(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run([], capsys)
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:] if line.startswith("gpu-")}
    assert list(rows) == list(RULES)
    for rule_id, module in RULES.items():
        fixable = "yes" if module.FIXABLE else "no"
        assert rows[rule_id][1:4] == [str(module.DEFAULT_SEVERITY), module.NEEDS_FACTS, fixable]
        assert module.SUMMARY in out


def test_catalogue_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--format", "json"], capsys)
    entries = json.loads(out)
    assert code == 0
    assert [e["id"] for e in entries] == list(RULES)
    assert all(e["remediation"] == RULES[e["id"]].REMEDIATION for e in entries)


@pytest.mark.parametrize("rule_id", list(RULES))
def test_one_rule_documentation(rule_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = RULES[rule_id]
    code, out, _ = _run([rule_id], capsys)
    assert code == 0
    assert out.startswith(rule_id + "\n")
    assert rule_doc(module) in out
    assert f"Remediation: {module.REMEDIATION}" in out
    assert f"default severity: {module.DEFAULT_SEVERITY}" in out
    for option in module.OPTIONS:
        assert f"{option.name} ({option.type_names()}, default: {option.default!r})" in out
        assert option.doc in out
    if not module.OPTIONS:
        assert "Options:\n  none" in out


def test_unknown_rule_exits_2_with_close_matches(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(["gpu-limit-mising"], capsys)
    assert code == 2
    assert out == ""
    assert "unknown rule 'gpu-limit-mising'" in err
    assert "gpu-limit-missing" in err
    code, _, err = _run(["zzz"], capsys)
    assert code == 2 and "gpuguard rules" in err


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuguard.cli import main

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("gpuguard 0.")


def test_a_prefix_is_suggested_first_in_a_subprocess() -> None:
    from tests.support.proc import gpuguard

    done = gpuguard("rules", "gpu-taint")
    assert done.code == 2 and done.stdout == ""
    assert done.stderr.startswith("gpuguard rules: unknown rule 'gpu-taint'; did you mean gpu-taint-not-tolerated, ")


def test_explain_image_refuses_an_invalid_reference() -> None:
    from tests.support.inprocess import gpuguard_here
    from tests.support.proc import gpuguard

    done = gpuguard("explain-image", "not a valid image ref")
    assert done.code == 2 and done.stdout == ""
    assert done.stderr == ("gpuguard explain-image: invalid reference format: 'not a valid image ref': it contains "
                           "whitespace (a reference is one word, e.g. nvcr.io/nvidia/pytorch:24.05-py3)\n")
    for ref, why in (("nvidia/cuda:", "the tag after ':' is empty"),
                     ("nvidia/cuda@sha256:abc", "the digest after '@' must be ALGORITHM:HEX"),
                     ("nvidia//cuda:12.4.1-base", "a path component is empty")):
        done = gpuguard_here("explain-image", ref, "--format", "json")
        assert done.code == 2 and done.stdout == "" and why in done.stderr, (ref, done.stderr)
    assert gpuguard_here("explain-image", "nvidia/cuda:12.4.1-base-ubuntu22.04").code == 0

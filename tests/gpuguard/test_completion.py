"""`gpuguard completion bash|zsh`: the scripts complete in real bash and zsh."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuguard.cli import SUBCOMMANDS, build_parser, main
from linter.cmd_lint import FORMATS
from policies.registry import RULES
from tests.support.completion import bash_complete, zsh_complete
from tests.support.tools import tool

Complete = Callable[[list[str]], set[str]]

pytestmark = pytest.mark.integration  # runs real bash and zsh


def _long_options(sub: str) -> set[str]:
    parser = build_parser()
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {o for a in action.choices[sub]._actions for o in a.option_strings if o.startswith("--")}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A working directory with manifests, a snapshot, other files and folders."""
    root = tmp_path / "project"
    (root / "k8s").mkdir(parents=True)
    (root / "charts" / "app").mkdir(parents=True)
    for name in ("pod.yaml", "job.yml", "list.json", "snapshot.yaml", "notes.txt", "tls.crt"):
        (root / name).write_text("")
    return root


def _script(shell: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert main(["completion", shell]) == 0
    path = tmp_path / f"gpuguard.{shell}"
    path.write_text(capsys.readouterr().out)
    return path


@pytest.fixture(params=["bash", "zsh"])
def complete(
    request: pytest.FixtureRequest, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Complete:
    """complete(words): what the shell offers for the last word ("" = a new word)."""
    shell: str = request.param
    script = _script(shell, tmp_path, capsys)
    if shell == "bash":
        bash = tool("bash")
        return lambda words: bash_complete(bash, script, ["gpuguard", *words], project)
    zsh = tool("zsh", how="apt-get install zsh")
    return lambda words: zsh_complete(zsh, script, " ".join(["gpuguard", *words]), project, tmp_path / "zsh")


def test_subcommands(complete: Complete) -> None:
    assert complete([""]) == set(SUBCOMMANDS)
    assert complete(["ex"]) == {"explain-image"}


@pytest.mark.parametrize("sub", list(SUBCOMMANDS))
def test_each_subcommands_flags(complete: Complete, sub: str) -> None:
    offered = complete([sub, "--"])
    assert _long_options(sub) <= offered
    assert offered - _long_options(sub) <= {"--help"}


def test_choices(complete: Complete) -> None:
    assert complete(["lint", "--format", ""]) == set(FORMATS)
    assert complete(["lint", "--fail-on", "w"]) == {"warning"}
    assert complete(["rules", "gpu-t"]) == {r for r in RULES if r.startswith("gpu-t")} != set()
    assert complete(["rules", "--format", ""]) == {"text", "json"}
    assert complete(["completion", ""]) == {"bash", "zsh"}
    assert complete(["config", ""]) == {"schema", "check"}
    assert complete(["serve", "--log-level", ""]) == {"debug", "info", "warning", "error"}


def _names(offered: set[str]) -> set[str]:
    return {o.rstrip("/") for o in offered}


def test_paths(complete: Complete) -> None:
    # manifests and folders for lint; not other files
    assert _names(complete(["lint", ""])) == {"pod.yaml", "job.yml", "list.json", "snapshot.yaml", "k8s", "charts"}
    assert _names(complete(["lint", "--fail-on", "error", "k"])) == {"k8s"}
    # a snapshot file or the bundled profile
    assert _names(complete(["lint", "--cluster", "s"])) == {"sample", "snapshot.yaml"}
    assert "sample" in complete(["serve", "--cluster", ""])
    # folders only
    assert _names(complete(["lint", "--helm-chart", ""])) == {"k8s", "charts"}
    assert _names(complete(["certs", "--out-dir", "c"])) == {"charts"}
    # any file
    assert _names(complete(["serve", "--tls-cert", "t"])) == {"tls.crt"}
    assert _names(complete(["config", "check", "t"])) == {"tls.crt"}

"""`gpuguard completion bash|zsh|fish`: the scripts complete in real bash, zsh and fish; and
`kubectl_complete-gpuguard`, what kubectl runs to complete `kubectl gpuguard …`, in a child process."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuguard.cli import SUBCOMMANDS, build_parser, main
from linter.cmd_lint import FORMATS
from policies.registry import RULES
from tests.support.completion import bash_complete, fish_complete, zsh_complete
from tests.support.tools import tool

Complete = Callable[[list[str]], set[str]]

pytestmark = pytest.mark.integration  # runs real bash, zsh and fish

PLUGIN_COMPLETE = Path(sys.executable).parent / "kubectl_complete-gpuguard"


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


@pytest.fixture(params=["bash", "zsh", "fish"])
def complete(
    request: pytest.FixtureRequest, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Complete:
    """complete(words): what the shell offers for the last word ("" = a new word)."""
    shell: str = request.param
    script = _script(shell, tmp_path, capsys)
    if shell == "bash":
        bash = tool("bash")
        return lambda words: bash_complete(bash, script, ["gpuguard", *words], project)
    if shell == "fish":
        fish = tool("fish", how="apt-get install fish")
        return lambda words: fish_complete(fish, script, " ".join(["gpuguard", *words]), project)
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
    assert complete(["completion", ""]) == {"bash", "zsh", "fish"}
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


def test_the_fish_script_parses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fish = tool("fish", how="apt-get install fish")
    script = _script("fish", tmp_path, capsys)
    proc = subprocess.run([str(fish), "--no-config", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "complete -c gpuguard" in script.read_text()


# --- kubectl_complete-gpuguard ------------------------------------------------------------------

def plugin_complete(project: Path, *words: str) -> tuple[list[str], int]:
    """(candidates without descriptions, directive) for ``kubectl gpuguard WORDS…``."""
    assert PLUGIN_COMPLETE.is_file(), f"{PLUGIN_COMPLETE} is missing: reinstall gpuguard (`pip install -e .`)"
    proc = subprocess.run([str(PLUGIN_COMPLETE), *words], cwd=project, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    *lines, last = proc.stdout.splitlines()
    assert last.startswith(":"), proc.stdout  # cobra's directive line ends the answer
    return [line.split("\t", 1)[0] for line in lines], int(last[1:])


NO_SPACE, NO_FILE_COMP, FILTER_FILE_EXT, FILTER_DIRS = 2, 4, 8, 16


def test_plugin_completes_subcommands_and_flags(project: Path) -> None:
    assert plugin_complete(project, "") == (list(SUBCOMMANDS), NO_FILE_COMP)
    assert plugin_complete(project, "ex") == (["explain-image"], NO_FILE_COMP)
    flags, directive = plugin_complete(project, "lint", "--")
    assert set(flags) == _long_options("lint") | {"--help"} and directive == NO_FILE_COMP
    proc = subprocess.run([str(PLUGIN_COMPLETE), "li"], capture_output=True, text=True, timeout=60)
    assert proc.stdout == f"lint\t{SUBCOMMANDS['lint'][1]}\n:4\n"  # candidate<TAB>description, then :directive


def test_plugin_completes_values(project: Path) -> None:
    assert plugin_complete(project, "lint", "--format", "") == (list(FORMATS), NO_FILE_COMP)
    assert plugin_complete(project, "lint", "--format=j") == (["--format=json"], NO_FILE_COMP)
    assert plugin_complete(project, "rules", "gpu-t") == ([r for r in RULES if r.startswith("gpu-t")], NO_FILE_COMP)
    assert plugin_complete(project, "completion", "") == (["bash", "zsh", "fish"], NO_FILE_COMP)
    assert plugin_complete(project, "lint", "--cluster", "s") == (["sample", "snapshot.yaml"], NO_FILE_COMP)
    found, directive = plugin_complete(project, "lint", "--cluster", "")
    assert found[0] == "sample" and {"k8s/", "charts/", "pod.yaml"} <= set(found) and directive == NO_FILE_COMP | NO_SPACE
    # the shell does the rest: manifests by extension, folders only, any file
    assert plugin_complete(project, "lint", "") == (["yaml", "yml", "json"], FILTER_FILE_EXT)
    assert plugin_complete(project, "lint", "--helm-chart", "") == ([], FILTER_DIRS)
    assert plugin_complete(project, "certs", "--out-dir", "c") == ([], FILTER_DIRS)
    assert plugin_complete(project, "serve", "--tls-cert", "t") == ([], 0)
    assert plugin_complete(project, "explain-image", "") == ([], NO_FILE_COMP)  # an image name: no files

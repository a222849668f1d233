"""The ``gpuguard`` shell in a child process: a bad flag gets the usage of the subcommand it was given
to, and usages name the program as invoked (``kubectl gpuguard`` as the kubectl plugin)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuguard.cli import SUBCOMMANDS, program_name
from tests.support.inprocess import gpuguard_here
from tests.support.paths import EXAMPLES
from tests.support.proc import gpuguard

BIN = Path(sys.executable).parent


@pytest.mark.parametrize(("sub", "extra"), [
    ("lint", []), ("audit", []), ("why-pending", []), ("rules", []), ("explain-image", ["nvcr.io/x:1"]),
    ("completion", ["bash"]), ("webhook-config", []),
    ("certs", ["--service", "s", "--namespace", "n", "--out-dir", "d"]),
    ("serve", ["--tls-cert", "c", "--tls-key", "k"]),
])
def test_a_bad_flag_prints_the_subcommands_usage(sub: str, extra: list[str]) -> None:
    run = gpuguard_here(sub, *extra, "--badflag")
    assert run.code == 2
    assert run.stderr.startswith(f"usage: gpuguard {sub} "), run.stderr
    assert f"gpuguard {sub}: error: unrecognized arguments: --badflag" in run.stderr
    assert "COMMAND ..." not in run.stderr  # not the top-level usage


@pytest.mark.parametrize("argv", [
    ("lint", str(EXAMPLES / "manifests"), "--cluster", "sample", "--format", "json"),
    ("lint", "-", "--format", "github"),
    ("lint", "--badflag"),
    ("explain-image", "not a reference"),
])
def test_in_process_runs_print_and_return_what_the_child_process_does(argv: tuple[str, ...]) -> None:
    stdin = b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 0.5}}}]}\n"
    child, here = gpuguard(*argv, stdin=stdin), gpuguard_here(*argv, stdin=stdin)
    assert (here.code, here.stdout, here.stderr) == (child.code, child.stdout, child.stderr)
    assert child.stdout or child.stderr


def test_a_bad_flag_before_any_subcommand_gets_the_top_level_usage() -> None:
    run = gpuguard("--badflag")
    assert run.code == 2
    assert run.stderr.startswith("usage: gpuguard [-h] [--version] COMMAND ...")
    assert "gpuguard: error: unrecognized arguments: --badflag" in run.stderr


def test_a_bad_value_still_names_the_subcommand() -> None:
    run = gpuguard("lint", "--format", "xml")
    assert run.code == 2
    assert run.stderr.startswith("usage: gpuguard lint ")
    assert "argument --format: invalid choice: 'xml'" in run.stderr


@pytest.mark.parametrize(
    ("argv0", "name"),
    [
        ("/usr/local/bin/gpuguard", "gpuguard"),
        ("/home/u/.venv/bin/kubectl-gpuguard", "kubectl gpuguard"),
        ("kubectl-gpu_guard-lint", "kubectl gpu-guard lint"),
        ("/x/gpuguard/cli.py", "gpuguard"),
        ("kubectl-", "gpuguard"),
    ],
)
def test_program_name(argv0: str, name: str) -> None:
    assert program_name(argv0) == name


@pytest.mark.slow  # one run of the plugin script per subcommand
def test_the_plugin_script_names_itself_kubectl_gpuguard() -> None:
    plugin = BIN / "kubectl-gpuguard"
    assert plugin.is_file(), f"{plugin} is missing: reinstall gpuguard (`pip install -e .`)"
    top = subprocess.run([str(plugin), "--help"], capture_output=True, text=True, timeout=60)
    assert top.returncode == 0
    assert top.stdout.startswith("usage: kubectl gpuguard [-h] [--version] COMMAND ...")
    for sub in SUBCOMMANDS:
        out = subprocess.run([str(plugin), sub, "--help"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(f"usage: kubectl gpuguard {sub} "), out.stdout[:200]
    bad = subprocess.run([str(plugin), "lint", "--badflag"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.startswith("usage: kubectl gpuguard lint ")
    assert "kubectl gpuguard lint: error: unrecognized arguments: --badflag" in bad.stderr

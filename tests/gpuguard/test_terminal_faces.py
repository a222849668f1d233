"""Text output of lint, audit and why-pending in a child process, on a real pseudo-terminal (the
``pty`` module, its width set with TIOCSWINSZ) and through a pipe: lines wrap to the terminal only,
colour follows ``--color``, ``NO_COLOR`` and ``FORCE_COLOR``, and ``--quiet`` leaves the findings."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from tests.support.paths import FIXTURES, ROOT
from tests.whypending.support import objects, write_dump

SGR = re.compile(r"\x1b\[[0-9;]*m")
# relative to ROOT, the commands' working directory: a location fits on an 80-column line
LINT_INPUT = str((FIXTURES / "lint" / "pod-limit-missing.yaml").relative_to(ROOT))
AUDIT_INPUT = [str((FIXTURES / "audit" / name).relative_to(ROOT)) for name in ("workloads.yaml", "cluster-before.yaml")]
AUDIT_INPUT.insert(1, "--cluster")
GPUGUARD = [sys.executable, "-m", "gpuguard.cli"]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TERM"}}
    return {**env, "PYTHONPATH": str(ROOT), "TERM": "xterm", **extra}


def on_a_terminal(args: list[str], columns: int, **env: str) -> tuple[int, str]:
    """(exit code, what the command wrote to its terminal) with stdout a pty ``columns`` wide."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen([*GPUGUARD, *args], stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE,
                            env=_env(**env), cwd=ROOT)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    proc.wait(timeout=120)
    assert proc.stderr is not None
    proc.stderr.close()
    return proc.returncode, b"".join(chunks).decode().replace("\r\n", "\n")


def through_a_pipe(args: list[str], **env: str) -> tuple[int, str, str]:
    proc = subprocess.run([*GPUGUARD, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=_env(**env), cwd=ROOT, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def widest(text: str) -> int:
    """The widest line, but for the GPU pool table of audit (a table is never wrapped)."""
    lines = text.splitlines()
    if "GPU pools:" in lines:
        lines = [*lines[: lines.index("GPU pools:")], lines[-1]]
    return max(len(SGR.sub("", line)) for line in lines)


@pytest.mark.parametrize("face", [["lint", LINT_INPUT], ["audit", *AUDIT_INPUT]])
def test_text_wraps_to_the_terminal_and_not_in_a_pipe(face: list[str]) -> None:
    code, piped, _ = through_a_pipe(face)
    assert widest(piped) > 120  # long findings stay on one line for grep
    for columns in (80, 100):
        tty_code, shown = on_a_terminal(face, columns)
        assert tty_code == code
        assert widest(shown) <= columns, shown
        # the same words, in the same order: only the line breaks differ
        assert SGR.sub("", shown).split() == piped.split()


def test_lint_excerpts_keep_their_caret_when_wrapped() -> None:
    _, shown = on_a_terminal(["lint", LINT_INPUT], 80)
    lines = SGR.sub("", shown).splitlines()
    source = next(i for i, line in enumerate(lines) if line.lstrip().startswith("16 |"))
    assert lines[source].endswith("nvidia.com/gpu: 1")
    assert lines[source + 1].index("^") == lines[source].index("nvidia.com")
    finding = next(i for i, line in enumerate(lines) if re.search(r" error gpu-limit-missing( |$)", line))
    assert lines[finding + 1].startswith("    ")  # the finding goes on, indented


@pytest.mark.slow  # several runs of gpuguard in child processes
def test_colour_on_a_terminal_unless_no_color() -> None:
    _, shown = on_a_terminal(["lint", LINT_INPUT], 120)
    assert "\x1b[31merror\x1b[0m" in shown
    _, plain = on_a_terminal(["lint", LINT_INPUT], 120, NO_COLOR="1")
    assert "\x1b[" not in plain
    _, empty = on_a_terminal(["lint", LINT_INPUT], 120, NO_COLOR="")  # empty: as if unset (no-color.org)
    assert "\x1b[31merror\x1b[0m" in empty
    _, never = on_a_terminal(["lint", LINT_INPUT, "--color", "never"], 120)
    assert "\x1b[" not in never


@pytest.mark.slow  # several runs of gpuguard in child processes
@pytest.mark.parametrize("face", [["lint", LINT_INPUT], ["audit", *AUDIT_INPUT]])
def test_force_color_and_color_always_colour_a_pipe(face: list[str]) -> None:
    _, plain, _ = through_a_pipe(face)
    assert "\x1b[" not in plain
    for args, env in ((face, {"FORCE_COLOR": "1"}), ([*face, "--color", "always"], {}),
                      ([*face, "--color", "always"], {"NO_COLOR": "1"})):
        _, coloured, _ = through_a_pipe(args, **env)
        assert "\x1b[1m" in coloured, (args, env)
        assert SGR.sub("", coloured) == plain  # colour only, the text unchanged
    _, both, _ = through_a_pipe(face, FORCE_COLOR="1", NO_COLOR="1")  # NO_COLOR wins, as in CPython
    assert both == plain
    _, forced_off, _ = through_a_pipe([*face, "--color", "never"], FORCE_COLOR="1")
    assert forced_off == plain


def test_color_rejects_other_values() -> None:
    code, _, err = through_a_pipe(["lint", LINT_INPUT, "--color", "sometimes"])
    assert code == 2 and "invalid choice: 'sometimes'" in err


def test_lint_quiet_prints_the_findings_only() -> None:
    code, full, _ = through_a_pipe(["lint", LINT_INPUT])
    quiet_code, quiet, _ = through_a_pipe(["lint", LINT_INPUT, "--quiet"])
    assert quiet_code == code == 1
    assert "note: no --cluster given: skipped" in full and "1 error, 0 warnings" in full
    assert "note:" not in quiet and "0 input errors" not in quiet
    assert [line for line in full.splitlines() if not line.startswith("note:")][:-1] == quiet.splitlines()
    good = str(FIXTURES / "lint" / "pod-good.yaml")
    code, clean, _ = through_a_pipe(["lint", good, "-q", "--disable", "gpu-memory-limit-missing"])
    assert (code, clean) == (0, "")  # a clean run prints nothing


def test_lint_quiet_keeps_input_errors_and_silences_stderr_notes(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Pod\nspec: [\n")
    code, out, _ = through_a_pipe(["lint", str(broken), "--quiet"])
    assert code == 2 and f"{broken}:" in out and "input error" in out
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    _, _, err = through_a_pipe(["lint", str(empty), "--format", "json"])
    assert "note: no Kubernetes objects found" in err
    _, _, err = through_a_pipe(["lint", str(empty), "--format", "json", "--quiet"])
    assert err == ""


@pytest.mark.slow  # several runs of gpuguard in child processes
def test_audit_quiet_prints_the_findings_only() -> None:
    code, full, _ = through_a_pipe(["audit", *AUDIT_INPUT])
    quiet_code, quiet, _ = through_a_pipe(["audit", *AUDIT_INPUT, "-q"])
    assert quiet_code == code
    assert "GPU pools:" in full and "GPU pools:" not in quiet
    assert "objects judged" in full and "objects judged" not in quiet
    assert quiet and full.startswith(quiet)
    _, no_cluster, _ = through_a_pipe(["audit", str(FIXTURES / "audit" / "workloads.yaml")])
    assert "note: no --cluster given" in no_cluster
    _, no_cluster_quiet, _ = through_a_pipe(["audit", str(FIXTURES / "audit" / "workloads.yaml"), "--quiet"])
    assert "note:" not in no_cluster_quiet


@pytest.mark.slow  # several runs of gpuguard in child processes
def test_why_pending_quiet_prints_the_pods_only(tmp_path: Path) -> None:
    dump = write_dump(objects(), tmp_path / "cluster.json", "json")
    code, full, _ = through_a_pipe(["why-pending", "--dump", str(dump), "-A"])
    quiet_code, quiet, _ = through_a_pipe(["why-pending", "--dump", str(dump), "-A", "--quiet"])
    assert quiet_code == code == 0
    assert full.startswith("gpuguard why-pending: ") and "GPU pools" in full
    assert not quiet.startswith("gpuguard why-pending: ") and "GPU pools" not in quiet and "notes:" not in quiet
    blocks = quiet.strip().split("\n\n")
    assert blocks and all(block in full for block in blocks)
    _, _, err = through_a_pipe(["why-pending", "--dump", str(dump), "-A", "--format", "json"])
    _, _, quiet_err = through_a_pipe(["why-pending", "--dump", str(dump), "-A", "--format", "json", "-q"])
    assert "note:" in err and quiet_err == ""

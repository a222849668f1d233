"""Run the ``gpuguard`` CLI in the test process: ``gpuguard.cli.main`` with its own stdin, stdout
and stderr (byte streams underneath, as a process has), ``NO_COLOR`` set as ``tests.support.proc``
sets it.  For tests of what a command prints and returns; what only a process shows (start-up,
memory and file limits, signals, a terminal) stays with ``tests.support.proc.gpuguard``."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from gpuguard.cli import main
from tests.support.proc import Run


@contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            del os.environ[name]
        else:
            os.environ[name] = old


def gpuguard_here(*argv: str, stdin: bytes = b"") -> Run:
    """The command's exit code and output; ``peak_rss`` is 0 (not measured in-process)."""
    streams = {name: io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace", newline="")
               for name in ("stdout", "stderr")}
    fake_in = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = fake_in, streams["stdout"], streams["stderr"]
    try:
        with _environ("NO_COLOR", "1"):
            try:
                code = main(list(argv))
            except SystemExit as stop:  # argparse's usage errors
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    out = {}
    for name, stream in streams.items():
        stream.flush()
        raw = stream.buffer
        assert isinstance(raw, io.BytesIO)
        out[name] = raw.getvalue().decode(errors="replace")
    return Run(code, out["stdout"], out["stderr"], 0)

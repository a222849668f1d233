"""Measurements in a fresh process each, for the benchmarks that time loading and judging whole
dumps: a run's peak RSS is then its own, not what an earlier run left behind."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any


def child(script: str, *args: str) -> dict[str, Any]:
    """Run ``script`` with ``args`` in a new interpreter; it prints its result as one JSON object."""
    done = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def line(label: str, res: dict[str, Any], width: int) -> str:
    """One result: wall and CPU seconds and the peak RSS, after ``label`` padded to ``width``."""
    return (f"{label:<{width}}{res['seconds']:7.2f} s wall {res['cpu_seconds']:7.2f} s CPU   "
            f"peak RSS {res['peak_rss_mib']:6.0f} MiB")


def add_child_modes(parser: argparse.ArgumentParser, measure: tuple[str, str], generate: tuple[str, ...]) -> None:
    """The hidden ``--measure KIND WHERE`` and ``--generate N… DIR`` a benchmark runs its children
    with (``child``)."""
    parser.add_argument("--measure", nargs=2, metavar=measure, help=argparse.SUPPRESS)
    parser.add_argument("--generate", nargs=len(generate), metavar=generate, help=argparse.SUPPRESS)


def run_child_mode(
    args: argparse.Namespace, measure: Callable[[str, str], Any], generate: Callable[..., Any]
) -> bool:
    """In a child: print what ``--measure`` or ``--generate`` (whole-number counts, then a directory)
    asks for as one JSON object, and say so; False in the parent."""
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return True
    if args.generate:
        *counts, directory = args.generate
        print(json.dumps(generate(*(int(c) for c in counts), directory)))
        return True
    return False

"""Lint time against the time to merely load the same files with ruamel.yaml round-trip.

    .venv/bin/python bench/lint_bench.py [--copies 10] [--corpus ../shared/corpus/real]

Copies the corpus ``--copies`` times into a temporary directory, then, in one process, times
``gpuguard lint --format json`` over it (reading, parsing, checking, positions, report) and a plain
``ruamel.yaml`` round-trip ``load_all`` of every file.  The goal is a ratio of at most 1.0.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from linter import cmd_lint  # noqa: E402


def _lint(directory: Path) -> tuple[float, int]:
    parser = argparse.ArgumentParser()
    cmd_lint.add_arguments(parser)
    args = parser.parse_args([str(directory), "--format", "json"])
    sink = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(sink):
        code = cmd_lint.run(args)
    return time.perf_counter() - start, code


def _ruamel_load(files: list[Path]) -> tuple[float, int]:
    from ruamel.yaml import YAML

    yaml = YAML()
    documents = 0
    start = time.perf_counter()
    for path in files:
        documents += sum(1 for _ in yaml.load_all(path.read_text(encoding="utf-8")))
    return time.perf_counter() - start, documents


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=10)
    parser.add_argument("--corpus", type=Path, default=ROOT / "tests" / "corpus" / "real")
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs of each measurement")
    args = parser.parse_args()
    sources = sorted(p for p in args.corpus.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    if not sources:
        sys.exit(f"no manifests in {args.corpus}")
    with tempfile.TemporaryDirectory(prefix="gpuguard-bench-") as tmp:
        root = Path(tmp)
        for i in range(args.copies):
            copy = root / f"copy{i:03d}"
            copy.mkdir()
            for src in sources:
                shutil.copyfile(src, copy / src.name)
        files = sorted(root.rglob("*.y*ml"))
        megabytes = sum(f.stat().st_size for f in files) / 1e6
        lint_times, load_times = [], []
        code, documents = 0, 0
        for _ in range(args.repeat):
            seconds, code = _lint(root)
            lint_times.append(seconds)
            seconds, documents = _ruamel_load(files)
            load_times.append(seconds)
    lint_s, load_s = min(lint_times), min(load_times)
    print(f"inputs:              {len(files)} files, {documents} documents, {megabytes:.1f} MB "
          f"({args.copies} copies of {args.corpus})")
    print(f"gpuguard lint:       {lint_s:.3f} s (exit code {code})")
    print(f"ruamel.yaml rt load: {load_s:.3f} s")
    print(f"ratio lint/load:     {lint_s / load_s:.2f}x (goal <= 1.0x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

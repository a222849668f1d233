"""Peak memory of ``gpuguard lint`` per MB of input, and how soon it reports an early error.

    .venv/bin/python bench/lint_memory_bench.py [--sizes 1 4 16 64] [--corpus ../shared/corpus/real]

Builds realistic multi-document files of each size from the public GPU manifest corpus (its
manifests concatenated as `---` documents, in order, repeated), then in child processes measures
the peak RSS (``getrusage(RUSAGE_CHILDREN).ru_maxrss`` of a wrapper around each run) and the time of

- ``gpuguard lint FILE --format json`` and
- the baseline, in the same run: PyYAML's C loader streaming the same bytes
  (``for _ in yaml.load_all(text, Loader=yaml.CSafeLoader): pass``, keeping nothing),

each minus the same interpreter doing nothing (``idle``: ``gpuguard lint`` of one small file, or
``import yaml``), divided by the input's size.  The early-error case is one 16 MB ``kind: List``
document with a duplicate key on line 2, and 16 MB of documents with a syntax error on line 2.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MB = 1_000_000

_WRAPPER = r"""
import resource, subprocess, sys
code = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL).returncode
with open(sys.argv[1], "w") as fh:
    fh.write(f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss} {code}")
"""
_SAFE_LOAD = (
    "import sys, yaml\n"
    "text = open(sys.argv[1], encoding='utf-8').read() if len(sys.argv) > 1 else ''\n"
    "try:\n"
    "    for _ in yaml.load_all(text, Loader=yaml.CSafeLoader): pass\n"
    "except yaml.YAMLError as exc: sys.exit(2)\n"
)
LINT = [sys.executable, "-m", "gpuguard.cli", "lint", "--format", "json"]
SAFE = [sys.executable, "-c", _SAFE_LOAD]


def measure(command: list[str]) -> tuple[float, float, int]:
    """(peak RSS in MiB, seconds, exit code) of ``command`` in a child process."""
    with tempfile.NamedTemporaryFile("r", prefix="gpuguard-bench-") as out:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", _WRAPPER, out.name, *command], cwd=ROOT, check=True,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30)))
        seconds = time.perf_counter() - start
        kib, code = Path(out.name).read_text().split()
    return int(kib) / 1024, seconds, int(code)


def corpus_texts(corpus: Path) -> list[str]:
    texts = []
    for path in sorted(corpus.iterdir()):
        if path.suffix in (".yaml", ".yml"):
            text = path.read_text(encoding="utf-8")
            texts.append(text if text.endswith("\n") else text + "\n")
    return texts


def multi_document(path: Path, texts: list[str], size: int) -> int:
    parts, total, i = [], 0, 0
    while True:
        chunk = "---\n" + texts[i % len(texts)]
        if total + len(chunk) > size:
            break
        parts.append(chunk)
        total += len(chunk)
        i += 1
    path.write_text("".join(parts), encoding="utf-8")
    return len(parts)


def duplicate_on_line_2(path: Path, size: int) -> None:
    item = (
        "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: p{i}\n  spec:\n    containers:\n"
        "    - name: main\n      image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04\n"
        "      resources:\n        requests:\n          nvidia.com/gpu: 1\n"
    )
    parts, total, i = ["apiVersion: v1\napiVersion: v1\nitems:\n"], 0, 0
    while total < size:
        parts.append(item.format(i=i))
        total += len(parts[-1])
        i += 1
    parts.append("kind: List\n")
    path.write_text("".join(parts), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64], help="MB (10^6 bytes)")
    parser.add_argument("--corpus", type=Path, default=ROOT / "tests" / "corpus" / "real")
    args = parser.parse_args()
    texts = corpus_texts(args.corpus)
    if not texts:
        sys.exit(f"no manifests in {args.corpus}")
    with tempfile.TemporaryDirectory(prefix="gpuguard-membench-") as tmp:
        root = Path(tmp)
        small = root / "small.yaml"
        small.write_text(texts[0], encoding="utf-8")
        idle_lint = measure([*LINT, str(small)])[0]
        idle_yaml = measure(SAFE)[0]
        print(f"idle: gpuguard lint of one small file {idle_lint:.0f} MiB; python + import yaml {idle_yaml:.0f} MiB")
        print()
        print("| input | documents | gpuguard lint: peak RSS, per MB, time | yaml.safe_load_all: peak RSS, per MB, "
              "time | memory ratio | time ratio |")
        print("|---|---|---|---|---|---|")
        for mb in args.sizes:
            path = root / f"fleet-{mb}mb.yaml"
            documents = multi_document(path, texts, mb * MB)
            size = path.stat().st_size / MB
            lint_rss, lint_s, code = measure([*LINT, str(path)])
            safe_rss, safe_s, _ = measure([*SAFE, str(path)])
            lint_per, safe_per = (lint_rss - idle_lint) / size, (safe_rss - idle_yaml) / size
            print(f"| {size:.1f} MB | {documents} | {lint_rss:.0f} MiB, {lint_per:.1f} MiB/MB, {lint_s:.2f} s "
                  f"(exit {code}) | {safe_rss:.0f} MiB, {safe_per:.1f} MiB/MB, {safe_s:.2f} s "
                  f"| {lint_per / safe_per:.2f}x | {lint_s / safe_s:.2f}x |")
        print()
        dup = root / "duplicate-16mb.yaml"
        duplicate_on_line_2(dup, 16 * MB)
        broken = root / "broken-16mb.yaml"
        multi_document(broken, texts, 16 * MB)
        lines = broken.read_text(encoding="utf-8").splitlines(keepends=True)
        lines[1] = "key: [unclosed\n"
        broken.write_text("".join(lines), encoding="utf-8")
        for label, path in (("duplicate key on line 2 of one 16 MB List", dup),
                            ("syntax error on line 2 of 16 MB of documents", broken)):
            lint_rss, lint_s, code = measure([*LINT, str(path)])
            safe_rss, safe_s, _ = measure([*SAFE, str(path)])
            print(f"{label}: gpuguard lint {lint_s:.2f} s, {lint_rss:.0f} MiB (exit {code}); "
                  f"yaml.safe_load_all {safe_s:.2f} s, {safe_rss:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

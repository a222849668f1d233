"""bench/memo_memory.py measures what it says: entries are counted, and their bytes are far below
the reviews they stand for (a memo that kept specs in its keys would not be)."""

from __future__ import annotations

import re

import pytest

from tests.support.bench_modules import bench_module


@pytest.mark.parametrize("replicas", [False, True])
def test_memo_memory_reports_bytes_per_entry_against_the_reviews(replicas: bool, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--reviews", "300", *(["--replicas"] if replicas else [])]
    assert bench_module("memo_memory").main(argv) == 0
    out = capsys.readouterr().out
    entries = int(re.search(r"memo: (\d+) entries", out).group(1))  # type: ignore[union-attr]
    ratio = float(re.search(r"/ object bytes per review = ([\d.]+)", out).group(1))  # type: ignore[union-attr]
    assert entries > 0 and 0 < ratio < 1, out

"""The 64 MiB input cap holds for every kind of file: it counts the bytes actually read, so pipes,
FIFOs, process substitution, /dev/stdin and character devices stop at the cap in bounded memory."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuguard.sources.yamlsafe import MAX_FILE_BYTES
from tests.support.paths import FIXTURES
from tests.support.proc import GPUGUARD, Run, gpuguard, run

pytestmark = pytest.mark.slow

POD = (FIXTURES / "lint" / "pod-limit-missing.yaml").read_bytes()
# Reading stops after the cap: what remains is the interpreter plus at most one capped buffer
# (and its decoded text); anything near the input's full size means the cap was bypassed.
BOUND = 2 * MAX_FILE_BYTES + 160 * 1024 * 1024


def _manifests(total: int) -> Iterator[bytes]:
    chunk = b"---\n" + POD
    block = chunk * (1024 * 1024 // len(chunk))
    for _ in range(total // len(block) + 1):
        yield block


def _only_error(result: Run) -> dict[str, object]:
    assert "Traceback" not in result.stderr, result.stderr
    report = json.loads(result.stdout)
    (error,) = report["errors"]
    assert isinstance(error, dict)
    return error


def test_process_substitution_over_the_cap_is_an_input_error_in_bounded_memory() -> None:
    script = 'exec "$@" lint --format json <(head -c 200M /dev/zero | tr "\\0" a)'
    result = run([script, "bash", *GPUGUARD], shell=True)
    error = _only_error(result)
    assert result.code == 2
    assert str(error["file"]).startswith("/dev/fd/")
    assert "gpuguard reads at most 64 MiB" in str(error["message"])
    assert result.peak_rss < BOUND, f"peak RSS {result.peak_rss >> 20} MiB"


def test_fifo_of_manifests_over_the_cap(tmp_path: Path) -> None:
    fifo = tmp_path / "manifests.yaml"
    os.mkfifo(fifo)
    written = 0

    def writer() -> None:
        nonlocal written
        try:
            with fifo.open("wb") as fh:
                for block in _manifests(96 * 1024 * 1024):
                    fh.write(block)
                    written += len(block)
        except BrokenPipeError:
            pass  # the reader stopped at the cap and closed its end

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        result = gpuguard("lint", str(fifo), "--format", "json")
    finally:
        thread.join(60)
    error = _only_error(result)
    assert result.code == 2 and error["file"] == str(fifo)
    assert "gpuguard reads at most 64 MiB" in str(error["message"])
    assert result.peak_rss < BOUND, f"peak RSS {result.peak_rss >> 20} MiB"
    assert written < 96 * 1024 * 1024, "the reader consumed the whole stream"


def test_dev_stdin_pipe_over_the_cap() -> None:
    data = b"".join(_manifests(70 * 1024 * 1024))
    result = gpuguard("lint", "/dev/stdin", "pod.yaml", "--format", "json", stdin=data)
    report = json.loads(result.stdout)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.code == 2
    assert sorted((e["file"], "gpuguard reads at most 64 MiB" in e["message"]) for e in report["errors"]) == [
        ("/dev/stdin", True), ("pod.yaml", False),
    ], "the run goes on after the oversized input"
    assert result.peak_rss < BOUND, f"peak RSS {result.peak_rss >> 20} MiB"


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_character_devices_end_quickly_with_an_input_error(device: str) -> None:
    result = gpuguard("lint", device, "--format", "json", address_space=1 << 30, timeout=60)
    error = _only_error(result)
    assert result.code == 2 and error["file"] == device
    assert error["message"] in ("binary file, not YAML",) or str(error["message"]).startswith("not UTF-8 text")
    assert result.peak_rss < BOUND


def test_regular_file_over_the_cap_is_not_read(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:
        fh.truncate(MAX_FILE_BYTES + 1)  # sparse: 64 MiB + 1 of zeros that cost no disk
    result = gpuguard("lint", str(big), "--format", "json")
    error = _only_error(result)
    assert result.code == 2 and error["file"] == str(big)
    assert error["message"] == "file is 64.0 MiB; gpuguard reads at most 64 MiB per input"
    assert result.peak_rss < 160 * 1024 * 1024, "a regular file over the cap is refused by its size, unread"

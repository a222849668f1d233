"""Run ``gpuguard`` (or any command) in a child process: peak memory, address-space and file-size
limits, and dropped root capabilities, so that tests can exercise real resource failures."""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tests.support.paths import ROOT

GPUGUARD = [sys.executable, "-m", "gpuguard.cli"]

# linux/capability.h and linux/prctl.h
CAP_DAC_OVERRIDE = 1
CAP_DAC_READ_SEARCH = 2
PR_CAPBSET_DROP = 24


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str
    peak_rss: int  # bytes, of the command and its descendants


def _limits(address_space: int | None, file_size: int | None, drop_dac: bool) -> Callable[[], None]:
    def apply() -> None:
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        if file_size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
        if drop_dac:
            # Root keeps uid 0 but loses the capabilities that bypass file permissions, like an
            # ordinary user: after exec its permitted set is the bounding set.
            libc = ctypes.CDLL(None, use_errno=True)
            for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
                if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                    raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    return apply


def run(
    argv: Sequence[str],
    *,
    stdin: bytes | None = None,
    address_space: int | None = 3 << 30,
    file_size: int | None = None,
    drop_dac: bool = False,
    cwd: Path = ROOT,
    timeout: float = 300,
    shell: bool = False,
) -> Run:
    """Run ``argv`` (a bash script when ``shell``) with the given limits; measure its peak RSS.

    The child is reaped with ``wait4``, whose resource usage is that child's and its own reaped
    descendants': the peak of exactly this command's tree, with no wrapper interpreter around it."""
    command = ["bash", "-c", argv[0], *argv[1:]] if shell else list(argv)
    proc = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        preexec_fn=_limits(address_space, file_size, drop_dac),
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out: list[bytes] = []
    err: list[bytes] = []
    pumps = [
        threading.Thread(target=_feed, args=(proc.stdin, stdin or b"")),
        threading.Thread(target=_drain, args=(proc.stdout, out)),
        threading.Thread(target=_drain, args=(proc.stderr, err)),
    ]
    for pump in pumps:
        pump.start()
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        proc.kill()

    killer = threading.Timer(timeout, expire)
    killer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        killer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    for pump in pumps:
        pump.join()
    if expired.is_set():
        raise subprocess.TimeoutExpired(command, timeout)
    return Run(proc.returncode, b"".join(out).decode(errors="replace"), b"".join(err).decode(errors="replace"),
               usage.ru_maxrss * 1024)


def _feed(pipe: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError):  # the command may exit without reading all of it
        try:
            pipe.write(data)
        finally:
            pipe.close()


def _drain(pipe: IO[bytes], into: list[bytes]) -> None:
    with pipe:
        into.extend(iter(lambda: pipe.read(65536), b""))


def gpuguard(*args: str, **kwargs: object) -> Run:
    return run([*GPUGUARD, *args], **kwargs)  # type: ignore[arg-type]

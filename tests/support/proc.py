"""Run ``gpuguard`` (or any command) in a child process: peak memory, address-space and file-size
limits, and dropped root capabilities, so that tests can exercise real resource failures."""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import ROOT

GPUGUARD = [sys.executable, "-m", "gpuguard.cli"]

# The wrapper runs the command as its own child, so RUSAGE_CHILDREN is exactly that command's tree.  A
# child forked straight from the test process would not do: its peak RSS counts the pages it shares
# with that process between fork and exec (the kernel keeps the high-water mark across execve).  The
# wrapper starts without site (-S): it needs only the standard library.
_WRAPPER = r"""
import resource, subprocess, sys
out, cmd = sys.argv[1], sys.argv[2:]
code = subprocess.run(cmd).returncode
with open(out, "w") as fh:
    fh.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code)
"""

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
    """Run ``argv`` (a bash script when ``shell``) with the given limits; measure its peak RSS."""
    command = ["bash", "-c", argv[0], *argv[1:]] if shell else list(argv)
    with tempfile.NamedTemporaryFile("r", prefix="gpuguard-rss-") as peak:
        proc = subprocess.run(
            [sys.executable, "-S", "-c", _WRAPPER, peak.name, *command],
            input=stdin,
            capture_output=True,
            cwd=cwd,
            timeout=timeout,
            preexec_fn=_limits(address_space, file_size, drop_dac),
            env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"},
        )
        text = Path(peak.name).read_text()
    return Run(proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"),
               int(text or 0) * 1024)


def gpuguard(*args: str, **kwargs: object) -> Run:
    return run([*GPUGUARD, *args], **kwargs)  # type: ignore[arg-type]

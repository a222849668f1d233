"""Write the report to a file atomically: a temporary file in the same directory, fsynced, then
renamed over the target (readers see the old file or the new one, never part of one).

A symbolic link is written through to its target; a new file gets the usual ``0666 & ~umask``
mode, an existing one keeps its mode.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


class OutputError(Exception):
    """The report could not be written; nothing was changed."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomically(name: str, text: str) -> None:
    target = Path(os.path.realpath(name))
    if target.is_dir():
        raise OutputError(f"{name}: is a directory")
    directory = target.parent
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    except OSError as exc:
        raise OutputError(f"{name}: {exc.strerror or exc}") from None
    data = text.encode("utf-8")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputError(f"{name}: cannot create a file in {directory}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise OutputError(f"{name}: cannot write: {exc.strerror or exc}") from None
    # the rename is durable once the directory entry is on disk
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

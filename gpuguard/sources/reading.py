"""Read an input whatever kind of file it is, stopping at the size cap on the bytes actually read.

A regular file over the cap is refused by its size, unread.  Pipes, FIFOs, process substitution
(``<(…)``), ``/dev/stdin`` and character devices have no size: they are read in chunks until the
end or one byte past the cap, and a binary stream (a NUL in its first 8 KiB) is refused after its
first chunk.  For ``--fix`` a stamp records what was read: device, inode, size, mtime and a SHA-256
of the bytes, so a later write can check that the file is still the one that was read.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from gpuguard.sources import yamlsafe
from gpuguard.sources.yamlsafe import InputError, cannot_read, decode, too_large

CHUNK = 1024 * 1024
SNIFF = 8192  # decode() looks for a NUL byte in this many leading bytes


@dataclass(frozen=True, slots=True)
class FileStamp:
    dev: int
    ino: int
    size: int
    mtime_ns: int
    sha256: bytes
    bom: bool  # the file began with a UTF-8 byte order mark (the text does not)

    def matches(self, st: os.stat_result) -> bool:
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (self.dev, self.ino, self.size, self.mtime_ns)


@dataclass(frozen=True, slots=True)
class Source:
    text: str
    stamp: FileStamp | None  # None for stdin and files that are not regular


def _over_cap(name: str, cap: int) -> InputError:
    message = f"input is over {cap / 1048576:.1f} MiB; gpuguard reads at most {cap // 1048576} MiB per input"
    return InputError(name, 0, message)


def read_stream(stream: BinaryIO, name: str) -> bytearray:
    """At most cap + 1 bytes of ``stream``; an InputError past the cap or for a binary stream."""
    cap = yamlsafe.MAX_FILE_BYTES
    buf = bytearray()
    sniffed = False
    while len(buf) <= cap:
        chunk = stream.read(min(CHUNK, cap + 1 - len(buf)))
        if not chunk:
            break
        buf += chunk
        if not sniffed and len(buf) >= SNIFF:
            sniffed = True
            if b"\x00" in buf[:SNIFF]:  # /dev/zero, /dev/urandom, a binary pipe: stop now
                raise InputError(name, 0, "binary file, not YAML")
    if len(buf) > cap:
        raise _over_cap(name, cap)
    return buf


def _read_regular(fh: io.FileIO, size: int) -> bytearray:
    """A regular file of ``size`` bytes, read into place (one more byte sees a file that grew)."""
    buf = bytearray(size + 1)
    view = memoryview(buf)
    filled = 0
    while filled < len(buf):
        n = fh.readinto(view[filled:])
        if not n:
            break
        filled += n
    view.release()
    del buf[filled:]
    return buf


def read_source(path: Path, name: str, stamped: bool = False) -> Source:
    """The text of ``path`` (any kind of file); ``stamped``: also what ``--fix`` needs to write it back."""
    try:
        with open(path, "rb", buffering=0) as fh:
            before = os.fstat(fh.fileno())
            if stat.S_ISDIR(before.st_mode):
                raise InputError(name, 0, "is a directory")
            regular = stat.S_ISREG(before.st_mode)
            if regular and before.st_size > yamlsafe.MAX_FILE_BYTES:
                raise too_large(name, before.st_size)
            if regular and before.st_size > 0:
                data = _read_regular(fh, before.st_size)
                if len(data) > yamlsafe.MAX_FILE_BYTES:
                    raise _over_cap(name, yamlsafe.MAX_FILE_BYTES)
            else:  # a pipe, a device, or a file whose size is not known in advance (/proc)
                data = read_stream(fh, name)
            after = os.fstat(fh.fileno()) if regular else before
    except OSError as exc:
        raise cannot_read(name, exc) from None
    if regular and (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise InputError(name, 0, "the file changed while it was being read")
    stamp = None
    if stamped and regular:
        stamp = FileStamp(
            before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns,
            hashlib.sha256(data).digest(), data.startswith(codecs.BOM_UTF8),
        )
    return Source(decode(data, name), stamp)


def read_text(path: Path, name: str | None = None) -> str:
    return read_source(path, name or str(path)).text

"""Write a fixed file back without ever losing data.

The new text goes to a temporary file in the same directory, which is fsynced and then renamed over
the original (a rename within a directory is atomic: readers see the old file or the new one, never
half of one), keeping the original's mode and, where permitted, its owner.  Just before, the
original is checked to be the very file that was read: same device and inode, size, mtime and
SHA-256 of its bytes; otherwise someone edited it meanwhile and nothing is written.

A symbolic link is written through only to a target inside the directory that was given (for a
file given by name, its own directory); a file with several hard links is not replaced, since a
rename would split them.  Every failure is an ``InputError`` naming the file; the original stays.

Between the last check and the rename there is a window of microseconds in which another writer
could still slip in: POSIX has no compare-and-rename.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import os
import secrets
import stat
from pathlib import Path

from gpuguard.sources.inputs import Input
from gpuguard.sources.reading import FileStamp
from gpuguard.sources.yamlsafe import MAX_FILE_BYTES, InputError

_CHANGED = "the file changed since it was read; not writing the fixes (run again)"


class _Refused(Exception):
    pass


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _target(item: Input) -> Path:
    """The real file to replace: ``item.path`` with every symbolic link resolved, if allowed."""
    assert item.path is not None
    real = Path(os.path.realpath(item.path))
    root = Path(os.path.realpath(item.root if item.root is not None else item.path.parent))
    if not _inside(real, root):
        given = item.root if item.root is not None else item.path.parent
        raise _Refused(f"it is a symbolic link to {real}, outside {given}; --fix does not write through it")
    return real


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _check_unchanged(fd: int, stamp: FileStamp) -> os.stat_result:
    st = os.fstat(fd)
    if not stamp.matches(st):
        raise _Refused(_CHANGED)
    digest = hashlib.sha256()
    remaining = MAX_FILE_BYTES + 1
    while remaining > 0:
        chunk = os.read(fd, min(1 << 20, remaining))
        if not chunk:
            break
        digest.update(chunk)
        remaining -= len(chunk)
    if digest.digest() != stamp.sha256:
        raise _Refused(_CHANGED)
    return st


def write_fixed(item: Input, stamp: FileStamp, text: str) -> None:
    """Replace ``item``'s file by ``text`` if it is still what was read; InputError otherwise."""
    try:
        _replace(item, stamp, text)
    except _Refused as exc:
        raise InputError(item.name, 0, f"cannot write the fixes: {exc}") from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise InputError(item.name, 0, f"cannot write the fixes: {reason}; the file is unchanged") from None


def _replace(item: Input, stamp: FileStamp, text: str) -> None:
    real = _target(item)
    data = (codecs.BOM_UTF8 if stamp.bom else b"") + text.encode("utf-8")
    dir_fd = os.open(real.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            fd = os.open(real.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP):
                raise _Refused(_CHANGED) from None  # removed, or replaced by a link, since it was read
            raise
        try:
            st = _check_unchanged(fd, stamp)
            if st.st_nlink > 1:
                raise _Refused(
                    f"the file has {st.st_nlink} hard links and replacing it would split them; it is unchanged"
                )
            if not os.access(real.name, os.W_OK, dir_fd=dir_fd, effective_ids=os.access in os.supports_effective_ids):
                raise _Refused("the file is read-only; it is unchanged")
            tmp = f".{real.name}.gpuguard-{secrets.token_hex(4)}.tmp"
            tmp_fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
            )
            try:
                try:
                    _write_all(tmp_fd, data)
                    os.fchmod(tmp_fd, stat.S_IMODE(st.st_mode))
                    with contextlib.suppress(PermissionError):
                        os.fchown(tmp_fd, st.st_uid, st.st_gid)
                    os.fsync(tmp_fd)
                finally:
                    os.close(tmp_fd)
                # The last look before the rename: still the same file, same bytes.
                os.lseek(fd, 0, os.SEEK_SET)
                _check_unchanged(fd, stamp)
                current = os.stat(real.name, dir_fd=dir_fd, follow_symlinks=False)
                if (current.st_dev, current.st_ino) != (st.st_dev, st.st_ino):
                    raise _Refused(_CHANGED)
                os.rename(tmp, real.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dir_fd)
                raise
        finally:
            os.close(fd)
        os.fsync(dir_fd)  # the rename itself survives a crash
    finally:
        os.close(dir_fd)

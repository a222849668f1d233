"""Find the manifests under a directory: every match is read or reported, none skipped silently.

Directories are read in name order; hidden ones (``.git``, ``.venv``) are skipped.  A symbolic link
to a directory is followed unless that directory was already walked (by device and inode), so a
link loop ends and a directory linked twice is read once.  A directory that cannot be read, a
broken link and a special file (FIFO, socket, device: reading it could block) are input errors.
With ``rendered``, a Helm chart or a kustomization (gpuguard.sources.render) is recorded there
instead of walked: its files are rendered by its tool, not read one by one.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpuguard.sources.render import Tool, rendered_by
from gpuguard.sources.yamlsafe import InputError, cannot_read

SUFFIXES = (".yaml", ".yml", ".json")

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device"}


def walk(
    root: Path, rendered: list[tuple[Path, Tool]] | None = None
) -> tuple[list[Path], list[InputError]]:
    """Files under ``root`` named ``*.yaml``, ``*.yml`` or ``*.json``, sorted; and the input errors.
    With ``rendered``, the charts and kustomizations met (``root`` included) are appended to it and
    not walked."""
    found: list[Path] = []
    errors: list[InputError] = []
    try:
        st = os.stat(root)
    except OSError as exc:
        return [], [cannot_read(str(root), exc)]
    visited = {(st.st_dev, st.st_ino)}
    pending = [root]
    while pending:
        directory = pending.pop()
        tool = rendered_by(directory) if rendered is not None else None
        if tool is not None and rendered is not None:
            rendered.append((directory, tool))
            continue
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            errors.append(cannot_read(str(directory), exc))
            continue
        subdirs: list[Path] = []
        for entry in entries:
            path = directory / entry.name
            try:
                is_dir = entry.is_dir()  # follows a symbolic link
            except OSError:
                is_dir = False
            if is_dir:
                if entry.name.startswith("."):
                    continue  # .git, .venv and other hidden directories
                try:
                    target = os.stat(path)
                except OSError as exc:
                    errors.append(cannot_read(str(path), exc))
                    continue
                if (target.st_dev, target.st_ino) not in visited:
                    visited.add((target.st_dev, target.st_ino))
                    subdirs.append(path)
                continue
            if not entry.name.lower().endswith(SUFFIXES):
                continue
            try:
                mode = os.stat(path).st_mode
            except OSError as exc:
                link = " (a broken symbolic link)" if entry.is_symlink() else ""
                errors.append(cannot_read(str(path), f"{exc.strerror or exc}{link}"))
                continue
            if stat.S_ISREG(mode):
                found.append(path)
            else:
                kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
                errors.append(InputError(
                    str(path), 0, f"not a regular file ({kind}); name it on the command line to read it"
                ))
        pending.extend(reversed(subdirs))
    return sorted(found), errors

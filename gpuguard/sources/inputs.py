"""The inputs of ``gpuguard lint``: files, directories searched recursively, or ``-`` for stdin."""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from gpuguard.sources.reading import Source, read_source, read_stream
from gpuguard.sources.walk import SUFFIXES, walk
from gpuguard.sources.yamlsafe import MAX_FILE_BYTES, InputError, decode

__all__ = ["MAX_FILE_BYTES", "STDIN", "STDIN_NAME", "SUFFIXES", "Input", "collect"]

STDIN = "-"
STDIN_NAME = "<stdin>"


@dataclass(frozen=True, slots=True)
class Input:
    name: str  # as shown in reports
    path: Path | None  # None for stdin
    # The directory given (for a file given by name, its directory): --fix writes nothing outside it.
    root: Path | None = None

    def read(self) -> str:
        return self.load().text

    def load(self, stamped: bool = False) -> Source:
        """The text; ``stamped``: with what ``--fix`` needs to check the file before writing it."""
        if self.path is not None:
            return read_source(self.path, self.name, stamped)
        return Source(decode(read_stream(sys.stdin.buffer, self.name), self.name), None)


def collect(args: list[str]) -> tuple[list[Input], list[InputError]]:
    inputs: list[Input] = []
    errors: list[InputError] = []
    seen: set[str] = set()

    def add(item: Input) -> None:
        key = str(item.path.resolve()) if item.path is not None else STDIN
        if key not in seen:
            seen.add(key)
            inputs.append(item)

    for arg in args:
        if arg == STDIN:
            add(Input(STDIN_NAME, None))
            continue
        path = Path(arg)
        try:
            mode = os.stat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            errors.append(InputError(arg, 0, "no such file or directory"))
            continue
        except OSError as exc:
            errors.append(InputError(arg, 0, f"cannot read: {exc.strerror or exc}"))
            continue
        if stat.S_ISDIR(mode):
            found, problems = walk(path)
            errors.extend(problems)
            for file in found:
                add(Input(str(file), file, path))
        else:
            add(Input(arg, path, path.parent))
    return inputs, errors

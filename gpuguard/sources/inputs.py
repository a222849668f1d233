"""The inputs of ``gpuguard lint``: files, directories searched recursively, or ``-`` for stdin."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from gpuguard.sources.yamlsafe import MAX_FILE_BYTES, InputError, decode, read_text, too_large

SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"
STDIN_NAME = "<stdin>"


@dataclass(frozen=True, slots=True)
class Input:
    name: str  # as shown in reports
    path: Path | None  # None for stdin

    def read(self) -> str:
        if self.path is not None:
            return read_text(self.path, self.name)
        data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise too_large(self.name, len(data))
        return decode(data, self.name)


def _walk(root: Path) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        rel = path.relative_to(root).parts
        if any(part.startswith(".") for part in rel[:-1]):
            continue  # .git, .venv and other hidden directories
        if path.suffix.lower() in SUFFIXES and path.is_file():
            found.append(path)
    return sorted(found)


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
        if path.is_dir():
            for found in _walk(path):
                add(Input(str(found), found))
        elif path.exists():
            add(Input(arg, path))
        else:
            errors.append(InputError(arg, 0, "no such file or directory"))
    return inputs, errors

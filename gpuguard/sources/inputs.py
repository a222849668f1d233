"""The inputs of ``gpuguard lint``: files, directories searched recursively, or ``-`` for stdin;
with render options, Helm charts and kustomizations too, rendered by their tools
(gpuguard.sources.render), their own files read through them only."""

from __future__ import annotations

import errno
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from gpuguard.sources.reading import Source, read_source, read_stream
from gpuguard.sources.render import RenderOptions, Tool, enclosing, render
from gpuguard.sources.walk import SUFFIXES, walk
from gpuguard.sources.yamlsafe import MAX_FILE_BYTES, InputError, cannot_read, decode

__all__ = ["MAX_FILE_BYTES", "STDIN", "STDIN_NAME", "SUFFIXES", "Input", "collect"]

STDIN = "-"
STDIN_NAME = "<stdin>"


@dataclass(frozen=True, slots=True)
class Input:
    name: str  # as shown in reports
    path: Path | None  # None for stdin
    # The directory given (for a file given by name, its directory): --fix writes nothing outside it.
    root: Path | None = None
    # A chart or kustomization directory, rendered by this tool (``path`` is the directory).
    tool: Tool | None = None
    options: RenderOptions | None = None

    def read(self) -> str:
        return self.load().text

    def load(self, stamped: bool = False) -> Source:
        """The text; ``stamped``: with what ``--fix`` needs to check the file before writing it.
        A rendered input is the tool's output, which has no file to write back to."""
        if self.tool is not None:
            return Source(render(self.tool, self.name, self.options or RenderOptions()), None)
        if self.path is not None:
            return read_source(self.path, self.name, stamped)
        return Source(decode(read_stream(sys.stdin.buffer, self.name), self.name), None)


def collect(args: list[str], options: RenderOptions | None = None) -> tuple[list[Input], list[InputError]]:
    """The inputs ``args`` name.  With ``options``, a chart or kustomization (given, met while
    walking, or holding a file given by name) is one rendered input, its files never read raw."""
    inputs: list[Input] = []
    errors: list[InputError] = []
    seen: set[str] = set()

    def add(item: Input) -> None:
        key = str(item.path.resolve()) if item.path is not None else STDIN
        if key not in seen:
            seen.add(key)
            inputs.append(item)

    def add_rendered(directory: Path, tool: Tool, root: Path) -> None:
        add(Input(_shown(directory), directory, root, tool, options))

    for arg in args:
        if arg == STDIN:
            add(Input(STDIN_NAME, None))
            continue
        path = Path(arg)
        try:
            mode = os.stat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            errors.append(cannot_read(arg, os.strerror(errno.ENOENT)))
            continue
        except OSError as exc:
            errors.append(cannot_read(arg, exc))
            continue
        if stat.S_ISDIR(mode):
            rendered: list[tuple[Path, Tool]] | None = [] if options is not None else None
            found, problems = walk(path, rendered)
            errors.extend(problems)
            for directory, tool in rendered or ():
                add_rendered(directory, tool, path)
            for file in found:
                add(Input(str(file), file, path))
            continue
        owner = enclosing(path) if options is not None else None
        if owner is not None:
            add_rendered(owner[0], owner[1], owner[0])
        else:
            add(Input(arg, path, path.parent))
    return inputs, errors


def _shown(directory: Path) -> str:
    """A rendered directory as reports name it: relative to the working directory when inside it."""
    try:
        return str(directory.resolve().relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(directory)

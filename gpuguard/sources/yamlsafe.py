"""Safe YAML loading for config and cluster snapshot files (manifests go through ``loader``).

ruamel.yaml's safe loader builds plain Python objects and no arbitrary types; an alias becomes a
shared reference to the anchored object, so a "billion laughs" file costs memory linear in its
size.  These files are the operator's own (a config, a ``kubectl get`` dump), not untrusted input.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError


class InputError(Exception):
    """An input that could not be read or parsed; carries file and line for the report.

    ``line`` 0 means the error has no line (a file that cannot be read, a chart that fails to
    render): reports then name the file alone (JSON ``"line": null``, SARIF and GitHub annotations
    without a line), or nothing but the message when the message names the file itself
    ("cannot read FILE: No such file or directory").
    """

    def __init__(self, file: str, line: int, message: str) -> None:
        self.file = file
        self.line = line
        self.message = message
        super().__init__(self.text())

    @property
    def has_line(self) -> bool:
        return self.line > 0

    def json_line(self) -> int | None:
        """The line for JSON reports: None when there is none."""
        return self.line if self.line > 0 else None

    def location(self) -> str | None:
        """``FILE:LINE``, ``FILE`` (no line), or None when there is no line and the message names the file."""
        if self.line > 0:
            return f"{self.file}:{self.line}"
        if self.file and self.file in self.message:
            return None
        return self.file

    def text(self) -> str:
        """The error on one line: ``FILE:LINE: MESSAGE``, ``FILE: MESSAGE``, or the message alone."""
        where = self.location()
        return f"{where}: {self.message}" if where else self.message


def cannot_read(name: str, exc: OSError | str) -> InputError:
    """``cannot read NAME: No such file or directory`` (the system's words), with no line."""
    reason = exc if isinstance(exc, str) else (exc.strerror or str(exc))
    return InputError(name, 0, f"cannot read {name}: {reason}")


def load_all_plain(text: str, file: str) -> Iterator[Any]:
    """Yield plain Python objects for each YAML document, raising InputError with a line."""
    yaml = YAML(typ="safe", pure=False)
    try:
        yield from yaml.load_all(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        raise InputError(file, line, f"invalid YAML: {exc.problem or exc.context}") from None
    except YAMLError as exc:
        raise InputError(file, 1, f"invalid YAML: {exc}") from None
    except RecursionError:
        raise InputError(file, 1, "YAML nesting too deep") from None


MAX_FILE_BYTES = 64 * 1024 * 1024


def too_large(file: str, size: int) -> InputError:
    return InputError(
        file, 0, f"file is {size / 1048576:.1f} MiB; gpuguard reads at most {MAX_FILE_BYTES // 1048576} MiB per input"
    )


def decode(data: bytes | bytearray, file: str) -> str:
    """Text of a manifest's bytes; binary or non-UTF-8 input is an InputError."""
    if b"\x00" in data[:8192]:
        raise InputError(file, 0, "binary file, not YAML")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(file, line, f"not UTF-8 text (byte {exc.start})") from None


def read_text(path: Path, name: str | None = None) -> str:
    """The text of any kind of file, at most ``MAX_FILE_BYTES`` of it (counted as read)."""
    from gpuguard.sources.reading import read_source

    return read_source(path, name or str(path)).text

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
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from gpuguard.sources.yamlpos import MapPos, Positions, SeqPos, pack


class InputError(Exception):
    """An input that could not be read or parsed; carries file, line (and column, when known).

    ``line`` 0 means the error has no line (a file that cannot be read, a chart that fails to
    render): reports then name the file alone (JSON ``"line": null``, SARIF and GitHub annotations
    without a line), or nothing but the message when the message names the file itself
    ("cannot read FILE: No such file or directory").
    """

    def __init__(self, file: str, line: int, message: str, column: int | None = None) -> None:
        self.file = file
        self.line = line
        self.column = column
        self.message = message
        super().__init__(self.text())

    @property
    def where(self) -> str:
        """``file:line``, ``file:line:column``, or ``file`` when there is no line."""
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}" if self.column is None else f"{self.file}:{self.line}:{self.column}"

    @property
    def has_line(self) -> bool:
        return self.line > 0

    def json_line(self) -> int | None:
        """The line for JSON reports: None when there is none."""
        return self.line if self.line > 0 else None

    def location(self) -> str | None:
        """``FILE:LINE[:COLUMN]``, ``FILE`` (no line), or None when there is no line and the message
        names the file."""
        if self.line > 0:
            return self.where
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


_MERGE = "tag:yaml.org,2002:merge"


def _positions(node: Node, seen: dict[int, Positions]) -> Positions:
    """The position tree (``yamlpos``) of a composed node; an alias shares its anchor's."""
    known = seen.get(id(node))
    if known is not None:
        return known
    at = pack(node.start_mark.line, node.start_mark.column)
    if isinstance(node, MappingNode):
        mapping = seen[id(node)] = MapPos(at)
        own: dict[str, int | tuple[int, MapPos | SeqPos]] = {}
        for key, value in node.value:
            sub = _positions(value, seen)
            if key.tag == _MERGE:  # `<<: *base`: the merged keys first, the mapping's own over them
                for merged in sub.items if isinstance(sub, SeqPos) else [sub]:
                    if isinstance(merged, MapPos):
                        mapping.keys.update(merged.keys)
            elif isinstance(key, ScalarNode):
                key_at = pack(key.start_mark.line, key.start_mark.column)
                own[key.value] = key_at if isinstance(sub, int) else (key_at, sub)
        mapping.keys.update(own)
        return mapping
    if isinstance(node, SequenceNode):
        sequence = seen[id(node)] = SeqPos(at)
        sequence.items = [_positions(item, seen) for item in node.value]
        return sequence
    return at


def load_all_positioned(text: str, file: str) -> list[tuple[Any, Positions]]:
    """Each YAML document as ``load_all_plain`` reads it, with the position tree of what it holds
    (``yamlpos``: the line and column of every key and item), for errors at the offending key."""
    docs = list(load_all_plain(text, file))
    try:
        nodes = list(YAML(typ="safe", pure=False).compose_all(text))
        trees = [_positions(node, {}) for node in nodes]
    except RecursionError:
        raise InputError(file, 1, "YAML nesting too deep") from None
    if len(trees) != len(docs):  # pragma: no cover - both read the same text with the same parser
        raise InputError(file, 1, "invalid YAML: documents could not be matched to their positions")
    return list(zip(docs, trees, strict=True))


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

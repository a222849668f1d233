"""Where each part of a parsed YAML document was written: a compact tree beside the plain data.

A position is one int, the 0-based line shifted left by 27 bits or-ed with the 0-based column
(inputs are at most 64 MiB, so a column fits).  A mapping keeps, per key as written, the key's
position and, for a mapping or sequence value, that value's own positions; a sequence keeps each
item's.  Scalars need no more than their position, so the tree costs about one int per node.
"""

from __future__ import annotations

from collections.abc import Iterable

from policies import pointer
from policies.shapes import index_of

SHIFT = 27
_COLUMN = (1 << SHIFT) - 1


def pack(line0: int, column0: int) -> int:
    return (line0 << SHIFT) | column0


def line_of(packed: int) -> int:
    """1-based line."""
    return (packed >> SHIFT) + 1


def position(packed: int) -> tuple[int, int]:
    """1-based (line, column)."""
    return (packed >> SHIFT) + 1, (packed & _COLUMN) + 1


class MapPos:
    """Positions in a mapping: its own, and per key (as written) the key's, or for a mapping or
    sequence value ``(key position, value positions)``."""

    __slots__ = ("at", "keys")

    def __init__(self, at: int) -> None:
        self.at = at
        self.keys: dict[str, int | tuple[int, MapPos | SeqPos]] = {}


class SeqPos:
    """Positions in a sequence: its own, and per item its start (or its own positions)."""

    __slots__ = ("at", "items")

    def __init__(self, at: int) -> None:
        self.at = at
        self.items: list[int | MapPos | SeqPos] = []


Container = MapPos | SeqPos
Positions = int | MapPos | SeqPos


def start_of(node: Positions) -> int:
    return node if isinstance(node, int) else node.at


def locate_tokens(root: Positions, tokens: Iterable[str]) -> tuple[int, int]:
    """1-based (line, column) of the key of the field the tokens address (of the item, for list
    elements); when the field does not exist, that of its nearest existing ancestor."""
    node: Positions | None = root
    where = start_of(root)
    for token in tokens:
        if isinstance(node, MapPos):
            entry = node.keys.get(token)
            if entry is None:
                break
            if isinstance(entry, int):
                where, node = entry, None
            else:
                where, node = entry
        elif isinstance(node, SeqPos):
            index = index_of(token, len(node.items))
            if index is None:
                break
            node = node.items[index]
            where = start_of(node)
        else:
            break
    return position(where)


def locate(root: Positions, path: str) -> tuple[int, int]:
    """``locate_tokens`` for an RFC 6901 pointer."""
    return locate_tokens(root, pointer.split(path))

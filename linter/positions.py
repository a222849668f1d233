"""Map an RFC 6901 pointer to a 1-based (line, column) in a document's position tree.

The position is that of the key of the addressed field (of the item, for list elements); when the
field does not exist, that of its nearest existing ancestor.  Positions are absolute in the file.
"""

from __future__ import annotations

from gpuguard.sources.yamlpos import MapPos, Positions, SeqPos, position
from policies import pointer
from policies.shapes import index_of


def _at(node: Positions) -> int:
    return node if isinstance(node, int) else node.at


def locate(root: Positions, path: str) -> tuple[int, int]:
    node: Positions | None = root
    where = _at(root)
    for token in pointer.split(path):
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
            where = _at(node)
        else:
            break
    return position(where)

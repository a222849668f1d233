"""Map an RFC 6901 pointer to a 1-based (line, column) in a composed YAML node tree.

The position is that of the key of the addressed field (of the item, for list elements); when the
field does not exist, that of its nearest existing ancestor.  Marks are absolute in the file.
"""

from __future__ import annotations

from gpuguard.sources.loader import Node
from policies import pointer


def _mapping_key(node: Node, token: str) -> tuple[Node, Node] | None:
    found = None
    for key, value in node.value:
        if isinstance(key.value, str) and key.value == token:
            found = (key, value)  # the last one wins, as in the constructed mapping
    return found


def _is_mapping(node: Node) -> bool:
    return type(node).__name__ == "MappingNode"


def _is_sequence(node: Node) -> bool:
    return type(node).__name__ == "SequenceNode"


def _at(node: Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def locate(root: Node, path: str) -> tuple[int, int]:
    node = root
    where = _at(root)
    for token in pointer.split(path):
        if _is_mapping(node):
            pair = _mapping_key(node, token)
            if pair is None:
                return where
            where, node = _at(pair[0]), pair[1]
        elif _is_sequence(node):
            if not token.isdigit() or int(token) >= len(node.value):
                return where
            node = node.value[int(token)]
            where = _at(node)
        else:
            return where
    return where

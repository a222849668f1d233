"""Map an RFC 6901 pointer to a 1-based (line, column) in a document's position tree.

The position is that of the key of the addressed field (of the item, for list elements); when the
field does not exist, that of its nearest existing ancestor.  Positions are absolute in the file.
The walk lives in ``gpuguard.sources.yamlpos``, which config errors use too.
"""

from __future__ import annotations

from gpuguard.sources.yamlpos import locate

__all__ = ["locate"]

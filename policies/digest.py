"""Bounded digests of user data, for memo keys, and the nesting limit the engine accepts.

Memo keys hold a 16-byte BLAKE2b digest of what the memoised function reads, never the data
itself: an object with 192 KB of annotations costs 16 bytes of memo, not 192 KB.  The data is
serialised by orjson, in C and without Python recursion; its own nesting limit (254 levels) is
gpuguard's: no Kubernetes pod spec comes near it, and a deeper one is refused as input rather
than walked (Python's recursive ``repr``/``==``/``deepcopy`` fail at about 1,000 levels).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

MAX_DEPTH = 254  # orjson.dumps' recursion limit

# Dataclass field metadata key: the field is computed from other fields of what holds it, so a key
# derived from the whole (policies.template_inputs.inputs_key) does not digest it again.
DERIVED = "derived"


class TooDeep(ValueError):
    """The data nests deeper than MAX_DEPTH."""


def digest(*values: Any) -> bytes | None:
    """A 16-byte digest of ``values``; None when one is not JSON data (bytes, a >64-bit integer).

    Raises TooDeep when one nests deeper than MAX_DEPTH.
    """
    try:
        data = orjson.dumps(values)
    except orjson.JSONEncodeError as exc:
        if "Recursion limit" in str(exc):
            raise TooDeep(f"nested deeper than {MAX_DEPTH} levels") from None
        return None
    return hashlib.blake2b(data, digest_size=16).digest()


def within_depth(value: Any) -> bool:
    try:
        digest(value)
    except TooDeep:
        return False
    return True

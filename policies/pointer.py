"""RFC 6901 JSON pointers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from policies.shapes import index_of
from policies.types import Segment


def escape(segment: Segment) -> str:
    return str(segment).replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def join(base: str, segments: Iterable[Segment]) -> str:
    out = base
    for seg in segments:
        out += "/" + escape(seg)
    return out


def split(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise ValueError(f"JSON pointer must start with '/': {pointer!r}")
    return [unescape(t) for t in pointer[1:].split("/")]


def resolve(doc: Any, pointer: str) -> Any:
    """Return the value at ``pointer``; raise KeyError when it does not exist."""
    cur = doc
    for token in split(pointer):
        if isinstance(cur, dict):
            if token not in cur:
                raise KeyError(pointer)
            cur = cur[token]
        elif isinstance(cur, list):
            index = index_of(token, len(cur))
            if index is None:
                raise KeyError(pointer)
            cur = cur[index]
        else:
            raise KeyError(pointer)
    return cur


def to_dotted(pointer: str) -> str:
    """Render a pointer for people.

    ``/spec/containers/0/resources/limits/nvidia.com~1gpu`` → ``spec.containers[0].resources.limits[nvidia.com/gpu]``
    """
    out = ""
    for token in split(pointer):
        if token.isdigit() or "." in token or "/" in token:
            out += f"[{token}]"
        else:
            out += ("." if out else "") + token
    return out

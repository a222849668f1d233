"""A fast path for cluster snapshots written as JSON (``kubectl get nodes,runtimeclasses -o json``).

The YAML loader builds a 5,000-node snapshot in minutes; JSON is decoded with msgspec instead,
each Node pruned to the fields the facts read (``gpuguard.kube.prune``: labels, taints,
allocatable, capacity, unschedulable) while RuntimeClasses and NodePools are kept whole, so a large
fleet loads in about a second and its images lists and conditions never become Python objects.
JSON snapshots are read up to 2 GiB (YAML ones to the 64 MiB of every other input).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from gpuguard.kube.prune import decode_item
from gpuguard.sources.yamlsafe import InputError

MAX_JSON_BYTES = 2 * 1024 * 1024 * 1024
SNIFF_BYTES = 4096
_BYTE = re.compile(r"\bbyte (\d+)")


class _Page(msgspec.Struct):
    apiVersion: Any = None
    kind: Any = None
    items: list[msgspec.Raw] | None = None


_PAGE = msgspec.json.Decoder(_Page)
_WHOLE = msgspec.json.Decoder()


def is_json(path: Path) -> bool:
    """Whether the file starts (after white space) like JSON; False when it cannot be read (the
    YAML path then reports why)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return False
    return head.lstrip()[:1] in (b"{", b"[")


def _line(data: bytes, exc: Exception) -> int:
    m = _BYTE.search(str(exc))
    return data[: int(m.group(1))].count(b"\n") + 1 if m else 1


def _item(raw: msgspec.Raw, kind: str | None, api_version: str | None) -> Any:
    pruned = decode_item(raw, kind)
    if isinstance(pruned, dict) and pruned.get("kind") == "Node":
        return pruned
    whole = _WHOLE.decode(raw)
    if isinstance(whole, dict) and kind and not whole.get("kind"):
        whole["kind"] = kind
        whole.setdefault("apiVersion", api_version)
    return whole


def load_json_objects(path: Path, name: str) -> list[Any]:
    """The objects of a JSON snapshot (a List, an API list such as NodeList, one object, or an array)."""
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise InputError(name, 0, f"snapshot is {size / 1048576:.0f} MiB; JSON snapshots are read up to "
                             f"{MAX_JSON_BYTES // 1048576} MiB")
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(name, 0, f"cannot read: {exc.strerror or exc}") from None
    try:
        try:
            page = _PAGE.decode(data)
        except msgspec.ValidationError:
            page = None
        if page is not None and page.items is not None and str(page.kind).endswith("List"):
            kind = str(page.kind)[: -len("List")] or None
            version = page.apiVersion if isinstance(page.apiVersion, str) else None
            return [_item(raw, kind, version) for raw in page.items]
        whole = _WHOLE.decode(data)
    except msgspec.DecodeError as exc:
        raise InputError(name, _line(data, exc), f"invalid JSON: {exc}") from None
    return whole if isinstance(whole, list) else [whole]

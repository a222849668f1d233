"""Cluster objects from dump files: ``kubectl get nodes,pods,events,priorityclasses -A -o yaml``
(or ``-o json``), as ``List`` documents or multi-document YAML.

JSON dumps take a fast path (msgspec, pruned to the fields the analysis reads; see prune.py): a
5,000-node, 50,000-pod cluster loads in seconds.  YAML is parsed with the libyaml-backed safe
loader of :mod:`gpuguard.sources.loader` (alias bombs, duplicate keys and over-deep nesting are input
errors with a line), which is an order of magnitude slower; use ``-o json`` for large clusters.

Bad input gives :class:`~gpuguard.sources.yamlsafe.InputError` (file, line, message) per file; other
files are still read.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from gpuguard.kube.prune import ARRAY, PAGE, decode_item
from gpuguard.sources.loader import parse_text
from gpuguard.sources.yamlsafe import MAX_FILE_BYTES, InputError, cannot_read, decode
from policies.pending.state import ClusterObjects
from policies.podspec import misshapen_message, misshapen_templates

# Dumps are far larger than manifests (a 50,000-pod JSON dump is about 500 MB with kubectl's
# indentation); the caps bound memory.  JSON decodes pruned, at about twice the file size; parsed
# YAML (node tree and data) takes about 40 times its size, so YAML keeps the manifest limit.
MAX_DUMP_BYTES = 2 * 1024 * 1024 * 1024
MAX_YAML_BYTES = MAX_FILE_BYTES
STDIN = "-"
KINDS = ("Node", "Pod", "Event", "PriorityClass", "RuntimeClass", "NodePool", "DeviceClass", "ResourceSlice",
         "ResourceClaim", "ResourceClaimTemplate", "ResourceQuota", "Workload", "LocalQueue", "ClusterQueue",
         "ResourceFlavor", "Cohort", "Job", "ReplicaSet", "ReplicationController")


@dataclass(slots=True)
class DumpLoad:
    objects: ClusterObjects = field(default_factory=ClusterObjects)
    errors: list[InputError] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def read_dump(name: str, path: Path | None, limit: int) -> bytes:
    """The bytes of the dump at ``path`` (None: stdin), refusing one over ``limit`` bytes."""
    if path is None:
        data = sys.stdin.buffer.read(limit + 1)
    else:
        try:
            size = path.stat().st_size
            if size > limit:
                raise InputError(name, 0, f"dump is {size / 1048576:.0f} MiB; the limit is {limit // 1048576} MiB")
            data = path.read_bytes()
        except OSError as exc:
            raise cannot_read(name, exc) from None
    if len(data) > limit:
        raise InputError(name, 0, f"dump is larger than the {limit // 1048576} MiB limit")
    return data


_BYTE = re.compile(r"\bbyte (\d+)")


# msgspec raises RecursionError for JSON nested deeper than it decodes (a hostile dump).
JSON_ERRORS = (msgspec.DecodeError, RecursionError)


def invalid_json(name: str, data: bytes, exc: Exception) -> InputError:
    """The input error for a JSON dump msgspec cannot decode, at the line of the byte it names."""
    if isinstance(exc, RecursionError):
        return InputError(name, 1, "invalid JSON: nested too deeply")
    # msgspec names the offset: "JSON is malformed: trailing comma in object (byte 53)"
    m = _BYTE.search(str(exc))
    line = data[: int(m.group(1))].count(b"\n") + 1 if m else 1
    return InputError(name, line, f"invalid JSON: {exc}")


@dataclass(frozen=True, slots=True)
class ListDump:
    items: list[msgspec.Raw]
    item_kind: str | None  # "PodList" and friends (a single-kind API list) carry items without kind
    api_version: Any


def list_dump(data: bytes, name: str) -> ListDump | None:
    """A JSON dump that is a List (``kubectl get … -o json``, an API list); None for JSON of another
    shape (one object, an array).  Malformed JSON is an input error at its line."""
    try:
        page = PAGE.decode(data)
    except msgspec.ValidationError:  # valid JSON of another shape (a subclass of DecodeError)
        return None
    except JSON_ERRORS as exc:
        raise invalid_json(name, data, exc) from None
    if page.items is None or not isinstance(page.kind, str) or not page.kind.endswith("List"):
        return None
    return ListDump(page.items, page.kind[: -len("List")] if page.kind != "List" else None, page.apiVersion)


def _load_json(data: bytes, name: str, out: ClusterObjects) -> list[InputError]:
    """Add the dump's objects to ``out``; an item that is no object is an input error (as in audit)."""
    errors: list[InputError] = []

    def add_items(items: list[msgspec.Raw], kind: str | None) -> None:
        for i, raw in enumerate(items):
            obj = decode_item(raw, kind)
            if isinstance(obj, dict):
                errors.extend(InputError(name, 0, f"items[{i}]: {why}") for why in _add(obj, out))
            else:
                errors.append(InputError(name, 0, f"items[{i}] is not a Kubernetes object"))

    listed = list_dump(data, name)
    try:
        if listed is not None:
            add_items(listed.items, listed.item_kind if listed.item_kind in KINDS else None)
        elif data.lstrip()[:1] == b"[":
            add_items(ARRAY.decode(data), None)
        else:
            errors.extend(InputError(name, 0, why) for why in _add(decode_item(data), out))
    except JSON_ERRORS as exc:
        raise invalid_json(name, data, exc) from None
    return errors


def _add(obj: Any, out: ClusterObjects) -> list[str]:
    """Sort ``obj`` (Lists flattened) into ``out``; a Pod whose spec, containers or resources have
    the wrong type (the API server never writes one) is left out: why, one line a place."""
    refused: list[str] = []
    if isinstance(obj, list):
        for item in obj:
            refused += _add(item, out)
    elif isinstance(obj, dict):
        if isinstance(obj.get("items"), list) and str(obj.get("kind", "")).endswith("List"):
            for item in obj["items"]:
                refused += _add(item, out)
        elif obj.get("kind") == "Pod" and (problems := misshapen_templates(obj)):
            meta = obj.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
            refused += [f"Pod {meta.get('namespace') or ''}/{meta.get('name') or ''}: "
                        + misshapen_message("Pod", place) for place in problems]
        else:
            out.add(obj)
    return refused


def _load_yaml(data: bytes, name: str, out: ClusterObjects) -> list[InputError]:
    parsed = parse_text(decode(data, name), name)
    for doc in parsed.documents:
        obj = doc.data
        if obj is None:
            continue
        if not isinstance(obj, dict):
            parsed.errors.append(InputError(name, doc.line,
                                            "expected Kubernetes objects (a List or Node/Pod/Event/PriorityClass)"))
            continue
        parsed.errors.extend(InputError(name, doc.line, why) for why in _add(obj, out))
    return parsed.errors


NO_OBJECTS = ("no Node, Pod, Event or PriorityClass objects found "
              "(expected `kubectl get nodes,pods,events,priorityclasses -A -o yaml`)")


def load_dumps(names: Sequence[str], *, max_bytes: int = MAX_DUMP_BYTES,
               max_yaml_bytes: int = MAX_YAML_BYTES, optional: Collection[str] = ()) -> DumpLoad:
    """Read every file; errors are collected per file, never raised.  A file in ``optional`` (met
    in a directory) may hold none of the objects read: it is passed over, unless no file holds any."""
    result = DumpLoad()
    for name in names:
        shown = "<stdin>" if name == STDIN else name
        before = _count(result.objects)
        try:
            data = read_dump(shown, None if name == STDIN else Path(name), max_bytes)
            if data.lstrip()[:1] in (b"{", b"["):
                result.errors.extend(_load_json(data, shown, result.objects))
            elif len(data) > max_yaml_bytes:
                raise InputError(shown, 0, f"YAML dump is {len(data) / 1048576:.0f} MiB; YAML is read up to "
                                 f"{max_yaml_bytes // 1048576} MiB (about 10,000 pods): write large dumps "
                                 "with `kubectl get … -o json`, which is read up to "
                                 f"{max_bytes // 1048576} MiB and much faster")
            else:
                result.errors.extend(_load_yaml(data, shown, result.objects))
        except InputError as exc:
            result.errors.append(exc)
            continue
        if _count(result.objects) == before and not any(e.file == shown for e in result.errors):
            if name in optional:
                continue
            result.errors.append(InputError(shown, 1, NO_OBJECTS))
        result.files.append(shown)
    if optional and not result.files and not result.errors:
        result.errors.append(InputError(sorted(optional)[0], 1, NO_OBJECTS))
    return result


def _count(objects: ClusterObjects) -> int:
    return (len(objects.nodes) + len(objects.pods) + len(objects.events) + len(objects.priority_classes)
            + len(objects.runtime_classes) + len(objects.nodepools) + len(objects.dra) + len(objects.quotas)
            + len(objects.kueue) + len(objects.controllers))

"""Objects from dumps: ``kubectl get deploy,rs,sts,ds,jobs,cronjobs,pods,<CRDs> -A -o yaml`` (or ``-o json``).

A dump is a ``List`` (``kind: List``, or an API list such as ``DeploymentList`` whose items carry
no kind) or a multi-document file; files, directories (``*.yaml``, ``*.yml``, ``*.json``) and ``-``
for stdin are read one at a time.

* JSON takes a fast path: the file is read (up to 2 GiB), the list's items are found without
  decoding them (msgspec ``Raw``) and each is decoded and judged in turn, so memory is the file's
  bytes plus one object.
* YAML goes through the streaming parser of ``gpuguard.sources.yamlstream`` (one document, or one
  List item, at a time, with its checks for depth, aliases, duplicate keys and size), up to the
  64 MiB every manifest input is read to.  The items of a List are judged as they are parsed and
  recorded once the List is known to stand.

Bad input is an :class:`InputError` with file and line; the other objects and files are still read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from gpuguard.audit.auditor import Auditor, Judged, is_object
from gpuguard.audit.model import Origin
from gpuguard.kube.dump import JSON_ERRORS, invalid_json, list_dump, read_dump
from gpuguard.sources.inputs import collect
from gpuguard.sources.yamlsafe import MAX_FILE_BYTES, InputError, decode
from gpuguard.sources.yamlstream import ListEnd, Unit, stream
from policies.wording import plural

MAX_JSON_BYTES = 2 * 1024 * 1024 * 1024
MAX_YAML_BYTES = MAX_FILE_BYTES
STDIN_NAME = "<stdin>"

PodSink = Callable[[bytes | msgspec.Raw], None]


_WHOLE = msgspec.json.Decoder()


class DumpReader:
    """Feeds the objects of dump files to an auditor (and pods to ``pods``, for the pool summary)."""

    def __init__(self, auditor: Auditor, pods: PodSink | None = None) -> None:
        self.auditor = auditor
        self.pods = pods
        self.files: list[str] = []

    def read(self, paths: Sequence[str]) -> None:
        inputs, missing = collect(list(paths))
        for error in missing:
            self.auditor.error(error)
        for item in inputs:
            name = STDIN_NAME if item.path is None else item.name
            try:
                data = read_dump(name, item.path, MAX_JSON_BYTES)
                if data.lstrip()[:1] in (b"{", b"["):
                    self._json(data, name)
                elif len(data) > MAX_YAML_BYTES:
                    raise InputError(name, 0, f"YAML dump is {len(data) / 1048576:.0f} MiB; YAML is read up to "
                                     f"{MAX_YAML_BYTES // 1048576} MiB: write large dumps with "
                                     f"`kubectl get … -o json`, which is read up to {MAX_JSON_BYTES // 1048576} MiB "
                                     "and much faster")
                else:
                    self._yaml(decode(data, name), name)
            except InputError as exc:
                self.auditor.error(exc)
                continue
            self.files.append(name)

    # --- JSON ---------------------------------------------------------------------------------
    def _json(self, data: bytes, name: str) -> None:
        listed = list_dump(data, name)
        origin = Origin(name, None)
        try:
            if listed is not None:
                item_kind = listed.item_kind
                item_version = listed.api_version if item_kind and isinstance(listed.api_version, str) else None
                for i, raw in enumerate(listed.items):
                    self._json_item(raw, name, origin, f"items[{i}]", item_kind, item_version)
            else:
                whole = _WHOLE.decode(data)
                for i, obj in enumerate(whole if isinstance(whole, list) else [whole]):
                    self._object(obj, name, origin, f"item {i}", None)
        except JSON_ERRORS as exc:
            raise invalid_json(name, data, exc) from None

    def _json_item(self, raw: msgspec.Raw, name: str, origin: Origin, where: str, kind: str | None,
                   api_version: str | None) -> None:
        obj = _WHOLE.decode(raw)
        if isinstance(obj, dict) and kind and not obj.get("kind"):
            obj["kind"] = kind  # an API list (PodList…) carries the kind on the list only
            obj.setdefault("apiVersion", api_version)
        self._object(obj, name, origin, where, raw)

    def _object(self, obj: Any, name: str, origin: Origin, where: str, raw: msgspec.Raw | None) -> None:
        if isinstance(obj, dict) and str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list):
            for i, item in enumerate(obj["items"]):
                self._object(item, name, origin, f"{where}.items[{i}]", None)
            return
        if not is_object(obj):
            self.auditor.error(InputError(name, origin.line or 0, f"{where} is not a Kubernetes object "
                                          "(no apiVersion/kind)"))
            return
        self._pod(obj, raw)
        self.auditor.feed(obj, origin)

    def _pod(self, obj: dict[str, Any], raw: msgspec.Raw | bytes | None) -> None:
        if self.pods is not None and obj.get("kind") == "Pod" and obj.get("apiVersion") == "v1":
            self.pods(raw if raw is not None else msgspec.json.encode(obj))

    # --- YAML ---------------------------------------------------------------------------------
    def _yaml(self, text: str, name: str) -> None:
        held: list[tuple[Judged, bytes | None]] = []  # a streamed List's items, until it stands
        held_errors: list[InputError] = []
        in_list = False
        auditor = self.auditor
        for item in stream(text, name):
            if isinstance(item, InputError):
                (held_errors if in_list else auditor.result.errors).append(item)
            elif isinstance(item, ListEnd):
                in_list = False
                error = item.error
                if item.stands and not is_object(item.header):
                    error = InputError(name, item.line, "apiVersion and kind must be strings")
                if item.stands and error is None:
                    for judged, pod in held:
                        if pod is not None and self.pods is not None:
                            self.pods(pod)
                        auditor.commit(judged)
                    auditor.result.errors.extend(held_errors)
                else:
                    for judged, _pod in held:
                        auditor.forget(judged)
                if error is not None:
                    auditor.error(error)
                held, held_errors = [], []  # withdrawn unless committed; a document that was no List follows whole
            elif item.streamed:
                in_list = True
                if is_object(item.data):
                    held.append((auditor.judge(item.data, Origin(name, item.line)), self._pod_copy(item.data)))
                elif item.data is not None:
                    held_errors.append(InputError(name, item.line, f"items[{item.prefix.rsplit('/', 1)[1]}] is not "
                                                  "a Kubernetes object (no apiVersion/kind)"))
            else:
                self._unit(item, name)

    def _pod_copy(self, obj: dict[str, Any]) -> bytes | None:
        """What the pool summary needs of a held item: a pod, as compact JSON."""
        if self.pods is not None and obj.get("kind") == "Pod" and obj.get("apiVersion") == "v1":
            return msgspec.json.encode(obj)
        return None

    def _unit(self, unit: Unit, name: str) -> None:
        data = unit.data
        if data is None:
            return
        origin = Origin(name, unit.line)
        if isinstance(data, dict) and data.get("kind") == "List" and "items" in data:
            items = data["items"]
            if not isinstance(items, list):
                self.auditor.error(InputError(name, unit.line, "List.items must be a list of Kubernetes objects"))
                return
            for i, obj in enumerate(items):
                if obj is not None:
                    self._object(obj, name, origin, f"items[{i}]", None)
            return
        if isinstance(data, list):
            self.auditor.error(InputError(name, unit.line, f"document is a YAML list of {plural(len(data), 'item')}, "
                                          "not a Kubernetes object; wrap them in `kind: List` with `items:`"))
            return
        self._object(data, name, origin, "the document", None)

"""An in-process server speaking the Kubernetes list/watch wire format, for the real ``kubernetes`` client.

It keeps an event history per resource, streams watch events as chunked JSON lines, can expire
resource versions (an ERROR event with code 410, as etcd compaction produces), can fail requests
with HTTP 500, and pages lists with ``limit``/``continue``.  Resources are registered in
``RESOURCES`` (path, TypeMeta, List TypeMeta); tests may register more before starting a server.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import time
from collections.abc import Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

DEADLINE = 15.0
PATHS: dict[str, str] = {
    "/api/v1/nodes": "nodes",
    "/apis/node.k8s.io/v1/runtimeclasses": "runtimeclasses",
    "/apis/karpenter.sh/v1/nodepools": "nodepools",
}
TYPE_META: dict[str, dict[str, str]] = {
    "nodes": {"apiVersion": "v1", "kind": "Node"},
    "runtimeclasses": {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass"},
    "nodepools": {"apiVersion": "karpenter.sh/v1", "kind": "NodePool"},
}
LIST_META: dict[str, dict[str, str]] = {
    "nodes": {"apiVersion": "v1", "kind": "NodeList"},
    "runtimeclasses": {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClassList"},
    "nodepools": {"apiVersion": "karpenter.sh/v1", "kind": "NodePoolList"},
}
# Resources of CRDs: answered with 404 until the test "installs" the CRD (``absent.discard``).
OPTIONAL = frozenset({"nodepools"})
EXPIRED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "reason": "Expired",
    "code": 410,
    "message": "too old resource version: 1 (5)",
}


def gpu_node(name: str, gpus: int = 8, product: str = "NVIDIA-H100-80GB-HBM3") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "nvidia.com/gpu.product": product,
                "nvidia.com/cuda.driver-version.full": "570.124.06",
            },
        },
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "96", "memory": "1056455220Ki", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "allocatable": {"cpu": "95500m", "memory": "1045969460Ki", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2025-01-01T00:00:00Z"}],
        },
    }


def cpu_node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def nodepool(name: str, families: list[str], taint: bool = True) -> dict[str, Any]:
    """A Karpenter NodePool of AWS instance families (shaped like aws/karpenter-provider-aws examples)."""
    spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": families}],
    }
    if taint:
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"template": {"spec": spec}, "limits": {"cpu": "1000"}},
    }


def runtime_class(name: str, handler: str) -> dict[str, Any]:
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "handler": handler,
        "scheduling": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
    }


class FakeApiServer:
    """Objects, an event history and request counters per resource."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.rv = 1
        self.objects: dict[str, dict[str, dict[str, Any]]] = {r: {} for r in TYPE_META}
        self.history: dict[str, list[tuple[int, dict[str, Any]]]] = {r: [] for r in TYPE_META}
        self.compacted: dict[str, int] = dict.fromkeys(TYPE_META, 0)
        self.list_calls: dict[str, int] = dict.fromkeys(TYPE_META, 0)
        self.page_calls: dict[str, int] = dict.fromkeys(TYPE_META, 0)
        self.watch_calls: dict[str, int] = dict.fromkeys(TYPE_META, 0)
        self.fail_lists: dict[str, int] = dict.fromkeys(TYPE_META, 0)
        self.fail_watches: dict[str, int] = dict.fromkeys(TYPE_META, 0)
        self.expire_continue: dict[str, int] = dict.fromkeys(TYPE_META, 0)
        self.watch_queries: list[dict[str, list[str]]] = []
        self.watch_log: list[tuple[str, int]] = []  # (resource, resourceVersion) of each watch
        self.absent: set[str] = set(OPTIONAL)  # CRDs not installed
        self.closing = False
        self.port = 0

    # --- mutations (test side) ---
    def _record(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        event = {"type": kind, "object": copy.deepcopy(obj)}
        self.history[resource].append((self.rv, event))
        self.cond.notify_all()

    def put(self, resource: str, obj: dict[str, Any], notify: bool = True) -> None:
        with self.cond:
            self.rv += 1
            obj = copy.deepcopy(obj)
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
            name = obj["metadata"]["name"]
            kind = "MODIFIED" if name in self.objects[resource] else "ADDED"
            self.objects[resource][name] = obj
            if notify:
                self._record(resource, kind, obj)

    def delete(self, resource: str, name: str) -> None:
        with self.cond:
            self.rv += 1
            obj = self.objects[resource].pop(name)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self._record(resource, "DELETED", obj)

    def expire(self, resource: str) -> None:
        """Compact history: open watches get an ERROR 410 event, old versions are gone."""
        with self.cond:
            self.compacted[resource] = self.rv
            self.history[resource].append((self.rv, {"type": "ERROR", "object": EXPIRED}))
            self.cond.notify_all()

    def bookmark(self, resource: str) -> None:
        with self.cond:
            self.rv += 1
            obj = {**TYPE_META[resource], "metadata": {"resourceVersion": str(self.rv)}}
            self.history[resource].append((self.rv, {"type": "BOOKMARK", "object": obj}))
            self.cond.notify_all()

    # --- request side ---
    def list_page(self, resource: str, limit: int | None, token: str | None) -> tuple[int, dict[str, Any]]:
        with self.cond:
            self.page_calls[resource] += 1
            if token and self.expire_continue[resource] > 0:
                self.expire_continue[resource] -= 1
                return 410, {**EXPIRED, "message": "The provided continue parameter is too old"}
            if not token:
                self.list_calls[resource] += 1
                if self.fail_lists[resource] > 0:
                    self.fail_lists[resource] -= 1
                    return 500, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                 "reason": "InternalError", "code": 500, "message": "etcd unavailable"}
            items = []
            for name in sorted(self.objects[resource]):
                item = copy.deepcopy(self.objects[resource][name])
                item.pop("kind", None)  # the API server omits TypeMeta on list items
                item.pop("apiVersion", None)
                items.append(item)
            start = int(token) if token else 0
            end = start + limit if limit else len(items)
            meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
            if end < len(items):
                meta["continue"] = str(end)
            return 200, {**LIST_META[resource], "metadata": meta, "items": items[start:end]}

    def _pending(self, history: list[Any], seen: int, deadline: float) -> bool:
        return self.closing or len(history) > seen or time.monotonic() > deadline

    def events(self, resource: str, since: int, timeout: float) -> Iterator[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self.cond:
            if since < self.compacted[resource]:
                yield {"type": "ERROR", "object": EXPIRED}
                return
            pos = next((i for i, (rv, _) in enumerate(self.history[resource]) if rv > since),
                       len(self.history[resource]))
        history = self.history[resource]
        while True:
            with self.cond:
                self.cond.wait_for(partial(self._pending, history, pos, deadline), timeout=0.2)
                if self.closing or time.monotonic() > deadline:
                    return
                batch = [e for _, e in self.history[resource][pos:]]
                pos = len(self.history[resource])
            for event in batch:
                yield event
                if event["type"] == "ERROR":
                    return


def make_handler(api: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            resource = PATHS.get(url.path)
            if resource is not None and resource in api.absent:
                with api.cond:
                    api.list_calls[resource] += 1  # counted, so tests can wait for a recheck
                resource = None
            if resource is None:
                self._json(404, {"kind": "Status", "code": 404, "status": "Failure", "reason": "NotFound"})
                return
            query = parse_qs(url.query)
            if query.get("watch", [""])[0] in ("true", "1"):
                self._watch(resource, query)
            else:
                limit = int(query["limit"][0]) if "limit" in query else None
                token = query.get("continue", [None])[0]
                self._json(*api.list_page(resource, limit, token))

        def _watch(self, resource: str, query: dict[str, list[str]]) -> None:
            with api.cond:
                api.watch_calls[resource] += 1
                api.watch_queries.append(query)
                api.watch_log.append((resource, int(query.get("resourceVersion", ["0"])[0] or 0)))
                fail = api.fail_watches[resource] > 0
                if fail:
                    api.fail_watches[resource] -= 1
            if fail:
                self._json(500, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                 "reason": "InternalError", "code": 500, "message": "watch failed"})
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            since = int(query.get("resourceVersion", ["0"])[0] or 0)
            timeout = float(query.get("timeoutSeconds", ["60"])[0])
            try:
                for event in api.events(resource, since, timeout):
                    line = json.dumps(event).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

    return Handler



@contextlib.contextmanager
def serving(state: FakeApiServer) -> Iterator[FakeApiServer]:
    """Serve ``state`` on 127.0.0.1 (its ``port`` attribute is set) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.port = server.server_address[1]
    try:
        yield state
    finally:
        with state.cond:
            state.closing = True
            state.cond.notify_all()
        server.shutdown()
        server.server_close()

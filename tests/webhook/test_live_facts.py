"""LiveFacts against an in-process server speaking the Kubernetes list/watch wire format.

The real ``kubernetes`` client does the talking; the server keeps an event history per
resource, streams watch events as chunked JSON lines, can expire resource versions (an ERROR
event with code 410, as etcd compaction produces), and can fail requests with HTTP 500.
"""

from __future__ import annotations

import copy
import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from fractions import Fraction
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from policies.facts import ClusterFacts
from webhook import live_facts
from webhook.live_facts import LiveFacts, backoff_delay

DEADLINE = 15.0
PATHS = {"/api/v1/nodes": "nodes", "/apis/node.k8s.io/v1/runtimeclasses": "runtimeclasses"}
TYPE_META = {
    "nodes": {"apiVersion": "v1", "kind": "Node"},
    "runtimeclasses": {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass"},
}
LIST_META = {
    "nodes": {"apiVersion": "v1", "kind": "NodeList"},
    "runtimeclasses": {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClassList"},
}
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
        self.closing = False

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


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer()
    state.put("nodes", gpu_node("gpu-a"))
    state.put("nodes", gpu_node("gpu-b"))
    state.put("nodes", cpu_node("cpu-a"))
    state.put("runtimeclasses", runtime_class("nvidia", "nvidia"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.port = server.server_address[1]  # type: ignore[attr-defined]
    yield state
    with state.cond:
        state.closing = True
        state.cond.notify_all()
    server.shutdown()
    server.server_close()


class Recorder:
    """Collects snapshots from on_update; waits for a predicate with a deadline."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.snapshots: list[ClusterFacts] = []

    def __call__(self, facts: ClusterFacts) -> None:
        with self.cond:
            self.snapshots.append(facts)
            self.cond.notify_all()

    def wait_for(self, predicate: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE
        with self.cond:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out waiting for {what}")
                # the predicate may depend on server-side counters too, so re-check periodically
                self.cond.wait(min(remaining, 0.05))


def start_live(api: FakeApiServer, **kwargs: Any) -> tuple[LiveFacts, Recorder]:
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{api.port}"  # type: ignore[attr-defined]
    recorder = Recorder()
    kwargs.setdefault("backoff_initial", 0.01)
    kwargs.setdefault("backoff_max", 0.05)
    live = LiveFacts(lambda: client.ApiClient(configuration), on_update=recorder, **kwargs)
    live.start()
    return live, recorder


@pytest.fixture
def started(api: FakeApiServer) -> Iterator[tuple[LiveFacts, Recorder]]:
    live, recorder = start_live(api)
    recorder.wait_for(lambda: live.ready, "initial list")
    yield live, recorder
    live.stop()


def node_names(live: LiveFacts) -> list[str]:
    return [n.name for n in live.current().nodes]


def test_initial_list_makes_facts_ready(api: FakeApiServer, started: tuple[LiveFacts, Recorder]) -> None:
    live, _ = started
    facts = live.current()
    assert facts.source == "live"
    assert node_names(live) == ["cpu-a", "gpu-a", "gpu-b"]
    gpu = next(n for n in facts.nodes if n.name == "gpu-a")
    assert gpu.allocatable["nvidia.com/gpu"] == Fraction(8)
    assert gpu.gpu_product == "NVIDIA-H100-80GB-HBM3"
    assert gpu.driver_version == (570, 124, 6)
    assert [str(t) for t in gpu.taints] == ["nvidia.com/gpu=present:NoSchedule"]
    assert facts.runtime_classes["nvidia"].handler == "nvidia"
    # the two GPU nodes differ only in their hostname: one group
    assert sorted(g.size for g in facts.groups) == [1, 2]
    age = live.age_seconds()
    assert age is not None and 0 <= age < DEADLINE


def test_watch_starts_at_list_version_with_bookmarks(api: FakeApiServer, started: tuple[LiveFacts, Recorder]) -> None:
    _, recorder = started
    recorder.wait_for(lambda: len(api.watch_queries) >= 2, "both watches")
    for query in api.watch_queries:
        assert query["allowWatchBookmarks"] == ["true"]
        assert int(query["resourceVersion"][0]) >= 5  # after the fixture's four objects
        assert int(query["timeoutSeconds"][0]) >= live_facts.MIN_WATCH_TIMEOUT_SECONDS


def test_not_ready_before_first_list(api: FakeApiServer) -> None:
    api.fail_lists["runtimeclasses"] = 1_000_000
    live, recorder = start_live(api)
    try:
        recorder.wait_for(lambda: bool(node_names(live)) and api.list_calls["runtimeclasses"] >= 2, "nodes only")
        assert not live.ready
        assert live.age_seconds() is None
    finally:
        live.stop()


def test_added_modified_deleted_are_applied(api: FakeApiServer, started: tuple[LiveFacts, Recorder]) -> None:
    live, recorder = started
    api.put("nodes", gpu_node("gpu-c", gpus=4, product="NVIDIA-A100-SXM4-80GB"))
    recorder.wait_for(lambda: "gpu-c" in node_names(live), "ADDED gpu-c")
    assert next(n for n in live.current().nodes if n.name == "gpu-c").allocatable["nvidia.com/gpu"] == 4

    changed = gpu_node("gpu-a")
    changed["spec"]["taints"].append({"key": "maintenance", "effect": "NoExecute"})
    api.put("nodes", changed)
    recorder.wait_for(
        lambda: any(len(n.taints) == 2 for n in live.current().nodes if n.name == "gpu-a"), "MODIFIED gpu-a"
    )

    api.delete("nodes", "gpu-b")
    recorder.wait_for(lambda: "gpu-b" not in node_names(live), "DELETED gpu-b")
    assert node_names(live) == ["cpu-a", "gpu-a", "gpu-c"]

    api.put("runtimeclasses", runtime_class("nvidia-cdi", "nvidia-cdi"))
    recorder.wait_for(lambda: "nvidia-cdi" in live.current().runtime_classes, "ADDED runtime class")
    assert api.list_calls == {"nodes": 1, "runtimeclasses": 1}


def test_irrelevant_changes_do_not_publish(api: FakeApiServer, started: tuple[LiveFacts, Recorder]) -> None:
    live, recorder = started
    before = len(recorder.snapshots)
    heartbeat = gpu_node("gpu-a")
    heartbeat["status"]["conditions"][0]["lastHeartbeatTime"] = "2025-01-01T00:05:00Z"
    api.put("nodes", heartbeat)
    api.bookmark("nodes")
    api.put("nodes", cpu_node("cpu-b"))
    recorder.wait_for(lambda: "cpu-b" in node_names(live), "ADDED cpu-b")
    # events arrive in order: the heartbeat and the bookmark were handled before cpu-b
    assert len(recorder.snapshots) == before + 1


def test_snapshots_are_swapped_not_mutated(api: FakeApiServer, started: tuple[LiveFacts, Recorder]) -> None:
    live, recorder = started
    old = live.current()
    api.delete("nodes", "cpu-a")
    recorder.wait_for(lambda: "cpu-a" not in node_names(live), "DELETED cpu-a")
    assert "cpu-a" in [n.name for n in old.nodes]
    assert live.current() is not old


def test_expired_watch_relists(api: FakeApiServer, started: tuple[LiveFacts, Recorder]) -> None:
    live, recorder = started
    # a change the watch never delivers (lost to compaction) must come back through the relist
    api.put("nodes", gpu_node("gpu-hidden"), notify=False)
    api.expire("nodes")
    recorder.wait_for(lambda: "gpu-hidden" in node_names(live), "relist after 410")
    assert api.list_calls["nodes"] == 2
    assert api.list_calls["runtimeclasses"] == 1
    # and the watch resumes from the relist's version
    api.put("nodes", cpu_node("cpu-late"))
    recorder.wait_for(lambda: "cpu-late" in node_names(live), "event after relist")
    assert api.list_calls["nodes"] == 2


def test_list_errors_back_off_and_recover(api: FakeApiServer) -> None:
    api.fail_lists["nodes"] = 3
    live, recorder = start_live(api)
    try:
        recorder.wait_for(lambda: live.ready, "ready after failed lists")
        assert api.list_calls["nodes"] == 4
        assert node_names(live) == ["cpu-a", "gpu-a", "gpu-b"]
    finally:
        live.stop()


def test_watch_error_resumes_without_relist(api: FakeApiServer, started: tuple[LiveFacts, Recorder]) -> None:
    live, recorder = started
    recorder.wait_for(lambda: api.watch_calls["nodes"] >= 1, "first watch")
    api.fail_watches["nodes"] = 2
    api.expire("runtimeclasses")  # unrelated: makes sure the node watch is the one that fails below
    api.put("nodes", cpu_node("cpu-x"))
    recorder.wait_for(lambda: "cpu-x" in node_names(live), "cpu-x via the first watch")
    # the server ends the current node watch; the next two watch attempts fail with 500
    with api.cond:
        failure = {**EXPIRED, "code": 500, "reason": "InternalError", "message": "etcd leader changed"}
        api.history["nodes"].append((api.rv, {"type": "ERROR", "object": failure}))
        api.cond.notify_all()
    recorder.wait_for(lambda: api.watch_calls["nodes"] >= 4, "watch retries")
    api.put("nodes", cpu_node("cpu-y"))
    recorder.wait_for(lambda: "cpu-y" in node_names(live), "cpu-y after watch errors")
    assert api.list_calls["nodes"] == 1


def test_watch_resumes_after_the_server_ends_it(api: FakeApiServer) -> None:
    live, recorder = start_live(api, watch_timeout_seconds=1)  # the server closes watches after 1-2 s
    try:
        recorder.wait_for(lambda: live.ready and api.watch_calls["nodes"] >= 2, "a second node watch")
        api.put("nodes", cpu_node("cpu-after"))
        added_at = api.rv
        recorder.wait_for(lambda: "cpu-after" in node_names(live), "event on the resumed watch")
        seen = api.watch_calls["nodes"]
        recorder.wait_for(lambda: api.watch_calls["nodes"] > seen, "the next node watch")
        assert api.list_calls["nodes"] == 1
        # the next watch resumes from the last resourceVersion seen, not from the list's
        assert [rv for resource, rv in api.watch_log if resource == "nodes"][-1] == added_at
    finally:
        live.stop()


def test_reading_facts_makes_no_requests(api: FakeApiServer, started: tuple[LiveFacts, Recorder]) -> None:
    live, recorder = started
    recorder.wait_for(lambda: api.watch_calls["nodes"] >= 1 and api.watch_calls["runtimeclasses"] >= 1, "watching")
    before = (dict(api.page_calls), dict(api.watch_calls))
    for _ in range(200):
        assert live.current().nodes
    assert (api.page_calls, api.watch_calls) == before


def test_pagination(api: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_facts, "LIST_PAGE_SIZE", 2)
    for i in range(4):
        api.put("nodes", gpu_node(f"extra-{i}"))
    live, recorder = start_live(api)
    try:
        recorder.wait_for(lambda: live.ready, "ready")
        assert len(node_names(live)) == 7
        assert api.page_calls["nodes"] == 4
        assert api.list_calls["nodes"] == 1
    finally:
        live.stop()


def test_expired_continue_token_restarts_the_list(api: FakeApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(live_facts, "LIST_PAGE_SIZE", 2)
    api.expire_continue["nodes"] = 1
    live, recorder = start_live(api)
    try:
        recorder.wait_for(lambda: live.ready, "ready")
        assert node_names(live) == ["cpu-a", "gpu-a", "gpu-b"]
        assert api.list_calls["nodes"] == 2
    finally:
        live.stop()


def test_stop_ends_threads_promptly(api: FakeApiServer) -> None:
    live, recorder = start_live(api)
    recorder.wait_for(lambda: live.ready and api.watch_calls["nodes"] >= 1, "watching")
    began = time.monotonic()
    live.stop(timeout=5)
    assert not live.alive
    assert time.monotonic() - began < 2.0


def test_stop_right_after_start(api: FakeApiServer) -> None:
    live, _ = start_live(api)
    began = time.monotonic()
    live.stop(timeout=5)
    assert not live.alive
    assert time.monotonic() - began < 2.0


def test_stop_during_backoff(api: FakeApiServer) -> None:
    api.fail_lists["nodes"] = 1_000_000
    live, recorder = start_live(api, backoff_initial=30.0, backoff_max=30.0)
    recorder.wait_for(lambda: api.list_calls["nodes"] >= 1, "first failing list")
    began = time.monotonic()
    live.stop(timeout=5)
    assert not live.alive
    assert time.monotonic() - began < 2.0


@pytest.mark.parametrize("attempt", range(1, 12))
def test_backoff_delay_is_bounded_and_jittered(attempt: int) -> None:
    rng = random.Random(attempt)
    delays = [backoff_delay(attempt, 0.5, 30.0, rng) for _ in range(50)]
    ceiling = min(30.0, 0.5 * 2 ** (attempt - 1))
    assert all(ceiling / 2 <= d <= ceiling for d in delays)
    assert len(set(delays)) > 1


def test_from_kubeconfig_uses_the_given_server(tmp_path: Any, api: FakeApiServer) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{api.port}"}}],  # type: ignore[attr-defined]
                "users": [{"name": "u", "user": {"token": "abc"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    recorder = Recorder()
    live = live_facts.from_kubeconfig(str(kubeconfig), in_cluster=False, on_update=recorder)
    live.start()
    try:
        recorder.wait_for(lambda: live.ready, "ready via kubeconfig")
        assert node_names(live) == ["cpu-a", "gpu-a", "gpu-b"]
    finally:
        live.stop()


def test_from_kubeconfig_missing_file_fails_early(tmp_path: Any) -> None:
    with pytest.raises(Exception, match="config"):
        live_facts.from_kubeconfig(str(tmp_path / "absent"), in_cluster=False)

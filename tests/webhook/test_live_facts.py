"""LiveFacts against an in-process server speaking the Kubernetes list/watch wire format.

The real ``kubernetes`` client does the talking; the server keeps an event history per
resource, streams watch events as chunked JSON lines, can expire resource versions (an ERROR
event with code 410, as etcd compaction produces), and can fail requests with HTTP 500.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import pytest

from policies.facts import ClusterFacts
from tests.support.fake_apiserver import (
    DEADLINE,
    EXPIRED,
    FakeApiServer,
    api_client,
    cpu_node,
    gpu_node,
    runtime_class,
    serving,
)
from webhook import live_facts
from webhook.live_facts import LiveFacts, backoff_delay

pytestmark = pytest.mark.integration


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer()
    state.put("nodes", gpu_node("gpu-a"))
    state.put("nodes", gpu_node("gpu-b"))
    state.put("nodes", cpu_node("cpu-a"))
    state.put("runtimeclasses", runtime_class("nvidia", "nvidia"))
    with serving(state):
        yield state


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
    recorder = Recorder()
    kwargs.setdefault("backoff_initial", 0.01)
    kwargs.setdefault("backoff_max", 0.05)
    live = LiveFacts(lambda: api_client(api), on_update=recorder, **kwargs)
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
    assert api.list_calls == {"nodes": 1, "runtimeclasses": 1, "nodepools": 1}  # no CRD: listed once, 404


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

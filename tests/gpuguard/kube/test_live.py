"""Listing a live cluster with the real ``kubernetes`` client against the in-process API server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gpuguard.kube.live import LiveError, list_cluster
from policies.pending.state import ClusterObjects
from tests.gpuguard.kube.support import summary
from tests.support.cluster_objects import all_objects, core_event, scenario
from tests.support.fake_apiserver import ALL_RESOURCES, FakeApiServer, api_client, serving

RESOURCE_OF = {"Node": "nodes", "Pod": "pods", "Event": "events", "PriorityClass": "priorityclasses"}


def _core_events(parts: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The API's core/v1 view shows events.k8s.io events as core Events."""
    out = []
    pods = {p["metadata"]["name"]: p for p in parts["pods"]}
    for e in parts["events"]:
        if e["apiVersion"] == "events.k8s.io/v1":
            out.append(core_event(pods[e["regarding"]["name"]], e["note"], count=e["deprecatedCount"],
                                  last="2026-11-30T11:50:00Z"))
        else:
            out.append(e)
    return out


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    state = FakeApiServer(ALL_RESOURCES)
    parts = scenario()
    parts["events"] = _core_events(parts)
    for kind_list in parts.values():
        for obj in kind_list:
            state.put(RESOURCE_OF[obj["kind"]], obj)
    with serving(state):
        yield state


def test_live_listing_matches_the_dump_analysis(api: FakeApiServer) -> None:
    with api_client(api) as c:
        listing = list_cluster(c, page_size=4)
    assert listing.notes == []
    expected = summary(ClusterObjects.sort(all_objects()))
    got = summary(listing.objects)
    assert got["pools"] == expected["pools"]
    assert got["pending"] == expected["pending"]
    assert got["unknown"] == expected["unknown"]
    # the node event is filtered out server-side; three FailedScheduling events remain
    assert got["events"] == 3 and len(listing.objects.events) == 3
    # terminal pods never leave the server (the scheduler's informer filter)
    names = {p["metadata"]["name"] for p in listing.objects.pods}
    assert "done-job" not in names and "crashed" not in names and "train-a" in names
    # pagination: 10 nodes in pages of 4
    assert api.page_calls["nodes"] == 3 and listing.requests >= 3 + 5
    selectors = {(r, q.get("fieldSelector", [""])[0]) for r, _, q in api.list_queries if "continue" not in q}
    assert ("pods", "status.phase!=Succeeded,status.phase!=Failed") in selectors
    assert ("events", "reason=FailedScheduling") in selectors


def test_items_get_their_kind_and_pending_pods_stay_whole(api: FakeApiServer) -> None:
    with api_client(api) as c:
        listing = list_cluster(c)
    pods = {p["metadata"]["name"]: p for p in listing.objects.pods}
    assert {p["kind"] for p in listing.objects.pods} == {"Pod"}
    assert "volumes" in pods["big-train"]["spec"] and "volumes" not in pods["train-a"]["spec"]


def test_expired_continue_token_restarts_the_list(api: FakeApiServer) -> None:
    api.expire_continue["pods"] = 1
    with api_client(api) as c:
        listing = list_cluster(c, page_size=5)
    assert api.list_calls["pods"] == 2
    assert len(listing.objects.pods) == len([p for p in scenario()["pods"]
                                             if p["status"]["phase"] not in ("Succeeded", "Failed")])


def test_forbidden_cluster_wide_pods_fall_back_to_the_namespace_with_a_note(api: FakeApiServer) -> None:
    api.forbidden.add("pods")
    with api_client(api) as c:
        listing = list_cluster(c, namespace="ml")
    assert {p["metadata"]["namespace"] for p in listing.objects.pods} == {"ml"}
    assert any("only be listed in namespace ml" in n for n in listing.notes)
    assert {e["involvedObject"]["namespace"] for e in listing.objects.events} == {"ml"}


def test_required_lists_fail_with_the_rbac_needed(api: FakeApiServer) -> None:
    api.forbidden.add("nodes")
    with api_client(api) as c, pytest.raises(LiveError) as caught:
        list_cluster(c)
    assert "cannot list nodes" in str(caught.value)
    assert 'cannot list resource "nodes"' in str(caught.value) and "grant `list` on nodes" in str(caught.value)


def test_pods_forbidden_everywhere_is_an_error(api: FakeApiServer) -> None:
    api.forbidden.update({"pods", "pods@ml"})
    with api_client(api) as c, pytest.raises(LiveError) as caught:
        list_cluster(c, namespace="ml")
    assert "cannot list pods" in str(caught.value) and "namespace ml" in str(caught.value)


def test_optional_lists_become_notes(api: FakeApiServer) -> None:
    api.forbidden.update({"priorityclasses", "resourcequotas"})
    api.fail_lists["events"] = 3  # FailedScheduling, FailedCreate and FailedCreatePod events
    with api_client(api) as c:
        listing = list_cluster(c)
    assert listing.objects.priority_classes == [] and listing.objects.events == []
    assert len(listing.notes) == 5, listing.notes
    assert any(n.startswith("PriorityClasses not listed") and "forbidden" in n for n in listing.notes)
    assert any(n.startswith("ResourceQuotas not listed") and "forbidden" in n for n in listing.notes)
    for reason in ("FailedScheduling", "FailedCreate", "FailedCreatePod"):
        assert any(n.startswith(f"{reason} events not listed") and "etcd unavailable" in n for n in listing.notes)


def test_server_errors_on_nodes_are_reported(api: FakeApiServer) -> None:
    api.fail_lists["nodes"] = 1
    with api_client(api) as c, pytest.raises(LiveError) as caught:
        list_cluster(c)
    assert "cannot list nodes" in str(caught.value) and "etcd unavailable" in str(caught.value)

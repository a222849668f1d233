"""Snapshots that follow each other (live facts): node groups kept one node at a time, memo entries
kept exactly where what they read did not change, and node changes that change nothing."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.facts import (
    ClusterFacts,
    NodeFacts,
    NodeGrouper,
    Taint,
    group_nodes,
    node_from_object,
    same_for_scheduling,
)
from policies.reads import ASPECTS, NODES, RUNTIME_CLASSES, recording


def raw_node(name: str, pool: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "pool": pool,
                                                  "nvidia.com/gfd.timestamp": "1764500000", **labels}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "96", "nvidia.com/gpu": "8", "memory": f"{1000 + len(name)}Gi"}}}


def facts_node(name: str, pool: str, **labels: str) -> NodeFacts:
    node = node_from_object(raw_node(name, pool, **labels))
    assert node is not None
    return node


def shape(groups: tuple[Any, ...]) -> list[tuple[str, tuple[str, ...], frozenset[str]]]:
    return [(g.representative.name, tuple(m.name for m in g.members), g.varying_labels) for g in groups]


# --- NodeGrouper ---------------------------------------------------------------------------------
OPS = st.lists(st.tuples(st.sampled_from(("put", "remove", "build")), st.integers(0, 29), st.sampled_from("abc"),
                         st.integers(0, 11)), max_size=80)


@settings(max_examples=60, deadline=None)
@given(OPS)
def test_grouper_builds_the_groups_a_fresh_grouping_builds(ops: list[tuple[str, int, str, int]]) -> None:
    grouper = NodeGrouper()
    nodes: dict[str, NodeFacts] = {}
    for op, i, pool, serial in ops:
        name = f"node-{i:02d}"
        if op == "build":
            built_nodes, groups = grouper.build()
            ordered = tuple(nodes[k] for k in sorted(nodes))
            assert built_nodes == ordered
            assert shape(groups) == shape(group_nodes(ordered))
        elif op == "remove":
            grouper.remove(name)
            nodes.pop(name, None)
        else:
            # a serial label with many values becomes a per-node key once enough nodes carry distinct ones
            node = facts_node(name, pool, **{"example.com/serial": f"SN-{serial}"})
            grouper.put(node)
            nodes[name] = node
    built_nodes, groups = grouper.build()
    ordered = tuple(nodes[k] for k in sorted(nodes))
    assert shape(groups) == shape(group_nodes(ordered))


def test_grouper_keeps_the_groups_nothing_changed_in() -> None:
    grouper = NodeGrouper()
    for i in range(20):
        grouper.put(facts_node(f"a-{i:02d}", "a"))
        grouper.put(facts_node(f"b-{i:02d}", "b"))
    _, before = grouper.build()
    grouper.put(dataclasses.replace(facts_node("b-03", "b"), taints=(Taint("maintenance", "", "NoSchedule"),)))
    _, after = grouper.build()
    by_rep = {g.representative.name: g for g in before}
    a_group = next(g for g in after if g.representative.name == "a-00")
    assert a_group is by_rep["a-00"]  # untouched: the very same object
    assert len(after) == 3 and sorted(g.size for g in after) == [1, 19, 20]
    assert grouper.build()[1] is after  # nothing changed since: nothing rebuilt


# --- what changes a node --------------------------------------------------------------------------
def test_a_gfd_timestamp_or_a_heartbeat_changes_nothing_scheduling_reads() -> None:
    a = raw_node("n", "a")
    b = raw_node("n", "a")
    b["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1764500060"
    b["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-01T10:05:00Z"}]
    na, nb = node_from_object(a), node_from_object(b)
    assert na is not None and nb is not None and na != nb
    assert same_for_scheduling(na, nb)


def test_presence_taints_labels_and_allocatable_do_change_a_node() -> None:
    base = facts_node("n", "a")
    labels = dict(base.labels)
    del labels["nvidia.com/gfd.timestamp"]
    assert not same_for_scheduling(base, dataclasses.replace(base, labels=labels))  # GFD stopped labelling
    assert not same_for_scheduling(base, dataclasses.replace(base, labels={**base.labels, "pool": "b"}))
    assert not same_for_scheduling(base, dataclasses.replace(base, taints=()))
    assert not same_for_scheduling(base, dataclasses.replace(base, unschedulable=True))
    assert not same_for_scheduling(base, dataclasses.replace(base, allocatable={**base.allocatable, "cpu": Fraction(1)}))


# --- memo entries across snapshots ----------------------------------------------------------------
def following(previous: ClusterFacts, changed: tuple[str, ...], **fields: Any) -> ClusterFacts:
    tokens = {a: previous.token(a) for a in ASPECTS}
    for aspect in changed:
        tokens[aspect] = object()
    args = {"nodes": previous.nodes, "runtime_classes": previous.runtime_classes, "source": previous.source,
            "pools": previous.pools, **fields}
    return ClusterFacts(**args, tokens=tokens, basis=previous)


def test_an_entry_is_kept_while_what_it_read_is_unchanged_and_recomputed_after() -> None:
    first = ClusterFacts(nodes=(facts_node("a-0", "a"),), source="live")
    calls: list[str] = []

    def count_nodes(facts: ClusterFacts) -> int:
        calls.append("nodes")
        return len(facts.nodes)

    assert first.memoised("count", lambda: count_nodes(first)) == 1
    second = following(first, (RUNTIME_CLASSES,), runtime_classes={})
    assert second.memoised("count", lambda: count_nodes(second)) == 1 and calls == ["nodes"]
    third = following(second, (NODES,), nodes=(facts_node("a-0", "a"), facts_node("a-1", "a")))
    assert third.memoised("count", lambda: count_nodes(third)) == 2 and calls == ["nodes", "nodes"]


def test_what_an_inner_memo_read_counts_for_the_outer_one() -> None:
    first = ClusterFacts(nodes=(facts_node("a-0", "a"),), source="live")
    first.memoised("inner", lambda: len(first.nodes))
    with recording() as reads:
        first.memoised("outer", lambda: first.memoised("inner", lambda: -1) + 1)  # the inner one is a hit
    assert NODES in reads
    changed = following(first, (NODES,), nodes=())
    assert changed.memoised("outer", lambda: changed.memoised("inner", lambda: len(changed.nodes)) + 1) == 1


def test_derived_facts_are_rebuilt_not_kept() -> None:
    first = ClusterFacts(nodes=(facts_node("a-0", "a"),), source="live")
    bound = first.bound_to("a-0")
    second = following(first, ())
    rebuilt = second.bound_to("a-0")
    assert rebuilt is not bound and rebuilt.nodes == bound.nodes  # holds the new snapshot's parts


def test_a_snapshot_with_the_same_nodes_borrows_their_groups() -> None:
    first = ClusterFacts(nodes=tuple(facts_node(f"a-{i}", "a") for i in range(3)), source="live")
    second = following(first, (RUNTIME_CLASSES,))
    assert second.groups == first.groups and second.groups[0] is first.groups[0]


def test_facts_are_immutable() -> None:
    facts = ClusterFacts()
    try:
        facts.source = "x"  # type: ignore[misc]
    except AttributeError as exc:
        assert "immutable" in str(exc)
    else:
        raise AssertionError("ClusterFacts accepted an assignment")

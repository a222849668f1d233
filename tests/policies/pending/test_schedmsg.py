"""The scheduler message parser against the grammar of FitError.Error (pending-gpus.md §1.2)."""

from __future__ import annotations

from policies.pending import schedmsg
from policies.pending.schedmsg import explain, explain_reason, parse

DOC_EXAMPLE = (
    "0/5 nodes are available: 2 Insufficient nvidia.com/gpu, 3 node(s) had untolerated taint "
    "{nvidia.com/gpu: present}. preemption: 0/5 nodes are available: 2 No preemption victims found for "
    "incoming pod, 3 Preemption is not helpful for scheduling."
)


def test_reference_example_parses_into_counts_and_nested_preemption() -> None:
    msg = parse(DOC_EXAMPLE)
    assert msg.nodes == 5
    assert [(r.count, r.reason) for r in msg.reasons] == [
        (2, "Insufficient nvidia.com/gpu"),
        (3, "node(s) had untolerated taint {nvidia.com/gpu: present}"),
    ]
    assert msg.reasons[0].info.resource == "nvidia.com/gpu"
    assert msg.reasons[0].info.preemptible is True
    assert msg.reasons[1].info.taint == ("nvidia.com/gpu", "present")
    assert msg.reasons[1].info.preemptible is False
    pre = msg.preemption
    assert pre is not None and pre.eligible and pre.nested is not None
    assert [(r.count, r.reason) for r in pre.nested.reasons] == [
        (2, "No preemption victims found for incoming pod"),
        (3, "Preemption is not helpful for scheduling"),
    ]
    assert not msg.unparsed and not msg.truncated
    assert msg.insufficient() == {"nvidia.com/gpu": 2}


def test_the_nested_preemption_list_counts_nodes_in_plain_words() -> None:
    # "3 Preemption is not helpful for scheduling" counts nodes whose Filter status was
    # UnschedulableAndUnresolvable: preemption did not try them (preemption.go
    # nodesWherePreemptionMightHelp [K-pre]).  Said as "3 of 5 nodes: …", never "3 evicting pods…".
    lines = explain(parse(DOC_EXAMPLE))
    assert lines[-1] == (
        "preemption found no node where evicting lower-priority pods helps: "
        "2 of 5 nodes: the node has no lower-priority pods whose eviction would make room; "
        "3 of 5 nodes: not tried, as evicting pods cannot fix what rejected the node (a taint, the node "
        "selector or affinity, cordon…)"
    )
    assert not any("3 evicting" in line or "3 not tried" in line for line in lines)


def test_counts_may_exceed_the_node_count() -> None:
    # NodeResourcesFit gives one reason per short resource, so one node counts twice [K-fit]
    msg = parse("0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient nvidia.com/gpu.")
    assert msg.nodes == 2
    assert sum(r.count for r in msg.reasons) == 4
    assert msg.by_category() == {schedmsg.RESOURCES: 4}


def test_lexicographic_order_with_multi_digit_counts_is_kept() -> None:
    # sort.Strings puts "10 x" before "2 y"
    msg = parse("0/12 nodes are available: 10 node(s) didn't match Pod's node affinity/selector, 2 Insufficient nvidia.com/gpu.")
    assert [r.count for r in msg.reasons] == [10, 2]
    assert msg.reasons[0].info.category == schedmsg.NODE_AFFINITY


def test_prefilter_message_replaces_the_list() -> None:
    msg = parse(
        "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are "
        "available: 3 Preemption is not helpful for scheduling."
    )
    assert msg.prefilter == "pod has unbound immediate PersistentVolumeClaims"
    assert msg.prefilter_info is not None and msg.prefilter_info.category == schedmsg.VOLUME
    assert msg.reasons == ()
    assert msg.preemption is not None and msg.preemption.nested is not None
    assert explain(msg)[0] == "all 3 nodes: a PersistentVolumeClaim with Immediate binding is not bound"


def test_absent_nodes_reason_with_brackets() -> None:
    msg = parse("0/46 nodes are available: 1 Too many pods, 45 node(s) didn't satisfy plugin(s) [NodeAffinity].")
    assert [(r.count, r.info.category) for r in msg.reasons] == [(1, schedmsg.RESOURCES), (45, schedmsg.PLUGINS)]


def test_commas_inside_brackets_do_not_split_entries() -> None:
    msg = parse("0/3 nodes are available: 3 node(s) didn't satisfy plugin(s) [A, 2 B].")
    assert [(r.count, r.reason) for r in msg.reasons] == [(3, "node(s) didn't satisfy plugin(s) [A, 2 B]")]


def test_not_eligible_preemption_messages() -> None:
    never = parse("0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: not eligible due to preemptionPolicy=Never.")
    assert never.preemption is not None and not never.preemption.eligible
    assert "preemptionPolicy: Never" in never.preemption.plain
    waiting = parse(
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: not eligible due to a terminating pod "
        "on the nominated node."
    )
    assert waiting.preemption is not None and "still terminating" in waiting.preemption.plain


def test_unknown_reasons_are_kept_verbatim() -> None:
    msg = parse("0/4 nodes are available: 1 node(s) had volume node affinity conflict, 3 node(s) are on fire.")
    unknown = msg.reasons[1]
    assert unknown.reason == "node(s) are on fire"
    assert not unknown.info.known and unknown.info.category == schedmsg.UNKNOWN
    lines = explain(msg)
    assert any("node(s) are on fire" in line and "verbatim" in line for line in lines)


def test_other_postfilter_message_is_kept_before_preemption() -> None:
    msg = parse(
        "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling."
    )
    assert [p.plugin for p in msg.postfilter] == ["", "DefaultPreemption"]
    assert msg.postfilter[0].text == "still not schedulable"
    assert msg.reasons[0].info.category == schedmsg.DRA


def test_scheduler_errors_are_not_fit_errors() -> None:
    msg = parse('running PreBind plugin "VolumeBinding": binding volumes: timed out waiting for the condition')
    assert not msg.is_fit_error
    assert msg.unparsed.startswith("running PreBind plugin")
    assert explain(msg) == [f"scheduler error: {msg.unparsed}"]


def test_truncated_event_keeps_complete_entries_and_marks_the_cut_one() -> None:
    reasons = ", ".join(f"1 node(s) had untolerated taint {{team-{i:03d}.example.com/dedicated: yes}}" for i in range(40))
    full = f"0/40 nodes are available: {reasons}."
    assert len(full.encode()) > schedmsg.NOTE_LENGTH_LIMIT
    note = full[: schedmsg.NOTE_LENGTH_LIMIT - 4] + " ..."  # schedule_one.go truncateMessage
    msg = parse(note)
    assert msg.truncated and msg.nodes == 40
    assert all(r.info.category == schedmsg.TAINT for r in msg.reasons[:-1])
    assert msg.reasons[-1].partial and not msg.reasons[-1].info.known
    untruncated = parse(full)
    assert not untruncated.truncated and len(untruncated.reasons) == 40


def test_reason_table_covers_the_reference_strings() -> None:
    expected = {
        "Too many pods": (schedmsg.RESOURCES, True),
        "node(s) were unschedulable": (schedmsg.CORDON, False),
        "node(s) didn't match Pod's node affinity/selector": (schedmsg.NODE_AFFINITY, False),
        "node(s) didn't have free ports for the requested pod ports": (schedmsg.PORTS, True),
        "node(s) didn't match pod anti-affinity rules": (schedmsg.POD_AFFINITY, True),
        "node(s) didn't match pod affinity rules": (schedmsg.POD_AFFINITY, False),
        "node(s) didn't match pod topology spread constraints": (schedmsg.TOPOLOGY_SPREAD, True),
        "node(s) didn't match pod topology spread constraints (missing required label)": (schedmsg.TOPOLOGY_SPREAD, False),
        "node(s) had taints that the pod didn't tolerate": (schedmsg.TAINT, False),
        "node(s) had untolerated taint(s)": (schedmsg.TAINT, False),
        'persistentvolumeclaim "data" not found': (schedmsg.VOLUME, False),
        "request gpu: device class big-gpu does not exist": (schedmsg.DRA, False),
        "Insufficient amd.com/gpu": (schedmsg.RESOURCES, True),
    }
    for reason, (category, preemptible) in expected.items():
        info = explain_reason(reason)
        assert info.known, reason
        assert (info.category, info.preemptible) == (category, preemptible), reason


def test_zero_nodes_and_garbage_do_not_raise() -> None:
    assert parse("0/0 nodes are available: ").nodes == 0
    assert parse("0/3 nodes are available: garbage without a dot").unparsed == "garbage without a dot"
    assert not parse("").is_fit_error

"""JSON Patch ops as text edits (linter.textedit): the new lines take the indentation the document
uses where they go, nothing else changes, and the result reads as the patched object."""

from __future__ import annotations

import difflib
import io
from typing import Any

import jsonpatch
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from linter.fixer import FixError, fix_document
from linter.textedit import Indent, Unsupported, document_indent, patch_text, scalar
from policies.types import PatchOp


def _changed(before: str, after: str) -> list[str]:
    """The original lines the edit replaced or deleted."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [line for tag, i1, i2, _, _ in matcher.get_opcodes() if tag in ("replace", "delete") for line in old[i1:i2]]


def _lines_not_kept(before: str, after: str) -> int:
    """How many original lines a minimal diff changes or deletes: those outside a longest common
    subsequence of the lines (difflib's matching is greedy and may count more among equal lines)."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    row = [0] * (len(new) + 1)
    for line in old:
        diagonal = 0
        for j, other in enumerate(new, start=1):
            diagonal, row[j] = row[j], diagonal + 1 if line == other else max(row[j], row[j - 1])
    return len(old) - row[-1]


def _patched(text: str, ops: list[PatchOp]) -> Any:
    return jsonpatch.apply_patch(yaml.safe_load(text), [op.to_dict() for op in ops])


TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # dashes under their key (offset 0), as kubectl writes them
        (
            "spec:\n  containers:\n  - name: a\n    image: x\n",
            "spec:\n  containers:\n  - name: a\n    image: x\n  tolerations:\n  - key: nvidia.com/gpu\n"
            "    operator: Exists\n    effect: NoSchedule\n",
        ),
        # dashes indented (offset 2)
        (
            "spec:\n  containers:\n    - name: a\n      image: x\n",
            "spec:\n  containers:\n    - name: a\n      image: x\n  tolerations:\n    - key: nvidia.com/gpu\n"
            "      operator: Exists\n      effect: NoSchedule\n",
        ),
        # four-space mappings, dashes at offset 4, three spaces after the dash
        (
            "spec:\n    containers:\n        -  name: a\n           image: x\n",
            "spec:\n    containers:\n        -  name: a\n           image: x\n    tolerations:\n"
            "        -  key: nvidia.com/gpu\n           operator: Exists\n           effect: NoSchedule\n",
        ),
    ],
    ids=["offset-0", "offset-2", "four-spaces"],
)
def test_new_lines_follow_the_documents_own_indentation(text: str, expected: str) -> None:
    ops = [PatchOp("add", "/spec/tolerations", [TOLERATION])]
    assert patch_text(text, ops) == expected
    assert _changed(text, expected) == []


def test_the_parents_own_children_decide_over_the_rest_of_the_document() -> None:
    # The pod spec's lists have their dashes at offset 2; the container's own lists at 0.
    text = (
        "spec:\n  containers:\n    - name: a\n      args:\n      - x\n      env:\n      - name: A\n"
        "  volumes:\n    - name: v\n"
    )
    out = patch_text(text, [PatchOp("add", "/spec/tolerations", [TOLERATION])])
    assert out.endswith("  tolerations:\n    - key: nvidia.com/gpu\n      operator: Exists\n      effect: NoSchedule\n")


def test_everything_but_the_new_lines_is_kept_byte_for_byte() -> None:
    text = (
        "# header comment\n"
        "apiVersion: v1\n"
        "kind: Pod\n"
        "metadata: { name: p }   \n"  # flow style with inner spaces and trailing spaces
        "spec:\n"
        "  containers:\n"
        "  - name: a\n"
        "    command:\n"
        "    - \"bash run.sh --one;\n"  # a multi-line double-quoted scalar
        "       python3 serve.py\"\n"
        "    - a plain scalar\n"
        "      over two lines\n"
        "    image: 'x:1'  # quoted, with a comment\n"
        "    resources:\n"
        "      limits:\n"
        "        nvidia.com/gpu: 1\n"
        "\n"
        "  # a trailing comment in the pod spec\n"
    )
    out = patch_text(text, [PatchOp("add", "/spec/tolerations", [TOLERATION])])
    assert _changed(text, out) == []
    added = [line for line in out.splitlines() if line not in text.splitlines()]
    assert added == ["  tolerations:", "  - key: nvidia.com/gpu", "    operator: Exists", "    effect: NoSchedule"]
    # The new key goes after the mapping's last value, before the blank line and comment after it.
    assert "        nvidia.com/gpu: 1\n  tolerations:\n" in out


def test_an_empty_flow_mapping_becomes_a_block_changing_only_its_line() -> None:
    text = "spec:\n  resources: {}  # none yet\n  image: x\n"
    out = patch_text(text, [PatchOp("add", "/spec/resources/limits", {"nvidia.com/gpu": 1})])
    assert out == "spec:\n  resources:  # none yet\n    limits:\n      nvidia.com/gpu: 1\n  image: x\n"
    assert _changed(text, out) == ["  resources: {}  # none yet\n"]


def test_an_empty_flow_sequence_becomes_a_block() -> None:
    text = "spec:\n  tolerations: []\n"
    out = patch_text(text, [PatchOp("add", "/spec/tolerations/-", TOLERATION)])
    assert out == "spec:\n  tolerations:\n  - key: nvidia.com/gpu\n    operator: Exists\n    effect: NoSchedule\n"


def test_members_of_flow_collections_are_added_on_their_line() -> None:
    text = "a: [1, 2]\nb: {x: [3], z: 1,}\nc: [\n  4,\n  5\n]\n"
    ops = [
        PatchOp("add", "/a/0", 0),
        PatchOp("add", "/b/x/-", {"k": "v"}),
        PatchOp("add", "/b/y", []),
        PatchOp("add", "/c/-", "yes"),
    ]
    out = patch_text(text, ops)
    assert out == "a: [0, 1, 2]\nb: {x: [3, {k: v}], z: 1, y: [],}\nc: [\n  4,\n  5, \"yes\"\n]\n"
    assert yaml.safe_load(out) == _patched(text, ops)


def test_line_endings_and_a_missing_final_newline_are_kept() -> None:
    text = "a:\r\n  b: 1\nc:\r\n  d: 2"
    out = patch_text(text, [PatchOp("add", "/a/x", 1), PatchOp("add", "/c/y", {"z": 2})])
    assert out == "a:\r\n  b: 1\n  x: 1\nc:\r\n  d: 2\n  y:\n    z: 2"


def test_crlf_documents_get_crlf_lines() -> None:
    text = "a:\r\n  b: 1\r\n"
    assert patch_text(text, [PatchOp("add", "/a/c", [1])]) == "a:\r\n  b: 1\r\n  c:\r\n  - 1\r\n"


def test_block_scalars_keep_their_content_and_new_keys_follow_it() -> None:
    text = "a:\n  s: |\n    text\n    # not a comment\n\n  # a comment\nb: 1\n"
    out = patch_text(text, [PatchOp("add", "/a/n", "v")])
    assert out == "a:\n  s: |\n    text\n    # not a comment\n  n: v\n\n  # a comment\nb: 1\n"
    assert yaml.safe_load(out) == {"a": {"s": "text\n# not a comment\n", "n": "v"}, "b": 1}


def test_items_are_inserted_removed_and_replaced_in_rfc6902_order() -> None:
    text = "items:\n- a\n- b   # bee\n- c\n"
    ops = [
        PatchOp("add", "/items/1", "x"),
        PatchOp("remove", "/items/0"),
        PatchOp("replace", "/items/1", "B"),
        PatchOp("add", "/items/-", {"k": "v"}),
    ]
    out = patch_text(text, ops)
    assert out == "items:\n- x\n- B   # bee\n- c\n- k: v\n"
    assert yaml.safe_load(out) == _patched(text, ops)


def test_a_replaced_scalar_keeps_its_quoting() -> None:
    text = "limits:\n  a: \"2\"\n  b: '2'\n  c: 2  # two\n"
    ops = [PatchOp("replace", "/limits/a", "1"), PatchOp("replace", "/limits/b", "1"), PatchOp("replace", "/limits/c", 1)]
    assert patch_text(text, ops) == "limits:\n  a: \"1\"\n  b: '1'\n  c: 1  # two\n"


def test_new_strings_use_the_documents_quotes() -> None:
    assert patch_text("a: 'x'\n", [PatchOp("add", "/b", "1")]) == "a: 'x'\nb: '1'\n"
    assert patch_text("a: \"x\"\n", [PatchOp("add", "/b", "1")]) == "a: \"x\"\nb: \"1\"\n"


@pytest.mark.parametrize(
    "value",
    ["1", "1.5", "yes", "no", "on", "off", "y", "null", "~", "", "0o10", "0x1F", "1_000", "12:30", "2024-01-01",
     ".inf", "- x", "a: b", "a #b", "#c", "@x", "`x", "!x", "&x", "*x", "[x]", "{x}", "x,y", "'q'", '"q"', " x",
     "x ", "a\nb", "tab\there", "\x7f", "\u2028", "é", "nvidia.com/gpu", "/dev/shm", "15Gi", "=", "<<", "?x", "%x"],
)
def test_scalars_read_back_the_same_in_yaml_1_1_and_1_2(value: str) -> None:
    for quote in ("'", '"'):
        text = scalar(value, quote)
        assert yaml.safe_load(f"k: {text}\n") == {"k": value}, text
        assert YAML(typ="safe", pure=True).load(f"k: {text}\n") == {"k": value}, text
        assert yaml.safe_load(f"k: [{text}]\n") == {"k": [value]}, text


def test_plain_where_that_is_unambiguous() -> None:
    assert [scalar(v) for v in ("nvidia.com/gpu", "Exists", "/dev/shm", "15Gi", 1, True, None)] == [
        "nvidia.com/gpu", "Exists", "/dev/shm", "15Gi", "1", "true", "null",
    ]


def test_collections_with_an_anchor_or_a_tag_get_their_siblings_columns() -> None:
    # A collection's start mark is at its anchor or tag, on its key's line; the dashes are not.
    text = "key: &x\n- a\nb: !!seq\n  - c\nm: &m\n    k: 1\n"
    ops = [PatchOp("add", "/key/-", "b"), PatchOp("add", "/b/0", "z"), PatchOp("add", "/m/l", 2)]
    assert patch_text(text, ops) == "key: &x\n- a\n- b\nb: !!seq\n  - z\n  - c\nm: &m\n    k: 1\n    l: 2\n"


def test_ops_through_an_alias_are_not_text_edits() -> None:
    with pytest.raises(Unsupported):
        patch_text("base: &b\n  x: 1\nuse: *b\n", [PatchOp("add", "/use/y", 2)])


def test_a_new_first_item_of_a_nested_sequence_takes_the_outer_dash() -> None:
    text = "a:\n    - - x\n      - y\n    - b: 1\n"
    out = patch_text(text, [PatchOp("add", "/a/0/0", "w")])
    assert out == "a:\n    - - w\n      - x\n      - y\n    - b: 1\n"
    assert _changed(text, out) == ["    - - x\n"]


def test_a_replaced_block_value_takes_the_lines_of_the_old_one() -> None:
    text = "a:\n  - k: old  # old\n    l:\n    - 1\n    - 2\n  - m: 3\n"
    ops = [PatchOp("replace", "/a/0/l", {"n": ["x"]}), PatchOp("replace", "/a/0/k", ["new"])]
    out = patch_text(text, ops)
    assert out == "a:\n  - k:\n    - new\n    l:\n      n:\n      - x\n  - m: 3\n"
    assert yaml.safe_load(out) == _patched(text, ops)


def test_what_text_edits_cannot_do_falls_back_to_the_round_trip_writer() -> None:
    # A value spanning lines inside a flow collection is not replaced in place; ruamel rewrites the
    # document, in the document's own indentation (4-space mappings, dashes at offset 2).
    text = "spec:\n    a: {k: [1,\n      2]}\n    b:\n      - x\n"
    op = PatchOp("replace", "/spec/a/k", "z")
    with pytest.raises(Unsupported):
        patch_text(text, [op])
    assert fix_document(text, [op]) == "spec:\n    a: {k: z}\n    b:\n      - x\n"


def test_the_round_trip_writer_is_refused_where_yaml_1_1_would_read_it_differently() -> None:
    # ruamel writes YAML 1.2, where `on` is a string; kubectl (YAML 1.1) would read a boolean key.
    with pytest.raises(FixError, match=r"YAML 1\.1"):
        fix_document("a: {k: [1,\n  2]}\n", [PatchOp("replace", "/a/k", 0), PatchOp("add", "/on", 0)])


def test_document_indent_reads_mapping_offset_and_gap() -> None:
    assert document_indent("a:\n    b:\n      -   c: 1\n") == Indent(mapping=4, offset=2, gap=4)
    assert document_indent("a:\n  b:\n  - c\n") == Indent(mapping=2, offset=0, gap=2)
    assert document_indent("a: 1\n") == Indent()


# ---------------------------------------------------------------- property: any layout, any ops

_KEYS = st.sampled_from(["a", "b", "name", "nvidia.com/gpu", "on", "1", "x y", "key"])
_LEAVES = st.one_of(
    st.integers(-5, 5),
    st.sampled_from(["v", "yes", "1", "", "a: b", "# c", "multi\nline", "'", "- d", "null", "15Gi"]),
    st.booleans(),
    st.none(),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_KEYS, inner, max_size=3)),
    max_leaves=12,
)
_DOCS = st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=4)


def _containers(value: Any, path: str = "", in_list: bool = False) -> list[tuple[str, Any, bool]]:
    """(pointer, container, whether it is a list's item) of every container in ``value``."""
    out: list[tuple[str, Any, bool]] = []
    if isinstance(value, dict | list):
        out.append((path, value, in_list))
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in pairs:
            token = str(key).replace("~", "~0").replace("/", "~1")
            out += _containers(child, f"{path}/{token}", isinstance(value, list))
    return out


@st.composite
def _cases(draw: st.DrawFn) -> tuple[str, list[PatchOp], int | None]:
    doc = draw(_DOCS)
    mapping, offset = draw(st.integers(2, 4)), draw(st.integers(0, 3))
    gap = draw(st.integers(2, 3))
    dumper = YAML()
    dumper.indent(mapping=mapping, sequence=offset + gap, offset=offset)
    dumper.width = 4096
    in_flow = draw(st.booleans())
    if in_flow:
        dumper.default_flow_style = None  # collections of scalars in flow style: `[1, 2]`, `{a: 1}`
    out = io.StringIO()
    dumper.dump(doc, out)
    text = out.getvalue()
    assume(yaml.safe_load(text) == doc)  # the same object in YAML 1.1 (ruamel writes 1.2: `on` is a string)
    ops: list[PatchOp] = []
    # An op filling an empty `{}`/`[]` changes its line; one replacing a value changes the old
    # value's lines (then there is no bound).
    bound: int | None = 0
    for _ in range(draw(st.integers(1, 4))):
        state = jsonpatch.apply_patch(doc, [op.to_dict() for op in ops])
        path, container, in_list = draw(st.sampled_from(_containers(state)))
        value = draw(_VALUES)
        # a new first item of `- - x` moves the outer dash, a new flow member goes on its line:
        # one changed line
        if (in_flow or not container or (in_list and isinstance(container, list))) and bound is not None:
            bound += 1
        if isinstance(container, dict):
            key = draw(_KEYS)
            bound = None if key in container else bound
            ops.append(PatchOp("add", f"{path}/{key.replace('~', '~0').replace('/', '~1')}", value))
        else:
            index = draw(st.sampled_from(["-", *[str(i) for i in range(len(container) + 1)]]))
            ops.append(PatchOp("add", f"{path}/{index}", value))
    return text, ops, bound


@pytest.mark.slow  # a property test
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_any_layout_gets_exactly_the_patch_and_keeps_its_lines(case: tuple[str, list[PatchOp], int | None]) -> None:
    text, ops, bound = case
    out = patch_text(text, ops)  # one-line flow collections and blocks without aliases: always a text edit
    expected = _patched(text, ops)
    assert yaml.safe_load(out) == expected, out
    assert YAML(typ="safe", pure=True).load(out) == expected, out
    assert bound is None or _lines_not_kept(text, out) <= bound, (text, out)
    assert fix_document(text, ops) == out


ANCHORED = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j}
spec:
  tasks:
  - name: master
    template:
      spec: &task-spec
        containers:
        - {name: c, image: x, resources: &res {limits: {nvidia.com/gpu: 8}}}
  - name: worker
    template:
      spec: *task-spec
  - name: cpu
    template:
      spec:
        containers:
        - {name: c, image: x, resources: *res}
"""


def test_the_same_edit_at_an_anchor_and_its_alias_is_made_once_in_the_anchored_text() -> None:
    # nebius/ml-cookbook's Volcano job shares one pod spec (&task-spec) between its two tasks; the
    # taint fix asks the same toleration of both.
    ops = [PatchOp("add", f"/spec/tasks/{i}/template/spec/tolerations", [TOLERATION]) for i in (0, 1)]
    fixed = patch_text(ANCHORED, ops)
    added = [line for line in difflib.ndiff(ANCHORED.splitlines(), fixed.splitlines()) if line.startswith("+ ")]
    removed = [line for line in difflib.ndiff(ANCHORED.splitlines(), fixed.splitlines()) if line.startswith("- ")]
    assert removed == [] and len(added) == 4 and "*task-spec" in fixed and "&task-spec" in fixed
    expected = jsonpatch.apply_patch(yaml.safe_load(ANCHORED), [op.to_dict() for op in ops])
    assert yaml.safe_load(fixed) == expected
    assert fix_document(ANCHORED, ops) == fixed


@pytest.mark.parametrize("indices", [(0,), (1,)])
def test_an_edit_of_an_anchored_node_at_only_some_of_its_places_is_not_a_text_edit(indices: tuple[int, ...]) -> None:
    ops = [PatchOp("add", f"/spec/tasks/{i}/template/spec/tolerations", [TOLERATION]) for i in indices]
    with pytest.raises(Unsupported, match="anchored node"):
        patch_text(ANCHORED, ops)


def test_an_anchor_shared_with_a_cpu_task_is_not_edited_for_the_gpu_tasks_alone() -> None:
    ops = [PatchOp("add", f"/spec/tasks/{i}/template/spec/containers/0/resources/requests", {"nvidia.com/gpu": 8})
           for i in (0, 1)]  # through &task-spec (twice) and &res, which the cpu task names as well
    with pytest.raises(Unsupported):
        patch_text(ANCHORED, ops)


def test_a_fix_at_one_place_of_an_aliased_node_is_refused_not_spread() -> None:
    # The round-trip writer would change the anchored node, so the alias's place too (the cpu task
    # would ask for GPUs): the fix is refused with the reason.
    op = PatchOp("add", "/spec/tasks/0/template/spec/containers/0/resources/requests", {"nvidia.com/gpu": 8})
    with pytest.raises(FixError, match="YAML alias repeats a node the fix changes"):
        fix_document(ANCHORED, [op])

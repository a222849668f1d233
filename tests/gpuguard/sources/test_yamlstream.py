"""The streaming loader: the same data and positions as PyYAML's composed nodes, hostile documents
refused while parsing in bounded time and memory, and parsing resumed at the next document."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpuguard.sources import yamlstream
from gpuguard.sources.loader import parse_text
from gpuguard.sources.yamlsafe import InputError
from gpuguard.sources.yamlstream import MAX_OBJECT_CHARS, ListEnd, Unit, stream
from linter.positions import locate
from policies import pointer
from tests.support.paths import CORPUS, FIXTURES


class _Reference(yaml.CSafeLoader):
    pass


_Reference.add_constructor("tag:yaml.org,2002:timestamp", _Reference.construct_yaml_str)  # type: ignore[type-var]

SNIPPETS = [
    "a: 0o10\nb: 1_000\nc: 1:30\nd: yes\ne: 2024-01-01T10:00:00Z\nf: !!binary aGVsbG8=\ng: .inf\nh: ~\ni: -0x1F\n",
    "base: &b {x: 1, y: 2}\nother: &o {y: 3, z: 4}\nm:\n  <<: [*b, *o]\n  x: 9\nn: {<<: *b, w: 0}\n",
    "x: !!set {a, b}\ny: !!omap [a: 1, b: 2]\nz: !!pairs [a: 1, a: 2]\n",
    "? 1\n: int\n'2': str\n~: null key\n=: value key\ntrue: bool key\n",
    "s: !!str 123\ni: !!int '7'\nf: !!float '1e3'\nq: \"quoted: yes\"\nl: |\n  line\n  two\nk: >-\n  folded\n  text\n",
    "--- !!str\n--- \n---\na: [1, {b: [2, 3]}, [4]]\n...\n--- {inline: doc}\n",
    "list: &l [1, 2]\nagain: *l\nnested: {deep: {deeper: *l}}\n",
    "a: 'single'\nb: \"esc\\taped\\u00e9\"\nc: plain text, a:colon # comment\n",
]


def _reference(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=_Reference))


def _ours(text: str) -> list[Any]:
    items = list(stream(text, "t.yaml", stream_lists=False))
    assert not [i for i in items if not isinstance(i, Unit)], items
    return [i.data for i in items if isinstance(i, Unit)]


@pytest.mark.parametrize("text", SNIPPETS)
def test_same_data_as_pyyaml(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _ours(text) == _reference(text)
    monkeypatch.setattr(yamlstream, "_PURE", True)
    assert _ours(text) == _reference(text)


def _pointers(value: Any, prefix: str = "") -> list[str]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str):
                out += _pointers(v, f"{prefix}/{pointer.escape(k)}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _pointers(v, f"{prefix}/{i}")
    return out


def _node_locate(node: yaml.Node, path: str) -> tuple[int, int]:
    """The positions gpuguard 0.1 computed from PyYAML's composed nodes (the reference)."""
    where = (node.start_mark.line + 1, node.start_mark.column + 1)
    for token in pointer.split(path):
        if isinstance(node, yaml.MappingNode):
            pairs = [(k, v) for k, v in node.value if isinstance(k.value, str) and k.value == token]
            if not pairs:
                return where
            key, node = pairs[-1]
            where = (key.start_mark.line + 1, key.start_mark.column + 1)
        elif isinstance(node, yaml.SequenceNode):
            if not token.isdigit() or int(token) >= len(node.value):
                return where
            node = node.value[int(token)]
            where = (node.start_mark.line + 1, node.start_mark.column + 1)
        else:
            return where
    return where


def _corpus_files() -> list[Path]:
    return sorted((CORPUS / "real").glob("*.y*ml")) + sorted((FIXTURES / "lint").glob("*.y*ml"))


def test_corpus_data_and_every_position_agree_with_pyyaml() -> None:
    checked = 0
    for path in _corpus_files():
        text = path.read_text(encoding="utf-8")
        nodes = list(yaml.compose_all(text, Loader=_Reference))
        docs = parse_text(text, str(path)).documents
        assert [d.data for d in docs] == _reference(text), path.name
        for doc, node in zip(docs, nodes, strict=True):
            assert doc.line == node.start_mark.line + 1
            for ptr in _pointers(doc.data):
                for probe in (ptr, ptr + "/missing"):
                    assert locate(doc.positions, probe) == _node_locate(node, probe), (path.name, probe)
                    checked += 1
    assert checked > 10_000


def _errors(text: str) -> list[tuple[int, str]]:
    return [(i.line, i.message) for i in stream(text, "t.yaml") if isinstance(i, InputError)]


def _bounded(text: str, seconds: float = 2.0, mib: int = 16) -> list[tuple[int, str]]:
    tracemalloc.start()
    start = time.perf_counter()
    try:
        errors = _errors(text)
    finally:
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < seconds, f"{elapsed:.1f} s"
    assert peak < mib * 1024 * 1024, f"{peak >> 20} MiB"
    return errors


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: " + "[" * 4_000_000, "nesting deeper than 200 levels"),
        ("a:\n" + "".join("  " * i + "- x:\n" for i in range(1, 400)), "nesting deeper than 200 levels"),
        ("a: &a [x]\n" + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 12)}]\n"
                                 for i in range(12)), "alias bomb"),
        ("d: &d " + "[" * 120 + "]" * 120 + "\nc: " + "[" * 100 + "*d" + "]" * 100 + "\n",
         "nesting deeper than 200 levels"),
    ],
    ids=["deep-flow-4M", "deep-block", "alias-bomb", "deep-through-alias"],
)
def test_hostile_documents_are_refused_while_parsing(text: str, expected: str) -> None:
    errors = _bounded(text)
    # libyaml's own limit on flow nesting (1000 levels) may speak first; either way, one clean error.
    assert len(errors) == 1 and (expected in errors[0][1] or "exceeded maximum nesting depth" in errors[0][1]), errors


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a: 1\nb:\n  c: 1\n  c: 2\n", 4, "duplicate key 'c' (first at line 3)"),
        ("a: {x: 1, y: 2, x: 3}\n", 1, "duplicate key 'x' (first at line 1)"),
        ("a: &x 1\nb: &x 2\n", 2, "found duplicate anchor 'x'"),
        ("a: *nope\n", 1, "found undefined alias 'nope'"),
        ("a: !foo 1\n", 1, "could not determine a constructor for the tag '!foo'"),
        ("? [a]\n: 1\n", 1, "found unhashable key (while constructing a mapping started at line 1)"),
        ("a: " + "9" * 5000 + "\n", 1, "cannot read '9999999999999999999999999999999999999999…' as tag:yaml.org,2002:int"),
        ("a: <<\n", 1, "could not determine a constructor for the tag 'tag:yaml.org,2002:merge'"),
        ("m:\n  <<: [1]\n", 2, "expected a mapping or list of mappings for merging"),
        ("x: " + "y" * 20_000 + "\x00tail\n", 1, "invalid YAML: unacceptable character #x0000"),
    ],
)
def test_bad_documents_are_input_errors_with_lines(text: str, line: int, message: str) -> None:
    ((got_line, got),) = _errors(text)
    assert got_line == line and message in got, got


def test_parsing_resumes_at_the_next_document_with_absolute_positions() -> None:
    big = "data:\n" + "".join(f"  k{i}: {'v' * 100}\n" for i in range(40_000))  # ~4.4 MiB
    text = (
        "a: 1\na: 2\n"  # duplicate key: the rest of this document is not read
        + big
        + "---\n--- {x: 1, x: 2}\n"  # an inline document with a duplicate
        + "--- \napiVersion: v1\nkind: ConfigMap\nmetadata: {name: after}\n"
        + "---\nkind: ConfigMap\n" + big  # too large
        + "---\nlast: [1, 2]\n"
    )
    items = list(stream(text, "t.yaml"))
    lines = text.splitlines()
    errors = [(i.line, i.message.split(";")[0]) for i in items if isinstance(i, InputError)]
    too_large_at = len(lines) - 1 - lines[::-1].index("kind: ConfigMap") + 1
    assert errors == [
        (2, "duplicate key 'a' (first at line 1)"),
        (lines.index("--- {x: 1, x: 2}") + 1, "duplicate key 'x' (first at line " f"{lines.index('--- {x: 1, x: 2}') + 1})"),
        (too_large_at, "document is 4.2 MiB"),
    ]
    units = [i for i in items if isinstance(i, Unit)]
    assert [u.data for u in units] == [None, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}},
                                       {"last": [1, 2]}]
    after = units[1]
    assert after.line == lines.index("apiVersion: v1") + 1
    assert locate(after.positions, "/metadata/name") == (lines.index("metadata: {name: after}") + 1, 12)
    assert locate(units[2].positions, "/last/1") == (len(lines), 11)
    assert [u.doc_index for u in units] == [1, 3, 5]


@pytest.mark.parametrize("newline", ["\r", "\x85", "\u2028", "\u2029", "\r\n"])
def test_every_yaml_line_break_counts_as_libyaml_counts_it(newline: str) -> None:
    text = newline.join(["a: 1", "---", "b:", "  c: [1,", "    2]", "---", "d: {e: 1}", ""])
    units = [i for i in stream(text, "t.yaml") if isinstance(i, Unit)]
    assert [u.data for u in units] == [{"a": 1}, {"b": {"c": [1, 2]}}, {"d": {"e": 1}}]
    assert [u.line for u in units] == [1, 3, 7]
    assert locate(units[1].positions, "/b/c/1") == (5, 5)
    assert locate(units[2].positions, "/d/e") == (7, 5)
    assert [u.segment.start for u in units] == [0, 2, 6]


def _list(items: int, kind: str = "List", bad_item: int | None = None) -> str:
    out = ["apiVersion: v1\nitems:\n"]
    for i in range(items):
        if i == bad_item:
            out.append(f"- apiVersion: v1\n  kind: Pod\n  metadata: {{name: p{i}, name: again}}\n")
        else:
            out.append(f"- apiVersion: v1\n  kind: Pod\n  metadata: {{name: p{i}}}\n")
    out.append(f"kind: {kind}\n")
    return "".join(out)


def test_list_items_are_handed_out_one_at_a_time_and_stand_at_its_end() -> None:
    items = list(stream(_list(3), "t.yaml"))
    assert [(type(i).__name__, getattr(i, "prefix", None)) for i in items] == [
        ("Unit", "/items/0"), ("Unit", "/items/1"), ("Unit", "/items/2"), ("ListEnd", None)]
    end = items[-1]
    assert isinstance(end, ListEnd) and end.stands and end.header == {"apiVersion": "v1", "items": [], "kind": "List"}
    first = items[0]
    assert isinstance(first, Unit) and first.data["metadata"] == {"name": "p0"} and first.line == 3
    assert locate(first.positions, "/metadata/name") == (5, 14)


def test_a_document_with_items_that_is_no_list_is_parsed_again_whole() -> None:
    text = "a: 0\n---\n" + _list(3, kind="PodList") + "---\nz: 1\n"
    items = list(stream(text, "t.yaml"))
    ends = [i for i in items if isinstance(i, ListEnd)]
    assert len(ends) == 1 and not ends[0].stands and ends[0].error is None
    whole = [i for i in items if isinstance(i, Unit) and not i.streamed]
    assert [u.data for u in whole] == _reference(text)
    assert [u.doc_index for u in whole] == [0, 1, 2]
    assert locate(whole[1].positions, "/items/2/metadata/name") == (13, 14)


def test_one_bad_item_of_a_list_does_not_lose_the_others() -> None:
    items = list(stream(_list(4, bad_item=1), "t.yaml"))
    assert [i.prefix for i in items if isinstance(i, Unit)] == ["/items/0", "/items/2", "/items/3"]
    (error,) = [i for i in items if isinstance(i, InputError)]
    assert error.line == 8 and error.message.startswith("duplicate key 'name' (first at line 8)")
    assert isinstance(items[-1], ListEnd) and items[-1].stands


def test_an_item_over_the_object_size_is_refused_alone() -> None:
    huge = "- apiVersion: v1\n  kind: ConfigMap\n  data:\n" + "".join(
        f"    k{i}: {'v' * 100}\n" for i in range(MAX_OBJECT_CHARS // 100))
    text = "apiVersion: v1\nitems:\n- {apiVersion: v1, kind: Pod}\n" + huge + "- {apiVersion: v1, kind: Pod}\nkind: List\n"
    items = list(stream(text, "t.yaml"))
    assert [i.prefix for i in items if isinstance(i, Unit)] == ["/items/0", "/items/2"]
    (error,) = [i for i in items if isinstance(i, InputError)]
    assert error.line == 4 and error.message.startswith("items[1] is over 3 MiB")
    assert isinstance(items[-1], ListEnd) and items[-1].stands


def test_unrendered_template_in_a_document_is_named_as_such() -> None:
    text = "a: 1\n---\nkind: ConfigMap\ndata:\n  {{ .Values.key }}: 1\n  x: 1\n"
    assert _errors(text) == [(5, "unrendered template (Helm/Go template syntax `{{` at line 5); "
                                 "render it with `helm template` first")]


_ALPHABET = "ab01 \n\t-:[]{},&*!?|>'\"#%@`~.<=\\x\r\x85\u2028é"


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=_ALPHABET, max_size=120))
def test_any_text_gives_documents_or_input_errors_never_an_exception(text: str) -> None:
    items = list(stream(text, "t.yaml"))
    assert all(isinstance(i, Unit | ListEnd | InputError) for i in items)
    try:
        reference = _reference(text)
    except (yaml.YAMLError, ValueError, TypeError, KeyError, RecursionError):
        return
    if not any(isinstance(i, InputError) for i in items):  # PyYAML allows duplicates; gpuguard does not
        assert [i.data for i in stream(text, "t.yaml", stream_lists=False) if isinstance(i, Unit)] == reference


_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
_DATA = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=8), inner, max_size=4), max_leaves=30)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(_DATA, st.booleans(), st.sampled_from(["\n", "\r\n"]))
@example({"items": [1, {"a": [2]}], "kind": "NoList"}, False, "\n")
@example({"items": [1, {"a": [2]}], "kind": "List"}, True, "\r\n")
def test_dumped_data_and_every_position_match_pyyaml(data: Any, flow: bool, newline: str) -> None:
    text = "x: 0\n---\n" + yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True)
    text = text.replace("\n", newline)
    items = list(stream(text, "t.yaml"))
    if isinstance(data, dict) and data.get("kind") == "List" and isinstance(data.get("items"), list):
        streamed = [i.data for i in items if isinstance(i, Unit) and i.streamed]
        assert streamed == data["items"] and isinstance(items[-1], ListEnd) and items[-1].stands
        return
    units = [i for i in items if isinstance(i, Unit) and not i.streamed]
    assert [u.data for u in units] == _reference(text)
    node = list(yaml.compose_all(text, Loader=_Reference))[1]
    for ptr in _pointers(units[1].data):
        assert locate(units[1].positions, ptr) == _node_locate(node, ptr), ptr

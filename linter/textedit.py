"""Apply JSON Patch ops to one YAML document as small text edits, keeping every other byte.

The document's parse events (libyaml) give the position of every node.  The ops are applied in
order to a view of that tree; the view then becomes text edits:

- a new key goes on new lines after the last line of its mapping, at the column of its siblings;
- a new item goes on new lines before the item it precedes (or after the last item), at the dash
  column of its siblings;
- inside a flow collection (``{a: 1}``, ``[a]``) the new member is written in flow style on the
  same line; an empty flow collection that is the last thing on its line in a block mapping
  (``resources: {}``) becomes a block, changing only that line;
- a replaced scalar changes only its own characters, in its own quoting style where it allows; a
  replaced block value, the lines it occupies;
- a removed member or item deletes exactly the lines it occupies.

New block content takes the indentation the document itself uses near the insertion point:
mapping indent, dash offset (of a sequence under its key) and the gap after the dash, from the
parent's own children first, then from its whole subtree, then from the whole document.  Nothing
else is re-serialised, so comments, quotes, flow style, multi-line scalars, trailing spaces, line
endings and the final newline stay as they were.

What cannot be done this way exactly (an op through an alias, an item or member sharing its line
with something other than the dashes of outer items, a multi-line value inside a flow collection
replaced, an exotic line break) raises ``Unsupported``; the caller then falls back to the
round-trip writer.  The caller checks the result against jsonpatch either way.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml import events

from policies import pointer
from policies.shapes import index_of, small_int
from policies.types import PatchOp


class Unsupported(Exception):
    """The ops cannot be applied as text edits; use the round-trip writer."""


@dataclass(slots=True, eq=False)
class Node:
    """One node of the document with its event marks (0-based line and column)."""

    kind: str  # "map", "seq", "scalar" or "alias"
    start: tuple[int, int]
    end: tuple[int, int]
    flow: bool = False
    style: str = ""  # a scalar's: "" plain, "'", '"', "|", ">"
    value: str = ""  # a scalar's text, unresolved
    anchor: str = ""  # the anchor it defines (``&name``), if any
    target: Node | None = None  # an alias's anchored node
    aliases: int = 0  # how many aliases name this (anchored) node
    keys: list[Node] = field(default_factory=list)
    values: list[Node] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)

    def children(self) -> list[Node]:
        return self.values if self.kind == "map" else self.items


def _loader() -> type[Any]:
    return yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader


def parse(text: str) -> Node:
    """The node tree of a one-document text, from its parse events."""
    stack: list[Node] = []
    root: Node | None = None
    documents = 0
    anchors: dict[str, Node] = {}  # an alias names the latest node anchored so before it
    try:
        for event in yaml.parse(text, Loader=_loader()):
            if isinstance(event, events.DocumentStartEvent):
                documents += 1
                continue
            first, last = event.start_mark, event.end_mark
            if first is None or last is None:  # pragma: no cover - libyaml marks every event
                raise Unsupported("an event without a position")
            if isinstance(event, events.MappingEndEvent | events.SequenceEndEvent):
                done = stack.pop()
                done.end = (last.line, last.column)
                continue
            start = (first.line, first.column)
            end = (last.line, last.column)
            if isinstance(event, events.ScalarEvent):
                node = Node("scalar", start, end, style=event.style or "", value=event.value)
            elif isinstance(event, events.AliasEvent):
                node = Node("alias", start, end, target=anchors.get(event.anchor or ""))
                if node.target is not None:
                    node.target.aliases += 1
            elif isinstance(event, events.MappingStartEvent | events.SequenceStartEvent):
                kind = "map" if isinstance(event, events.MappingStartEvent) else "seq"
                node = Node(kind, start, end, flow=bool(event.flow_style))
            else:
                continue
            anchor = getattr(event, "anchor", None)
            if anchor and node.kind != "alias":
                node.anchor, anchors[anchor] = anchor, node
            if stack:
                parent = stack[-1]
                if parent.kind == "seq":
                    parent.items.append(node)
                elif len(parent.keys) == len(parent.values):
                    parent.keys.append(node)
                else:
                    parent.values.append(node)
            else:
                root = node
            if node.kind in ("map", "seq"):
                stack.append(node)
    except yaml.YAMLError as exc:
        raise Unsupported(f"libyaml cannot read the document: {exc}") from None
    if root is None or documents != 1:
        raise Unsupported("not exactly one document")
    return root


# ---------------------------------------------------------------- the document's own layout


@dataclass(frozen=True, slots=True)
class Indent:
    """How a document nests blocks: a mapping's keys ``mapping`` columns right of its parent key,
    a sequence's dashes ``offset`` columns right of its parent key, an item ``gap`` columns right
    of its dash (ruamel's ``indent(mapping, sequence=offset + gap, offset)``)."""

    mapping: int = 2
    offset: int = 0
    gap: int = 2


@dataclass(slots=True)
class _Samples:
    mapping: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    gap: list[int] = field(default_factory=list)

    def extend(self, other: _Samples) -> None:
        self.mapping += other.mapping
        self.offset += other.offset
        self.gap += other.gap


def _pick(values: list[int]) -> int | None:
    """The most used value; among equals, the last one seen (the nearest to an insertion at the end)."""
    if not values:
        return None
    counts = Counter(values)
    best = max(counts.values())
    return next(v for v in reversed(values) if counts[v] == best)


class Layout:
    """The lines of a document and where its nodes sit in them."""

    def __init__(self, text: str, root: Node) -> None:
        self.lines = text.split("\n")
        self.root = root
        self._document: _Samples | None = None

    def line(self, index: int) -> str:
        return self.lines[index].rstrip("\r")

    def seq_dash(self, seq: Node) -> int:
        """The dash column of a block sequence (its start mark is at its anchor or tag, if any)."""
        col = seq.start[1]
        if self.line(seq.start[0])[col : col + 1] == "-" or not seq.items:
            return col
        first = seq.items[0]
        line = self.line(first.start[0])
        before = line[: first.start[1]].rstrip(" ")
        if not before.endswith("-"):
            raise Unsupported("the sequence's first dash is not on its first item's line")
        return len(before) - 1

    def dash_column(self, seq: Node, item: Node) -> int | None:
        """The column of the dash before a block sequence's ``item``, if on the item's own line."""
        col = self.seq_dash(seq)
        line = self.line(item.start[0])
        if line[col : col + 1] == "-" and item.start[1] > col and not line[col + 1 : item.start[1]].strip():
            return col
        return None

    def own_samples(self, node: Node) -> _Samples:
        """Indent samples of ``node``'s direct children."""
        out = _Samples()
        if node.flow:
            return out
        if node.kind == "map":
            for key, value in zip(node.keys, node.values, strict=True):
                if value.flow or value.kind not in ("map", "seq") or not value.children():
                    continue
                if value.kind == "map" and value.keys[0].start[0] != key.start[0]:
                    out.mapping.append(value.keys[0].start[1] - key.start[1])
                elif value.kind == "seq" and value.items[0].start[0] != key.start[0]:
                    out.offset.append(self.seq_dash(value) - key.start[1])
        elif node.kind == "seq":
            for item in node.items:
                dash = self.dash_column(node, item)
                if dash is not None:
                    out.gap.append(item.start[1] - dash)
        return out

    def subtree_samples(self, node: Node) -> _Samples:
        out = _Samples()
        for sub in _walk(node):
            if sub.kind in ("map", "seq"):
                out.extend(self.own_samples(sub))
        return out

    def indent_near(self, node: Node) -> Indent:
        """The indentation for new blocks under ``node``: as its own children are indented, else
        as its subtree is, else as the whole document is, else 2/0/2."""
        levels = [lambda: self.own_samples(node), lambda: self.subtree_samples(node), self._whole]
        found: dict[str, int] = {}
        for level in levels:
            samples = level()
            for name, least in (("mapping", 1), ("offset", 0), ("gap", 2)):
                if name not in found:
                    value = _pick([v for v in getattr(samples, name) if v >= least])
                    if value is not None:
                        found[name] = value
            if len(found) == 3:
                break
        return Indent(found.get("mapping", 2), found.get("offset", 0), found.get("gap", 2))

    def _whole(self) -> _Samples:
        if self._document is None:
            self._document = self.subtree_samples(self.root)
        return self._document

    def quote(self) -> str:
        """The quote character the document uses most for quoted scalars (``"`` if none)."""
        styles = Counter(n.style for n in _walk(self.root) if n.kind == "scalar" and n.style in ("'", '"'))
        return "'" if styles["'"] > styles['"'] else '"'

    def content_end(self, node: Node) -> int:
        """The last line holding a character of ``node`` (not the blank lines or comments after it)."""
        while node.kind in ("map", "seq") and not node.flow and node.children():
            node = node.children()[-1]
        if node.kind == "scalar" and node.style in ("|", ">"):
            last = node.end[0] - (1 if node.end[1] == 0 else 0)
            while last > node.start[0] and not self.line(last).strip():
                last -= 1
            return last
        return node.end[0]


def _walk(node: Node) -> Iterator[Node]:
    todo = [node]
    while todo:
        current = todo.pop()
        yield current
        if current.kind == "map":
            for key, value in zip(reversed(current.keys), reversed(current.values), strict=True):
                todo += [value, key]
        elif current.kind == "seq":
            todo += reversed(current.items)


def document_indent(text: str) -> Indent:
    """The indentation a YAML document uses (for the round-trip writer); 2/0/2 if it cannot tell."""
    try:
        root = parse(text)
    except Unsupported:
        return Indent()
    return Layout(text, root).indent_near(root)


# ---------------------------------------------------------------- writing new values

# Conservative: what is a plain scalar in both block and flow context, before resolution.
_PLAIN = re.compile(r"[A-Za-z0-9_./][A-Za-z0-9_./=@+~-]*(?::[A-Za-z0-9_./=@+~-]+)*")


@functools.lru_cache(maxsize=4096)
def _resolves_to_itself(text: str) -> bool:
    """``text`` as a plain scalar is the same string in YAML 1.1 (libyaml, kubectl) and 1.2."""
    from ruamel.yaml import YAML

    try:
        return bool(yaml.load(text, Loader=_loader()) == text and YAML(typ="safe", pure=True).load(text) == text)
    except Exception:
        return False


def scalar(value: Any, quote: str = '"') -> str:
    """A JSON value's YAML scalar, plain where it reads back the same in YAML 1.1 and 1.2."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = json.dumps(value)
        if yaml.load(text, Loader=_loader()) != value:
            raise Unsupported(f"float {value!r} has no scalar both YAML versions read alike")
        return text
    if not isinstance(value, str):
        raise Unsupported(f"cannot write a {type(value).__name__}")
    if _PLAIN.fullmatch(value) and _resolves_to_itself(value):
        return value
    if quote == "'" and value.isprintable():
        return "'" + value.replace("'", "''") + "'"
    return double_quoted(value)


_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


def double_quoted(value: str) -> str:
    """A YAML double-quoted scalar: what is not printable is escaped (YAML allows neither DEL nor
    raw line separators there, though JSON does)."""
    out = ['"']
    for c in value:
        if c in '"\\':
            out.append("\\" + c)
        elif c.isprintable():
            out.append(c)
        else:
            out.append(_ESCAPES.get(c) or (f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"))
    out.append('"')
    return "".join(out)


def flow(value: Any, quote: str) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{scalar(k, quote)}: {flow(v, quote)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v, quote) for v in value) + "]"
    return scalar(value, quote)


def _inline(value: Any, quote: str) -> str | None:
    """The text of a value that goes on its key's line: a scalar or an empty collection."""
    if isinstance(value, dict | list):
        return None if value else ("{}" if isinstance(value, dict) else "[]")
    return scalar(value, quote)


def block_members(members: Iterable[tuple[str, Any]], col: int, indent: Indent, quote: str) -> list[str]:
    """Lines of mapping members whose keys start at ``col``."""
    out: list[str] = []
    pad = " " * col
    for key, value in members:
        head = f"{pad}{scalar(key, quote)}:"
        text = _inline(value, quote)
        if text is not None:
            out.append(f"{head} {text}")
        elif isinstance(value, dict):
            out.append(head)
            out += block_members(value.items(), col + indent.mapping, indent, quote)
        else:
            out.append(head)
            out += block_items(value, col + indent.offset, indent, quote)
    return out


def block_items(items: Iterable[Any], dash: int, indent: Indent, quote: str) -> list[str]:
    """Lines of sequence items whose dashes are at column ``dash``."""
    out: list[str] = []
    lead = " " * dash + "-" + " " * (indent.gap - 1)
    inner = dash + indent.gap
    for item in items:
        text = _inline(item, quote)
        if text is not None:
            out.append(lead + text)
            continue
        lines = (
            block_members(item.items(), inner, indent, quote)
            if isinstance(item, dict)
            else block_items(item, inner, indent, quote)
        )
        out += [lead + lines[0][inner:], *lines[1:]]
    return out


# ---------------------------------------------------------------- the view the ops change


@dataclass(slots=True)
class _Fresh:
    """A value an op put in place (new, or replacing an original node)."""

    value: Any


@dataclass(slots=True, eq=False)
class _Entry:
    key: str | None  # None in a sequence
    index: int | None  # the original member's position; None for a new one
    child: Node | _Fresh


class _View:
    def __init__(self, node: Node) -> None:
        self.node = node
        if node.kind == "map":
            pairs = zip(node.keys, node.values, strict=True)
            self.entries = [_Entry(_key_text(key), i, value) for i, (key, value) in enumerate(pairs)]
        else:
            self.entries = [_Entry(None, i, item) for i, item in enumerate(node.items)]
        self.removed: list[int] = []

    def find(self, key: str) -> _Entry | None:
        return next((e for e in self.entries if e.key == key), None)


def _key_text(key: Node) -> str | None:
    if key.kind != "scalar" or (key.value == "<<" and not key.style):
        return None  # a complex or merge key: no pointer token names it here
    return key.value


class _Patcher:
    """Ops applied to views of the document's nodes.  A node with an anchor is one node wherever its
    aliases repeat it: an edit to it is made once, in the anchored text, and only when the same edit
    is asked at the anchor and at every alias (as a controller's fix for identical tasks is), since
    otherwise it would change a place no op named."""

    def __init__(self, root: Node) -> None:
        self.root = root
        self.views: dict[int, _View] = {}
        # (anchored node, the op below it) -> the occurrences (anchor or alias nodes) it was asked at
        self.shared_edits: dict[tuple[int, str], set[int]] = {}
        self.occurrences: dict[int, int] = {}

    def view(self, node: Node) -> _View:
        if node.kind not in ("map", "seq"):
            raise Unsupported("the op goes through a scalar or an alias")
        found = self.views.get(id(node))
        if found is None:
            found = self.views[id(node)] = _View(node)
        return found

    def _through(self, child: Node, below: list[str], op: PatchOp, shared: list[Node]) -> Node:
        """``child``, or the node an alias names; notes an anchored node the op goes through."""
        node = child.target if child.kind == "alias" and child.target is not None else child
        if node.anchor:
            shared.append(node)
            if len(shared) > 1:
                raise Unsupported("an op through nested anchors")
            self.occurrences[id(node)] = node.aliases + 1
            edit = json.dumps([op.op, below, op.value], sort_keys=True, default=str)
            self.shared_edits.setdefault((id(node), edit), set()).add(id(child))
        return node

    def check_shared(self) -> None:
        for (node, _), seen in self.shared_edits.items():
            if len(seen) != self.occurrences[node]:
                raise Unsupported("an edit of an anchored node would change its other occurrences")

    def apply(self, op: PatchOp) -> None:
        tokens = pointer.split(op.path)
        if not tokens:
            raise Unsupported("an op on the document root")
        shared: list[Node] = []
        if self.root.anchor:
            raise Unsupported("an anchored document root")
        here: _View | Any = self.view(self.root)
        for depth, token in enumerate(tokens[:-1]):
            if isinstance(here, _View):
                entry = self._entry(here, token)
                child = entry.child
                here = child.value if isinstance(child, _Fresh) else self.view(
                    self._through(child, tokens[depth + 1:], op, shared))
            elif isinstance(here, dict) and token in here:
                here = here[token]
            elif isinstance(here, list) and (i := index_of(token, len(here))) is not None:
                here = here[i]
            else:
                raise Unsupported(f"{op.path}: parent does not exist")
        value = copy.deepcopy(op.value)
        if isinstance(here, _View):
            self._apply_view(here, op.op, tokens[-1], value)
        else:
            _apply_plain(here, op.op, tokens[-1], value)

    def _entry(self, view: _View, token: str) -> _Entry:
        if view.node.kind == "map":
            entry = view.find(token)
        else:
            i = index_of(token, len(view.entries))
            entry = view.entries[i] if i is not None else None
        if entry is None:
            raise Unsupported(f"no member {token}")
        return entry

    @staticmethod
    def _apply_view(view: _View, op: str, last: str, value: Any) -> None:
        entries = view.entries
        if view.node.kind == "map":
            entry = view.find(last)
            if op == "add" and entry is None:
                entries.append(_Entry(last, None, _Fresh(value)))
            elif op in ("add", "replace") and entry is not None:
                entry.child = _Fresh(value)
            elif op == "remove" and entry is not None:
                entries.remove(entry)
                if entry.index is not None:
                    view.removed.append(entry.index)
            else:
                raise Unsupported(f"{op} {last}: no such member")
            return
        found = small_int(last)
        i = len(entries) if last == "-" else found if found is not None else -1
        if op == "add" and 0 <= i <= len(entries):
            entries.insert(i, _Entry(None, None, _Fresh(value)))
        elif op == "replace" and 0 <= i < len(entries):
            entries[i].child = _Fresh(value)
        elif op == "remove" and 0 <= i < len(entries):
            entry = entries.pop(i)
            if entry.index is not None:
                view.removed.append(entry.index)
        else:
            raise Unsupported(f"{op} {last}: bad list index")


def _apply_plain(parent: Any, op: str, last: str, value: Any) -> None:
    if isinstance(parent, dict):
        if op == "add" or (op == "replace" and last in parent):
            parent[last] = value
        elif op == "remove" and last in parent:
            del parent[last]
        else:
            raise Unsupported(f"{op} {last}: no such member")
    elif isinstance(parent, list):
        found = small_int(last)
        i = len(parent) if last == "-" else found if found is not None else -1
        if op == "add" and 0 <= i <= len(parent):
            parent.insert(i, value)
        elif op == "replace" and 0 <= i < len(parent):
            parent[i] = value
        elif op == "remove" and 0 <= i < len(parent):
            del parent[i]
        else:
            raise Unsupported(f"{op} {last}: bad list index")
    else:
        raise Unsupported(f"{op} {last}: parent is not a mapping or a list")


# ---------------------------------------------------------------- the view as text edits


@dataclass(slots=True)
class _Edits:
    inserts: dict[int, list[str]] = field(default_factory=dict)  # before line N: new lines
    spans: dict[int, list[tuple[int, int, str]]] = field(default_factory=dict)  # line: (from, to, text)
    deleted: set[int] = field(default_factory=set)

    def insert(self, before: int, lines: list[str]) -> None:
        self.inserts.setdefault(before, []).extend(lines)

    def span(self, line: int, start: int, stop: int, text: str) -> None:
        self.spans.setdefault(line, []).append((start, stop, text))


class _Writer:
    def __init__(self, layout: Layout, patcher: _Patcher) -> None:
        self.layout = layout
        self.patcher = patcher
        self.edits = _Edits()
        self.quote = layout.quote()

    def emit(self, node: Node, context: tuple[Node, Node] | None) -> None:
        """Edits for ``node``'s view and the views below it; ``context`` is (parent mapping, key)
        when ``node`` is a block mapping's value."""
        view = self.patcher.views.get(id(node))
        if view is None:
            return
        if node.kind == "map":
            self._map(view, context)
        else:
            self._seq(view, context)

    def _children(self, view: _View) -> None:
        node = view.node
        for entry in view.entries:
            if entry.index is None:
                continue
            original = node.children()[entry.index]
            if isinstance(entry.child, _Fresh):
                key = node.keys[entry.index] if node.kind == "map" else None
                self._replace(node, key, original, entry.child.value)
            elif node.kind == "map" and not node.flow:
                self.emit(original, (node, node.keys[entry.index]))
            else:
                self.emit(original, None)

    def _map(self, view: _View, context: tuple[Node, Node] | None) -> None:
        node = view.node
        self._children(view)
        for index in view.removed:
            self._delete(node.keys[index], node.values[index], node)
        added = [(e.key, e.child.value) for e in view.entries if e.index is None and isinstance(e.child, _Fresh)]
        if not added:
            return
        members = [(str(k), v) for k, v in added]
        if not node.flow:
            col = node.keys[0].start[1]
            lines = block_members(members, col, self.layout.indent_near(node), self.quote)
            self._add_lines(self.layout.content_end(node) + 1, lines)
        elif not node.keys and context is not None and self._opens_block(node, context):
            parent, key = context
            self._open_block(node)
            indent = self.layout.indent_near(parent)
            lines = block_members(members, key.start[1] + indent.mapping, indent, self.quote)
            self._add_lines(node.end[0] + 1, lines)
        else:
            text = ", ".join(f"{scalar(k, self.quote)}: {flow(v, self.quote)}" for k, v in members)
            self._flow_append(node, node.values[-1] if node.values else None, text)

    def _seq(self, view: _View, context: tuple[Node, Node] | None) -> None:
        node = view.node
        pending: list[Any] = []
        indent = self.layout.indent_near(node)
        for entry in view.entries:
            if entry.index is None:
                assert isinstance(entry.child, _Fresh)
                pending.append(entry.child.value)
                continue
            if pending:
                self._insert_before(node, node.items[entry.index], pending, indent)
                pending = []
            original = node.items[entry.index]
            if isinstance(entry.child, _Fresh):
                self._replace(node, None, original, entry.child.value)
            else:
                self.emit(original, None)
        for index in view.removed:
            self._delete(None, node.items[index], node)
        if not pending:
            return
        if not node.flow:
            lines = block_items(pending, self.layout.seq_dash(node), indent, self.quote)
            self._add_lines(self.layout.content_end(node) + 1, lines)
        elif not node.items and context is not None and self._opens_block(node, context):
            parent, key = context
            self._open_block(node)
            indent = self.layout.indent_near(parent)
            self._add_lines(node.end[0] + 1, block_items(pending, key.start[1] + indent.offset, indent, self.quote))
        else:
            text = ", ".join(flow(v, self.quote) for v in pending)
            self._flow_append(node, node.items[-1] if node.items else None, text)

    def _insert_before(self, seq: Node, item: Node, values: list[Any], indent: Indent) -> None:
        if seq.flow:
            text = "".join(flow(v, self.quote) + ", " for v in values)
            self.edits.span(item.start[0], item.start[1], item.start[1], text)
            return
        dash = self.layout.dash_column(seq, item)
        if dash is None:
            raise Unsupported("the item's dash is not on its line")
        lines = block_items(values, dash, indent, self.quote)
        prefix = self.layout.line(item.start[0])[:dash]
        if prefix.strip():
            if prefix.strip(" -"):
                raise Unsupported("the item shares its line with what comes before it")
            # `- - x`: the outer dash moves to the new first item, `x` keeps its line without it
            lines[0] = prefix + lines[0][dash:]
            self.edits.span(item.start[0], 0, dash, " " * dash)
        self._add_lines(item.start[0], lines)

    def _replace(self, parent: Node, key: Node | None, original: Node, value: Any) -> None:
        """A member's (``key``'s) or an item's value replaced: a one-line scalar by a scalar in
        place, in its own quoting where it allows; inside a flow collection by a flow value in
        place; otherwise the lines of the old value by the new one's."""
        block_scalar = original.kind == "scalar" and original.style in ("|", ">")
        one_line = original.start[0] == original.end[0] and not block_scalar
        collection = isinstance(value, dict | list) and bool(value)
        if parent.flow or (one_line and not collection):
            if not one_line:
                raise Unsupported("a multi-line value in a flow collection")
            if isinstance(value, dict | list):
                text = flow(value, self.quote)
            elif isinstance(value, str) and original.style == "'" and value.isprintable():
                text = "'" + value.replace("'", "''") + "'"
            elif isinstance(value, str) and original.style == '"':
                text = double_quoted(value)
            else:
                text = scalar(value, self.quote)
            if original.start == original.end:  # an empty value (`key:`, `-`) gets a space first
                text = " " + text
            self.edits.span(original.start[0], original.start[1], original.end[1], text)
            return
        first = key if key is not None else original
        line = self.layout.line(first.start[0])
        col = first.start[1] if key is not None else self.layout.dash_column(parent, original)
        if col is None or line[:col].strip(" -") or (key is not None and key.start[0] != key.end[0]):
            raise Unsupported("the value does not start its own line")
        indent = self.layout.indent_near(parent)
        if key is not None:
            lines = block_members([("k", value)], col, indent, self.quote)
            lines[0] = line[: key.end[1]] + lines[0][col + 1 :]  # the key as written, its dashes before it
        else:
            lines = block_items([value], col, indent, self.quote)
            lines[0] = line[:col] + lines[0][col:]
        for n in range(first.start[0], self.layout.content_end(original) + 1):
            self.edits.deleted.add(n)
        self._add_lines(first.start[0], lines)

    def _delete(self, key: Node | None, value: Node, parent: Node) -> None:
        if parent.flow:
            raise Unsupported("removing from a flow collection")
        first = key if key is not None else value
        line = self.layout.line(first.start[0])
        col = first.start[1] if key is not None else self.layout.dash_column(parent, value)
        if col is None or line[:col].strip():
            raise Unsupported("the member shares its line with what comes before it")
        for n in range(first.start[0], self.layout.content_end(value) + 1):
            self.edits.deleted.add(n)

    def _opens_block(self, node: Node, context: tuple[Node, Node]) -> bool:
        """An empty flow collection on its key's line in a block mapping, followed on that line by
        nothing but a comment: it may become a block."""
        if node.start[0] != node.end[0] or context[1].start[0] != node.start[0]:
            return False
        rest = self.layout.line(node.end[0])[node.end[1] :].strip()
        return not rest or rest.startswith("#")

    def _open_block(self, node: Node) -> None:
        """``key: {}`` → ``key:``, keeping any comment after it."""
        line = self.layout.line(node.start[0])
        start = node.start[1]
        while start > 0 and line[start - 1] == " ":
            start -= 1
        self.edits.span(node.start[0], start, node.end[1], "")

    def _flow_append(self, node: Node, last: Node | None, text: str) -> None:
        if last is not None:
            self.edits.span(last.end[0], last.end[1], last.end[1], ", " + text)
        else:
            line, col = node.start
            if self.layout.line(line)[col : col + 1] not in ("{", "["):
                raise Unsupported("a flow collection with properties")
            self.edits.span(line, col + 1, col + 1, text)

    def _add_lines(self, before: int, lines: list[str]) -> None:
        self.edits.insert(before, lines)


def _render(layout: Layout, edits: _Edits) -> str:
    lines = layout.lines
    out: list[str] = []
    for n in range(len(lines) + 1):
        new = edits.inserts.get(n)
        if new:
            # New lines end as the line before them does (CRLF or LF).
            ending = "\r" if (lines[n - 1] if n > 0 else lines[0]).endswith("\r") else ""
            out += [line + ending for line in new]
        if n == len(lines):
            break
        if n in edits.deleted:
            continue
        text = lines[n]
        for start, stop, piece in sorted(edits.spans.get(n, []), reverse=True):
            text = text[:start] + piece + text[stop:]
        out.append(text)
    return "\n".join(out)


_EXOTIC = ("\x85", "\u2028", "\u2029")


def patch_text(text: str, ops: Iterable[PatchOp]) -> str:
    """``text`` (one YAML document) with ``ops`` applied as text edits; Unsupported if they cannot be."""
    if any(c in text for c in _EXOTIC) or text.count("\r") != text.count("\r\n"):
        raise Unsupported("line breaks other than LF and CRLF")
    root = parse(text)
    patcher = _Patcher(root)
    for op in ops:
        patcher.apply(op)
    patcher.check_shared()
    layout = Layout(text, root)
    writer = _Writer(layout, patcher)
    writer.emit(root, None)
    return _render(layout, writer.edits)

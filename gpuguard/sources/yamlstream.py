"""Stream a manifest file one document at a time, checking each while it is parsed.

libyaml (PyYAML's C binding; PyYAML's pure-Python parser where the binding is missing) turns the
text into parse events, and this module builds each document's plain data straight from them, as
``yaml.safe_load`` would (see ``yamlvalues``), with no node graph; beside the data it keeps a
compact position tree for findings (see ``yamlpos``).

While parsing, before anything large is built, a document is refused when it
- nests deeper than ``MAX_DEPTH``,
- expands through aliases to far more nodes than it holds ("billion laughs"), or contains itself,
- repeats a key (Kubernetes rejects duplicate fields),
- exceeds the API server's object size (``MAX_OBJECT_CHARS``).

The items of a top-level ``items:`` sequence (``kind: List``, as ``kubectl get -o yaml`` writes it,
often before its ``kind``) are handed out one at a time as they complete; the document's end says
whether they stand.  If it turns out not to be a List, that one document is parsed again whole.

A refused document is an ``InputError`` with its line, and parsing resumes at the next ``---``
marker without reading the rest of it (a refused List item: after that item).  A syntax error ends
the file.  Memory is the text plus one document, or one List item, at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from yaml import events

from gpuguard.sources.layout import Layout, Segment
from gpuguard.sources.yamlpos import SHIFT, MapPos, Positions, SeqPos, line_of, start_of
from gpuguard.sources.yamlsafe import InputError
from gpuguard.sources.yamlvalues import (
    MERGE,
    STR,
    VALUE,
    UnknownTag,
    convert,
    resolve,
    scalar,
    special_collection,
)

# The API server refuses request bodies above 3 MiB ("Request entity too large: limit is 3145728",
# k8s.io/apiserver pkg/server/config.go MaxRequestBodyBytes; kubernetes/kubernetes#105863).
MAX_OBJECT_CHARS = 3 * 1024 * 1024
MAX_DEPTH = 200
# An alias bomb expands to far more nodes than it holds; ordinary anchors stay far below this.
MIN_EXPANSION_BUDGET = 100_000
EXPANSION_FACTOR = 4

_NEVER = 1 << 62  # an offset no input reaches


@dataclass(slots=True)
class Unit:
    """A candidate Kubernetes object: a whole document, or one item of a streamed List."""

    doc_index: int
    prefix: str  # "" for a document, "/items/N" for an item of a streamed List
    data: Any
    positions: Positions
    line: int  # 1-based line of its first node
    segment: Segment
    source: str | None  # the Helm `# Source:` comment heading the document
    streamed: bool = False  # an item handed out before its document's kind was known


@dataclass(slots=True)
class ListEnd:
    """The end of a document whose items were streamed.  They stand if ``stands``; otherwise
    ``error`` says why not, or (no error) the document was no List and follows whole as a Unit."""

    doc_index: int
    header: Any  # the document without its items
    line: int
    stands: bool
    error: InputError | None = None


Item = Unit | ListEnd | InputError


class _Problem(Exception):
    """The document is refused: ``message`` at 1-based ``line``; resume after 0-based line ``after``."""

    def __init__(self, line: int, message: str, after: int | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.message = message
        self.after = line - 1 if after is None else after


class _Reparse(Exception):
    """A document with streamed ``items:`` was no List: parse it again, whole."""

    def __init__(self, segment: Segment) -> None:
        super().__init__()
        self.segment = segment


class _Open:
    """An anchor whose node is still being built: an alias to it would contain itself."""

    __slots__ = ("line",)

    def __init__(self, line: int) -> None:
        self.line = line


class _Anchored:
    __slots__ = ("entry", "height", "raw", "size", "tag", "value")

    def __init__(self, value: Any, entry: Positions, size: int, height: int, raw: str | None, tag: str | None) -> None:
        self.value = value
        self.entry = entry
        self.size = size  # nodes, aliases expanded
        self.height = height
        self.raw = raw  # a scalar's text: keys are matched against pointer tokens as written
        self.tag = tag


_NO_KEY = object()
_MERGE_KEY = object()


class _Frame:
    """A mapping or sequence being built."""

    __slots__ = ("anchor", "data", "deep", "expanded0", "is_map", "key", "key_at", "key_raw", "merges", "pos",
                 "seen", "special")

    def __init__(self, is_map: bool, at: int, depth: int, anchor: str | None, expanded0: int,
                 special: str | None) -> None:
        self.is_map = is_map
        self.data: Any = {} if is_map else []
        self.pos: MapPos | SeqPos = MapPos(at) if is_map else SeqPos(at)
        self.deep = depth  # the deepest level reached inside
        self.anchor = anchor
        self.expanded0 = expanded0
        self.special = special
        self.key: Any = _NO_KEY  # of a mapping: the key awaiting its value
        self.key_at = 0
        self.key_raw: str | None = None
        self.seen: dict[str | tuple[str | None, str], int] | None = None  # keys met, for duplicates
        self.merges: list[tuple[Any, Positions]] | None = None


class _TextReader:
    """The text from an offset, read by the parser in chunks (no UTF-8 copy of the whole text)."""

    name = "<text>"

    def __init__(self, text: str, start: int) -> None:
        self.text = text
        self.pos = start

    def read(self, size: int = -1) -> str:
        end = len(self.text) if size < 0 else self.pos + size
        chunk = self.text[self.pos : end]
        self.pos += len(chunk)
        return chunk


_PURE = False  # tests set this to check PyYAML's pure-Python parser gives the same results


def _parser(text: str, start: int) -> Any:
    reader = _TextReader(text, start)
    if not _PURE and getattr(yaml, "__with_libyaml__", False):
        from yaml._yaml import CParser

        return CParser(reader)
    return yaml.SafeLoader(reader)


def _too_large(chars: int) -> str:
    return (
        f"document is {chars / 1048576:.1f} MiB; the API server accepts at most "
        f"{MAX_OBJECT_CHARS // 1048576} MiB per object"
    )


def _depth_problem(line: int) -> _Problem:
    return _Problem(line, f"nesting deeper than {MAX_DEPTH} levels")


def _merge(frame: _Frame) -> dict[Any, Any]:
    """The mapping with its ``<<`` merges applied as PyYAML applies them: merged keys first (each
    merge in turn, a list of mappings last-first), its own keys over them."""
    sources: list[tuple[Any, Positions]] = []
    for value, entry in frame.merges or ():
        if isinstance(value, dict):
            sources.append((value, entry))
        elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
            items = entry.items if isinstance(entry, SeqPos) else [0] * len(value)
            sources.extend(reversed(list(zip(value, items, strict=True))))
        else:
            raise _Problem(line_of(frame.pos.at), "invalid YAML: expected a mapping or list of mappings for merging")
    merged: dict[Any, Any] = {}
    keys: dict[str, int | tuple[int, MapPos | SeqPos]] = {}
    for data, entry in sources:
        merged.update(data)
        if isinstance(entry, MapPos):
            keys.update(entry.keys)
    assert isinstance(frame.pos, MapPos)
    merged.update(frame.data)
    keys.update(frame.pos.keys)
    frame.pos.keys = keys
    return merged


class _Composer:
    def __init__(self, text: str, file: str, stream_lists: bool, layout: Layout | None) -> None:
        self.text = text
        self.file = file
        self.layout = layout or Layout(text)
        self.stream_lists = stream_lists
        self.doc_index = 0
        self.streaming = False  # items of the current document were handed out
        self.whole_once = False  # the next document is parsed whole, its items not streamed

    def run(self) -> Iterator[Item]:
        start_line, offset = 0, 0
        while True:
            parser = _parser(self.text, offset)
            try:
                yield from self._documents(parser, start_line, offset)
                return
            except _Reparse as again:
                start_line, offset = again.segment.start, again.segment.begin
                self.whole_once, self.streaming = True, False
            except _Problem as problem:
                error = self._template_error(self.layout.segment_of(problem.line - 1), problem.line)
                final = error is not None
                error = error or InputError(self.file, problem.line, problem.message)
                # The items of a List already handed out do not stand.
                yield ListEnd(self.doc_index, None, problem.line, False, error) if self.streaming else error
                self.streaming = False
                self.doc_index += 1
                resume = None if final else self.layout.next_marker_after(problem.after)
                if resume is None:
                    return
                start_line, offset = resume
            except yaml.YAMLError as exc:
                error = self._syntax_error(exc, start_line)
                yield ListEnd(self.doc_index, None, error.line, False, error) if self.streaming else error
                return
            finally:
                dispose = getattr(parser, "dispose", None)
                if dispose is not None:
                    dispose()

    def _template_error(self, seg: Segment | None, last: int | None = None) -> InputError | None:
        """A template's `{{` makes libyaml see odd mappings and keys: say what the file really is."""
        line = self.layout.first_template_line(seg, last)
        if line is None:
            return None
        message = (
            f"unrendered template (Helm/Go template syntax `{{{{` at line {line}); "
            "render it with `helm template` first"
        )
        return InputError(self.file, line, message)

    def _syntax_error(self, exc: yaml.YAMLError, base: int) -> InputError:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = min(mark.line + base + 1, max(self.layout.line_count, 1)) if mark is not None else 1
        template = self._template_error(None, line)  # a `{{` at or before the error explains it
        if template is not None:
            return template
        problem, context = getattr(exc, "problem", None), getattr(exc, "context", None)
        context_mark = getattr(exc, "context_mark", None)
        if problem and context and context_mark is not None:
            text = f"{problem} ({context} started at line {context_mark.line + base + 1})"
        elif problem or context:
            text = str(problem or context)
        else:
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return InputError(self.file, line, f"invalid YAML: {text}")

    def _documents(self, parser: Any, base: int, offset: int) -> Iterator[Item]:
        """Documents from ``parser``, which reads the text from char ``offset`` (0-based line ``base``)."""
        get_event = parser.get_event
        scalar_event, alias_event = events.ScalarEvent, events.AliasEvent
        map_start, seq_start = events.MappingStartEvent, events.SequenceStartEvent
        map_end, seq_end = events.MappingEndEvent, events.SequenceEndEvent
        doc_start, doc_end = events.DocumentStartEvent, events.DocumentEndEvent
        layout, file = self.layout, self.file
        stack: list[_Frame] = []
        anchors: dict[str, _Anchored | _Open] = {}
        distinct = expanded = 0
        root_start = -1  # parser offset of the document's first node; -1 before it
        root_end = root_line = 0
        limit = _NEVER  # parser offset past which the document is too large
        segment = layout.segments[0]
        source: str | None = None
        root: tuple[Any, Positions] | None = None
        stream_ok = self.stream_lists and not self.whole_once
        items: _Frame | None = None  # the `items:` sequence whose items are handed out
        streamed = 0
        item_limit = _NEVER  # parser offset past which the current List item is too large

        while True:
            ev = get_event()
            kind = type(ev)
            value: Any
            entry: Positions
            raw: str | None
            try:
                if kind is scalar_event or kind is alias_event or kind is map_start or kind is seq_start:
                    mark = ev.start_mark
                    line0 = mark.line + base
                    at = (line0 << SHIFT) | mark.column
                    depth = len(stack) + 1
                    if root_start < 0:  # the document's first node
                        root_start, root_line = mark.index, line0
                        limit = root_start + MAX_OBJECT_CHARS
                        segment = layout.segment_of(line0)
                        source = layout.helm_source(segment)
                        distinct = expanded = 0
                        anchors = {}
                    end_index = ev.end_mark.index
                    if end_index > limit:
                        if not (len(stack) >= 2 and stack[0].key_raw == "items" and stack[0].key is not _NO_KEY
                                and not stack[1].is_map):
                            size = max(segment.stop - offset - root_start, end_index - root_start)
                            raise _Problem(root_line + 1, _too_large(size), line0)
                        limit = _NEVER  # a List: its size is decided at its end
                    if end_index > item_limit:
                        raise _Problem(line_of(stack[2].pos.at), (
                            f"items[{streamed}] is over {MAX_OBJECT_CHARS // 1048576} MiB; the API server accepts "
                            f"at most {MAX_OBJECT_CHARS // 1048576} MiB per object"
                        ))
                    anchor = ev.anchor
                    if kind is alias_event:
                        target = anchors.get(anchor)
                        if target is None:
                            raise _Problem(line0 + 1, f"invalid YAML: found undefined alias {anchor!r}")
                        if isinstance(target, _Open):
                            raise _Problem(target.line, "recursive YAML alias (a node contains itself)", line0)
                        expanded += target.size
                        budget = max(MIN_EXPANSION_BUDGET, EXPANSION_FACTOR * distinct)
                        if expanded > budget:
                            raise _Problem(line0 + 1, (
                                f"YAML aliases expand this document to more than {budget} nodes "
                                "(an alias bomb?); refusing to expand it"
                            ))
                        height = target.height
                        if len(stack) + height > MAX_DEPTH:
                            raise _depth_problem(line0 + 1)
                        value, entry, raw, tag = target.value, target.entry, target.raw, target.tag
                    else:
                        if depth > MAX_DEPTH:
                            raise _depth_problem(line0 + 1)
                        if anchor is not None and anchor in anchors:
                            raise _Problem(line0 + 1, f"invalid YAML: found duplicate anchor {anchor!r}")
                        distinct += 1
                        expanded += 1
                        tag = ev.tag
                        if kind is scalar_event:
                            raw = ev.value
                            if tag is None or tag == "!":
                                tag = resolve(raw) if ev.implicit[0] else STR
                            if tag == STR:
                                value = raw
                            elif tag in (MERGE, VALUE) and stack and stack[-1].is_map and stack[-1].key is _NO_KEY:
                                value = raw  # as a key: `<<` merges, `=` is the string "="
                            else:
                                try:
                                    value = scalar(raw, tag)
                                except UnknownTag as exc:
                                    raise _Problem(line0 + 1, f"invalid YAML: {exc}") from None
                                except (ValueError, TypeError, yaml.YAMLError) as exc:
                                    shown = raw if len(raw) <= 40 else raw[:40] + "…"
                                    raise _Problem(line0 + 1, f"invalid YAML: cannot read {shown!r} as {tag}: {exc}"
                                                   ) from None
                            entry = at
                            height = 1
                            if anchor is not None:
                                anchors[anchor] = _Anchored(value, at, 1, 1, raw, tag)
                        else:  # a mapping or a sequence starts
                            is_map = kind is map_start
                            special = None
                            if tag is not None:
                                try:
                                    special = special_collection(tag, is_map)
                                except UnknownTag as exc:
                                    raise _Problem(line0 + 1, f"invalid YAML: {exc}") from None
                            if anchor is not None:
                                anchors[anchor] = _Open(line0 + 1)
                            stack.append(_Frame(is_map, at, depth, anchor, expanded - 1, special))
                            if depth == 3 and items is not None and stack[1] is items:
                                item_limit = mark.index + MAX_OBJECT_CHARS
                            elif (depth == 2 and stream_ok and not is_map and stack[0].is_map
                                  and stack[0].key_raw == "items" and stack[0].key is not _NO_KEY):
                                items, streamed = stack[1], 0
                                self.streaming = True
                            continue
                elif kind is map_end or kind is seq_end:
                    frame = stack.pop()
                    value = frame.data
                    if frame.merges:
                        value = frame.data = _merge(frame)
                    if frame.special is not None:
                        try:
                            value = convert(frame.special, value)
                        except ValueError as exc:
                            raise _Problem(line_of(frame.pos.at), f"invalid YAML: {exc}",
                                           ev.start_mark.line + base) from None
                    entry = frame.pos
                    height = frame.deep - len(stack)
                    raw = tag = None
                    if frame.anchor is not None:
                        anchors[frame.anchor] = _Anchored(value, entry, expanded - frame.expanded0, height, None, None)
                elif kind is doc_start:
                    root_start, root, limit = -1, None, _NEVER
                    continue
                elif kind is doc_end:
                    if root is not None:
                        done = self._finish(root, root_start, root_end, root_line, segment, source, items is not None)
                        yield done
                        if isinstance(done, ListEnd) and not done.stands and done.error is None:
                            raise _Reparse(segment)
                    self.doc_index += 1
                    items, item_limit, stream_ok = None, _NEVER, self.stream_lists
                    self.streaming = self.whole_once = False
                    anchors = {}
                    continue
                elif kind is events.StreamEndEvent:
                    return
                else:  # StreamStartEvent
                    continue

                # A node is complete: add it to its parent.
                if not stack:
                    root = (value, entry)
                    root_end = ev.end_mark.index
                    continue
                parent = stack[-1]
                reached = len(stack) + height
                if reached > parent.deep:
                    parent.deep = reached
                if parent is items:  # an item of a streamed List: hand it out, keep nothing
                    yield Unit(self.doc_index, f"/items/{streamed}", value, entry, line_of(start_of(entry)), segment,
                               source, True)
                    streamed += 1
                    item_limit = _NEVER
                elif parent.is_map:
                    if parent.key is _NO_KEY:
                        self._take_key(parent, value, entry, raw, tag, at)
                    else:
                        key = parent.key
                        parent.key = _NO_KEY
                        if key is _MERGE_KEY:
                            if parent.merges is None:
                                parent.merges = []
                            parent.merges.append((value, entry))
                        else:
                            parent.data[key] = value
                            if parent.key_raw is not None:
                                parent.pos.keys[parent.key_raw] = (  # type: ignore[union-attr]
                                    parent.key_at if isinstance(entry, int) else (parent.key_at, entry)
                                )
                else:
                    parent.data.append(value)
                    parent.pos.items.append(entry)  # type: ignore[union-attr]
            except _Problem as problem:
                if items is None or len(stack) < 3 or stack[1] is not items:
                    raise
                # One bad item of a streamed List: report it and read on after it.
                yield InputError(file, problem.line, problem.message)
                self._skip_item(parser, stack, anchors, kind is map_start or kind is seq_start)
                streamed += 1
                item_limit = _NEVER

    @staticmethod
    def _take_key(parent: _Frame, value: Any, entry: Positions, raw: str | None, tag: str | None, at: int) -> None:
        if tag == MERGE:
            parent.key = _MERGE_KEY
            return
        if isinstance(value, dict | list | set):
            line = line_of(start_of(entry))
            raise _Problem(line, (
                f"invalid YAML: found unhashable key (while constructing a mapping started at line "
                f"{line_of(parent.pos.at)})"
            ))
        if raw is not None:
            ident: str | tuple[str | None, str] = raw if tag == STR else (tag, raw)
            seen = parent.seen
            if seen is None:
                seen = parent.seen = {}
            first = seen.get(ident)
            if first is not None:
                raise _Problem(line_of(at), (
                    f"duplicate key {raw!r} (first at line {first}); Kubernetes rejects objects with duplicate fields"
                ))
            seen[ident] = line_of(at)
            if tag == VALUE:
                value = raw
        parent.key = value
        parent.key_raw = raw
        parent.key_at = at

    @staticmethod
    def _skip_item(parser: Any, stack: list[_Frame], anchors: dict[str, _Anchored | _Open], opened: bool) -> None:
        """Read past the rest of the current List item without building it."""
        level = len(stack) - 2 + (1 if opened else 0)  # a start event that failed was never pushed
        for frame in stack[2:]:
            if frame.anchor is not None:
                anchors.pop(frame.anchor, None)
        get_event = parser.get_event
        while level > 0:
            kind = type(get_event())
            if kind is events.MappingStartEvent or kind is events.SequenceStartEvent:
                level += 1
            elif kind is events.MappingEndEvent or kind is events.SequenceEndEvent:
                level -= 1
        del stack[2:]

    def _finish(
        self, root: tuple[Any, Positions], start: int, end: int, line0: int, segment: Segment, source: str | None,
        streamed: bool,
    ) -> Item:
        data, entry = root
        is_list = isinstance(data, dict) and data.get("kind") == "List"
        if streamed:
            if is_list:
                return ListEnd(self.doc_index, data, line0 + 1, True)
            if end - start > MAX_OBJECT_CHARS:
                return ListEnd(self.doc_index, data, line0 + 1, False,
                               InputError(self.file, line0 + 1, _too_large(end - start)))
            return ListEnd(self.doc_index, data, line0 + 1, False)  # no List: it follows whole
        if end - start > MAX_OBJECT_CHARS and not is_list:
            return InputError(self.file, line0 + 1, _too_large(end - start))
        return Unit(self.doc_index, "", data, entry, line0 + 1, segment, source)


def stream(text: str, file: str, *, stream_lists: bool = True, layout: Layout | None = None) -> Iterator[Item]:
    """The documents of ``text`` in order: ``Unit``s and ``InputError``s; for a document with a
    top-level ``items:`` sequence, its items as ``Unit``s (and input errors of items), then a
    ``ListEnd``.  ``stream_lists=False`` builds every document whole."""
    return _Composer(text, file, stream_lists, layout).run()

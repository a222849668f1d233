"""Split a manifest file into documents: plain data for the engine plus YAML nodes for positions.

Every document is composed once by a C-backed parser (PyYAML's libyaml binding; ruamel.yaml's
pure-Python safe loader when PyYAML is unavailable).  The node tree keeps absolute line/column
marks, so a finding's pointer maps to a position without parsing the file a second time.

Before a document is constructed its node graph is measured: alias expansion ("billion laughs"),
recursive aliases, nesting depth and duplicate keys are reported as input errors with a line.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from gpuguard.sources.yamlsafe import InputError

# The API server refuses request bodies above 3 MiB ("Request entity too large: limit is 3145728",
# k8s.io/apiserver pkg/server/config.go MaxRequestBodyBytes; kubernetes/kubernetes#105863).
MAX_OBJECT_CHARS = 3 * 1024 * 1024
MAX_DEPTH = 200
# An alias bomb expands to far more nodes than it holds; ordinary anchors stay far below this.
MIN_EXPANSION_BUDGET = 100_000
EXPANSION_FACTOR = 4

_MARKER = re.compile(r"^(---|\.\.\.)(?=[ \t]|$)(.*)$")
_SOURCE = re.compile(r"^#\s*Source:\s*(\S.*?)\s*$")
_TEMPLATE = re.compile(r"\{\{")
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Mark(Protocol):
    line: int
    column: int
    index: int


class Node(Protocol):
    tag: str
    value: Any
    start_mark: _Mark
    end_mark: _Mark


@dataclass(frozen=True, slots=True)
class Segment:
    """Lines [start, end) (0-based) of one document's text, after its ``---`` marker line."""

    start: int
    end: int
    inline: bool  # content begins on the marker line itself (``--- {a: 1}``)


@dataclass(slots=True)
class Document:
    index: int
    data: Any
    node: Node | None
    segment: Segment
    source: str | None  # Helm `# Source:` template heading the document


@dataclass(slots=True)
class ParsedFile:
    text: str
    documents: list[Document]
    errors: list[InputError]
    lines: list[str]


def segments(lines: list[str]) -> list[Segment]:
    """Document segments by their markers; YAML forbids `---`/`...` at column 0 inside scalars."""
    out: list[Segment] = []
    start, inline = 0, False
    for i, line in enumerate(lines):
        m = _MARKER.match(line)
        if not m:
            continue
        out.append(Segment(start, i, inline))
        if m.group(1) == "---":
            rest = m.group(2).strip()
            inline = bool(rest) and not rest.startswith("#")
            start = i if inline else i + 1
        else:
            start, inline = i + 1, False
    out.append(Segment(start, len(lines), inline))
    return out


def helm_source_line(lines: list[str], seg: Segment) -> tuple[int, str] | None:
    """(0-based line, template) of the Helm `# Source:` comment heading a segment, if any."""
    for i in range(seg.start, seg.end):
        stripped = lines[i].strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            return None
        m = _SOURCE.match(stripped)
        if m:
            return i, m.group(1)
    return None


def helm_source(lines: list[str], seg: Segment) -> str | None:
    found = helm_source_line(lines, seg)
    return found[1] if found else None


def first_template_line(lines: list[str]) -> int | None:
    for i, line in enumerate(lines):
        code = line.lstrip()
        if code.startswith("#"):
            continue
        if _TEMPLATE.search(line):
            return i + 1
    return None


class _Loader(Protocol):
    def check_node(self) -> bool: ...
    def get_node(self) -> Node: ...
    def construct_document(self, node: Node) -> Any: ...
    def dispose(self) -> None: ...


def _pyyaml_loader(text: str) -> _Loader:
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):  # type: ignore[misc, valid-type]
        pass

    # Kubernetes converts YAML to JSON: timestamps stay strings (sigs.k8s.io/yaml).
    Loader.add_constructor("tag:yaml.org,2002:timestamp", Loader.construct_yaml_str)
    loader: _Loader = Loader(text)
    return loader


class _RuamelLoader:
    def __init__(self, text: str) -> None:
        from ruamel.yaml import YAML
        from ruamel.yaml.constructor import SafeConstructor

        class Constructor(SafeConstructor):
            pass

        Constructor.add_constructor("tag:yaml.org,2002:timestamp", Constructor.construct_yaml_str)
        self._yaml = YAML(typ="safe", pure=True)
        self._yaml.Constructor = Constructor
        self._constructor, self._parser = self._yaml.get_constructor_parser(text)

    def check_node(self) -> bool:
        return bool(self._constructor.composer.check_node())

    def get_node(self) -> Node:
        node: Node = self._constructor.composer.get_node()
        return node

    def construct_document(self, node: Node) -> Any:
        return self._constructor.construct_document(node)

    def dispose(self) -> None:
        self._parser.dispose()


def _make_loader(text: str) -> _Loader:
    try:
        return _pyyaml_loader(text)
    except ImportError:
        return _RuamelLoader(text)


def _children(node: Node) -> list[Node]:
    value = node.value
    if not isinstance(value, list):
        return []
    if value and isinstance(value[0], tuple):
        return [n for pair in value for n in pair]
    return list(value)


def _duplicate_key(node: Node) -> tuple[int, str, int] | None:
    seen: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        if key.tag == _MERGE_TAG or not isinstance(key.value, str):
            continue
        ident = (key.tag, key.value)
        line = key.start_mark.line + 1
        if ident in seen:
            return line, key.value, seen[ident]
        seen[ident] = line
    return None


def check_document(root: Node) -> tuple[int, str] | None:
    """(line, problem) when the document's node graph is unsafe or invalid, else None."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    open_nodes: set[int] = set()
    distinct = 0
    budget = MIN_EXPANSION_BUDGET
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        kids = _children(node)
        if done:
            open_nodes.discard(nid)
            size[nid] = 1 + sum(size[id(k)] for k in kids)
            height[nid] = 1 + max((height[id(k)] for k in kids), default=0)
            line = node.start_mark.line + 1
            if height[nid] > MAX_DEPTH:
                return line, f"nesting deeper than {MAX_DEPTH} levels"
            if size[nid] > budget:
                return line, (
                    f"YAML aliases expand this document to more than {budget} nodes "
                    "(an alias bomb?); refusing to expand it"
                )
            continue
        if nid in size:
            continue
        if nid in open_nodes:
            return node.start_mark.line + 1, "recursive YAML alias (a node contains itself)"
        distinct += 1
        budget = max(MIN_EXPANSION_BUDGET, EXPANSION_FACTOR * distinct)
        if kids and isinstance(node.value[0], tuple):
            dup = _duplicate_key(node)
            if dup:
                line, key, first = dup
                return line, (
                    f"duplicate key {key!r} (first at line {first}); "
                    "Kubernetes rejects objects with duplicate fields"
                )
        open_nodes.add(nid)
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)
    return None


def _error_line(exc: Exception, last_line: int) -> int:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return min(int(mark.line) + 1, max(last_line, 1)) if mark is not None else 1


def _error_text(exc: Exception) -> str:
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    if problem and context and context_mark is not None:
        return f"{problem} ({context} started at line {context_mark.line + 1})"
    if problem or context:
        return str(problem or context)
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _compose(text: str) -> Iterator[tuple[Node, Any | Exception]]:
    """Yield (node, data) per document; data is an InputError-worthy exception when unusable."""
    loader = _make_loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            problem = check_document(node)
            if problem:
                yield node, ValueError(*problem)
                continue
            yield node, loader.construct_document(node)
    finally:
        loader.dispose()


def parse_text(text: str, file: str) -> ParsedFile:
    lines = text.splitlines()
    parsed = ParsedFile(text, [], [], lines)
    segs = segments(lines)
    seg_starts = [s.start for s in segs]
    try:
        composed = list(_compose(text))
    except Exception as exc:  # any parser failure is the input's fault, reported with a line
        template = first_template_line(lines)
        if template is not None:
            message = (
                f"unrendered template (Helm/Go template syntax `{{{{` at line {template}); "
                "render it with `helm template` first"
            )
            parsed.errors.append(InputError(file, template, message))
        else:
            parsed.errors.append(InputError(file, _error_line(exc, len(lines)), f"invalid YAML: {_error_text(exc)}"))
        return parsed
    for index, (node, data) in enumerate(composed):
        line0 = node.start_mark.line
        seg = segs[max(0, bisect.bisect_right(seg_starts, line0) - 1)]
        if isinstance(data, ValueError):
            line, message = data.args
            parsed.errors.append(InputError(file, int(line), str(message)))
            continue
        chars = node.end_mark.index - node.start_mark.index
        if chars > MAX_OBJECT_CHARS and not (isinstance(data, dict) and data.get("kind") == "List"):
            parsed.errors.append(
                InputError(
                    file,
                    line0 + 1,
                    f"document is {chars / 1048576:.1f} MiB; the API server accepts at most "
                    f"{MAX_OBJECT_CHARS // 1048576} MiB per object",
                )
            )
            continue
        parsed.documents.append(Document(index, data, node, seg, helm_source(lines, seg)))
    return parsed

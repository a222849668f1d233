"""Apply the engine's JSON Patch to a file with ruamel.yaml round-trip, keeping comments and layout.

Only the documents that have fixes are re-serialised; every other byte of the file is kept.
Each document's result is checked against ``jsonpatch.apply_patch`` on the same plain data
before anything is written.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from gpuguard.sources.yamlstream import MAX_OBJECT_CHARS
from linter.lint import FileResult
from policies import pointer
from policies.shapes import index_of, small_int
from policies.types import PatchOp


class FixError(Exception):
    pass


def to_plain(value: Any) -> Any:
    """A ruamel round-trip tree as plain JSON-like Python values."""
    if isinstance(value, dict):
        return {to_plain(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return value


def _is_flow(container: Any) -> bool:
    fa = getattr(container, "fa", None)
    return bool(fa is not None and fa.flow_style())


def _to_tree(value: Any, flow: bool) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, dict):
        cm = CommentedMap((k, _to_tree(v, flow)) for k, v in value.items())
        cm.fa.set_flow_style() if flow else cm.fa.set_block_style()
        return cm
    if isinstance(value, list):
        cs = CommentedSeq(_to_tree(v, flow) for v in value)
        cs.fa.set_flow_style() if flow else cs.fa.set_block_style()
        return cs
    return value


def _map_key(container: dict[Any, Any], token: str) -> Any:
    if token in container:
        return token
    for key in container:
        if str(key) == token:
            return key
    return None


def _parent(root: Any, path: str) -> tuple[Any, str]:
    tokens = pointer.split(path)
    if not tokens:
        raise FixError("cannot patch the document root")
    node = root
    for token in tokens[:-1]:
        if isinstance(node, dict) and _map_key(node, token) is not None:
            node = node[_map_key(node, token)]
        elif isinstance(node, list) and (index := index_of(token, len(node))) is not None:
            node = node[index]
        else:
            raise FixError(f"{path}: parent does not exist")
    return node, tokens[-1]


def apply_op(root: Any, op: PatchOp) -> None:
    """RFC 6902 add/replace/remove on a ruamel tree; new containers follow the parent's style."""
    parent, last = _parent(root, op.path)
    value = _to_tree(op.value, _is_flow(parent))
    if isinstance(parent, dict):
        key = _map_key(parent, last)
        if op.op == "add":
            parent[key if key is not None else last] = value
        elif op.op == "replace" and key is not None:
            parent[key] = value
        elif op.op == "remove" and key is not None:
            del parent[key]
        else:
            raise FixError(f"{op.op} {op.path}: no such member")
    elif isinstance(parent, list):
        found = small_int(last)
        index = len(parent) if last == "-" else found if found is not None else -1
        if op.op == "add" and 0 <= index <= len(parent):
            parent.insert(index, value)
        elif op.op == "replace" and 0 <= index < len(parent):
            parent[index] = value
        elif op.op == "remove" and 0 <= index < len(parent):
            del parent[index]
        else:
            raise FixError(f"{op.op} {op.path}: bad list index")
    else:
        raise FixError(f"{op.op} {op.path}: parent is not a mapping or a list")


def guess_indent(text: str) -> tuple[int, int]:
    """(mapping indent, sequence dash offset) most used in ``text`` (defaults 2 and 0)."""
    mapping: Counter[int] = Counter()
    offset: Counter[int] = Counter()
    parent_col: int | None = None
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if parent_col is not None and indent > parent_col:
            (offset if stripped.startswith("- ") or stripped == "-" else mapping)[indent - parent_col] += 1
        body, col = stripped, indent
        while body.startswith("- "):  # `- - key:` nests sequences; the key starts after the dashes
            rest = body[2:]
            body = rest.lstrip(" ")
            col += 2 + len(rest) - len(body)
        code = body.split(" #", 1)[0].rstrip()
        parent_col = col if code.endswith(":") and not code.startswith(("'", '"', "{", "[")) else None
    return (mapping.most_common(1)[0][0] if mapping else 2), (offset.most_common(1)[0][0] if offset else 0)


def _round_trip(segment_text: str, inline_start: bool) -> Any:
    from ruamel.yaml import YAML

    mapping, offset = guess_indent(segment_text)
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=mapping, sequence=max(mapping, offset + 2), offset=offset)
    yaml.explicit_start = inline_start
    return yaml


def _json_indent(text: str) -> int | None:
    """The indentation of a JSON document's first nested line; None for a one-line document."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    return len(lines[1]) - len(lines[1].lstrip(" ")) or None


def _fix_json(segment_text: str, ops: list[PatchOp]) -> str | None:
    """A strict-JSON document fixed and written back as JSON in its own layout; None if not JSON."""
    import jsonpatch

    try:
        before = json.loads(segment_text)
    except ValueError:
        return None
    after = jsonpatch.apply_patch(before, [op.to_dict() for op in ops])
    indent = _json_indent(segment_text)
    compact = indent is None and ", " not in segment_text and ": " not in segment_text
    separators = (",", ":") if compact else ((",", ": ") if indent else (", ", ": "))
    text = json.dumps(after, indent=indent, separators=separators, ensure_ascii=False)
    return text + ("\n" if segment_text.endswith("\n") else "")


def fix_document(segment_text: str, ops: Iterable[PatchOp], inline_start: bool = False) -> str:
    """The segment's text with ``ops`` applied; raises FixError when the result is not exact."""
    import jsonpatch

    ops = list(ops)
    if segment_text.lstrip().startswith("{") and not inline_start:
        # JSON manifests stay JSON (ruamel would write YAML flow style into a .json file).
        fixed = _fix_json(segment_text, ops)
        if fixed is not None:
            return fixed
    yaml = _round_trip(segment_text, inline_start)
    try:
        tree = yaml.load(segment_text)
    except Exception as exc:  # ruamel.yaml (YAML 1.2) refuses what libyaml (YAML 1.1) accepted
        raise FixError(f"the round-trip YAML parser cannot read this document: {_first_line(exc)}") from None
    before = to_plain(tree)
    for op in ops:
        apply_op(tree, op)
    expected = jsonpatch.apply_patch(before, [op.to_dict() for op in ops])
    if to_plain(tree) != expected:
        raise FixError("the fixed document differs from the JSON Patch result; not writing it")
    out = io.StringIO()
    try:
        yaml.dump(tree, out)
    except Exception as exc:
        raise FixError(f"the round-trip YAML writer failed: {_first_line(exc)}") from None
    return out.getvalue()


def _first_line(exc: Exception) -> str:
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} (line {mark.line + 1} of the document)"
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def fixed_text(result: FileResult, text: str) -> str | None:
    """The whole file with every document's fixes applied, or None when there is nothing to fix."""
    patches = result.patches()
    if not patches:
        return None
    newline = "\r\n" if text.count("\r\n") > text.count("\n") / 2 else "\n"
    pieces: list[str] = []
    end = len(text)
    # Splice from the end so earlier offsets stay valid.
    for index in sorted(patches, reverse=True):
        seg = result.segments[index]
        original = text[seg.begin : seg.stop]
        if len(original) > MAX_OBJECT_CHARS:
            raise FixError(
                f"the document at line {seg.start + 1} is {len(original) / 1048576:.1f} MiB; --fix rewrites "
                f"documents of at most {MAX_OBJECT_CHARS // 1048576} MiB"
            )
        fixed = fix_document(original.replace("\r\n", "\n"), patches[index], seg.inline)
        if not original.endswith(("\n", "\r")):
            fixed = fixed.rstrip("\n")
        if newline != "\n":
            fixed = fixed.replace("\n", newline)
        pieces += [text[seg.stop : end], fixed]
        end = seg.begin
    pieces.append(text[:end])
    return "".join(reversed(pieces))

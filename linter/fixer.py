"""Apply the engine's JSON Patch to a file, keeping comments and layout.

Each op becomes a small text edit where it can (``linter.textedit``); a document whose ops cannot
all be applied that way is re-serialised with ruamel.yaml round-trip in its own indentation.  Only
the documents that have fixes change; every other byte of the file is kept.  Each document's
result is checked against ``jsonpatch.apply_patch`` on the same plain data before anything is
written.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from typing import Any

import yaml

from gpuguard.sources.yamlstream import MAX_OBJECT_CHARS
from linter.lint import FileResult
from linter.textedit import Unsupported, document_indent, patch_text
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


def _round_trip(segment_text: str, inline_start: bool) -> Any:
    from ruamel.yaml import YAML

    indent = document_indent(segment_text)
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 1 << 20  # never fold a long scalar
    yaml.indent(mapping=indent.mapping, sequence=indent.offset + indent.gap, offset=indent.offset)
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


def _load_12(text: str) -> Any:
    from ruamel.yaml import YAML

    return YAML(typ="safe", pure=True).load(text)


def _load_11(text: str) -> Any:
    loader = yaml.CSafeLoader if getattr(yaml, "__with_libyaml__", False) else yaml.SafeLoader
    return yaml.load(text, Loader=loader)


def _reads_as_patched(before: str, after: str, ops: list[dict[str, Any]], before_12: Any = None) -> bool:
    """``after`` is ``before`` with the ops applied, read as YAML 1.1 (libyaml, kubectl) and, given
    ``before_12`` (``before`` read as YAML 1.2), as 1.2 too."""
    import jsonpatch

    try:
        # to_plain gives every node its own copy: an op at one path of the object the API server gets
        # changes only that path, where YAML aliases made several paths one node.
        if _load_11(after) != jsonpatch.apply_patch(to_plain(_load_11(before)), ops):
            return False
        return before_12 is None or bool(_load_12(after) == jsonpatch.apply_patch(to_plain(before_12), ops))
    except Exception:
        return False


def _has_aliases(text: str) -> bool:
    try:
        return any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=yaml.CSafeLoader))
    except yaml.YAMLError:
        return False


def fix_document(segment_text: str, ops: Iterable[PatchOp], inline_start: bool = False) -> str:
    """The segment's text with ``ops`` applied; raises FixError when the result is not exact.

    The ops become text edits where they can (``linter.textedit``: only the lines they add and the
    one they must change differ; untouched text reads the same in YAML 1.1 and 1.2 as before, and
    every scalar they write reads back the same in both, so the result is checked with libyaml).
    Otherwise the document is re-serialised by ruamel's round-trip writer in the document's own
    indentation, and checked in both YAML versions.
    """
    ops = list(ops)
    if segment_text.lstrip().startswith("{") and not inline_start:
        # JSON manifests stay JSON (ruamel would write YAML flow style into a .json file).
        fixed = _fix_json(segment_text.replace("\r\n", "\n"), ops)
        if fixed is not None:
            return _line_breaks_like(segment_text, fixed)
    plain_ops = [op.to_dict() for op in ops]
    try:
        edited: str | None = patch_text(segment_text, ops)
    except Unsupported:
        edited = None
    if edited is not None and _reads_as_patched(segment_text, edited, plain_ops):
        return edited
    lf = segment_text.replace("\r\n", "\n")
    try:
        before_12 = _load_12(lf)
    except Exception as exc:  # ruamel.yaml (YAML 1.2) refuses what libyaml (YAML 1.1) accepted
        raise FixError(f"the round-trip YAML parser cannot read this document: {_first_line(exc)}") from None
    rewritten = _rewrite(lf, ops, inline_start)
    if not _reads_as_patched(lf, rewritten, plain_ops, before_12):
        # ruamel writes YAML 1.2: a new `on` or `yes` would read as a boolean to kubectl (YAML 1.1)
        raise FixError("the rewritten document reads differently in YAML 1.1; not writing it")
    return _line_breaks_like(segment_text, rewritten)


def _line_breaks_like(original: str, fixed: str) -> str:
    """``fixed`` (LF line breaks) with ``original``'s final line break (or none) and, when most of
    ``original``'s lines end in CRLF, CRLF."""
    if not original.endswith(("\n", "\r")):
        fixed = fixed.rstrip("\n")
    if original.count("\r\n") > original.count("\n") / 2:
        fixed = fixed.replace("\n", "\r\n")
    return fixed


def _rewrite(segment_text: str, ops: list[PatchOp], inline_start: bool) -> str:
    """The document re-serialised by ruamel's round-trip writer with ``ops`` applied."""
    import jsonpatch

    yaml = _round_trip(segment_text, inline_start)
    try:
        tree = yaml.load(segment_text)
    except Exception as exc:
        raise FixError(f"the round-trip YAML parser cannot read this document: {_first_line(exc)}") from None
    before = to_plain(tree)
    for op in ops:
        apply_op(tree, op)
    expected = jsonpatch.apply_patch(before, [op.to_dict() for op in ops])
    if to_plain(tree) != expected:
        if _has_aliases(segment_text):
            raise FixError("a YAML alias repeats a node the fix changes at only some of the places it appears; "
                           "not writing it: apply the fix by hand")
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
        fixed = fix_document(original, patches[index], seg.inline)
        pieces += [text[seg.stop : end], fixed]
        end = seg.begin
    pieces.append(text[:end])
    return "".join(reversed(pieces))

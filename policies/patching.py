"""A small RFC 6902 applier used to combine rule fixes into one consistent patch.

Fixes of different rules are computed against the original object, so two fixes may both try to
create the same parent (``resources.limits``).  ``combine`` applies them in order to a working
copy and rewrites such an ``add`` of a mapping onto an existing mapping into per-key adds, and
drops ops that became no-ops; the result applies cleanly, in order, to the original object.

The working copy is copy-on-write: only the containers along the paths the ops touch are copied
(shallowly), the rest is shared with the caller's object, which is never modified.  A deep copy
of the whole object would recurse through data gpuguard never reads (a custom resource may carry
anything) and cost time in proportion to all of it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from policies import pointer
from policies.shapes import index_of
from policies.types import PatchOp


class PatchError(ValueError):
    pass


def _parent(doc: Any, path: str, owned: set[int] | None = None) -> tuple[Any, str]:
    """The container ``path`` ends in, and its last token.

    With ``owned`` (ids of containers this patch already copied), every container on the way is
    copied before it is entered unless owned, so writing to the parent never touches shared data.
    """
    tokens = pointer.split(path)
    if not tokens:
        raise PatchError("cannot patch the document root")
    parent = doc
    for token in tokens[:-1]:
        if isinstance(parent, dict) and token in parent:
            key: str | int = token
        elif isinstance(parent, list) and (index := index_of(token, len(parent))) is not None:
            key = index
        else:
            raise PatchError(f"{path}: parent does not exist")
        child = parent[key]  # type: ignore[index]
        if owned is not None and isinstance(child, dict | list) and id(child) not in owned:
            child = copy.copy(child)
            owned.add(id(child))
            parent[key] = child  # type: ignore[index]
        parent = child
    return parent, tokens[-1]


class _Workspace:
    """A copy-on-write view of a document that patch operations may modify."""

    def __init__(self, doc: Any) -> None:
        self.doc = copy.copy(doc) if isinstance(doc, dict | list) else doc
        self.owned = {id(self.doc)}

    def apply(self, op: PatchOp) -> None:
        apply_op(self.doc, op, self.owned)


def apply_op(doc: Any, op: PatchOp, owned: set[int] | None = None) -> None:
    parent, last = _parent(doc, op.path, owned)
    if op.op in ("add", "replace"):
        value = copy.deepcopy(op.value)
        if isinstance(parent, dict):
            if op.op == "replace" and last not in parent:
                raise PatchError(f"{op.path}: nothing to replace")
            parent[last] = value
        elif isinstance(parent, list):
            if last == "-":
                parent.append(value)
            elif (index := index_of(last, len(parent) + 1)) is not None:
                if op.op == "add":
                    parent.insert(index, value)
                else:
                    parent[index] = value
            else:
                raise PatchError(f"{op.path}: bad list index")
        else:
            raise PatchError(f"{op.path}: parent is not a container")
    elif op.op == "remove":
        if isinstance(parent, dict) and last in parent:
            del parent[last]
        elif isinstance(parent, list) and (index := index_of(last, len(parent))) is not None:
            del parent[index]
        else:
            raise PatchError(f"{op.path}: nothing to remove")
    else:
        raise PatchError(f"unsupported op {op.op!r}")


def apply_patch(doc: Any, ops: Iterable[PatchOp]) -> Any:
    """``doc`` with ``ops`` applied; ``doc`` itself is not modified (copy-on-write)."""
    work = _Workspace(doc)
    for op in ops:
        work.apply(op)
    return work.doc


def combine(doc: Any, ops: Iterable[PatchOp]) -> list[PatchOp]:
    """Ops rewritten so that, applied in order to ``doc``, none conflicts with another."""
    space = _Workspace(doc)
    work = space.doc
    out: list[PatchOp] = []

    def emit(op: PatchOp) -> None:
        try:
            current = pointer.resolve(work, op.path)
            exists = True
        except KeyError:
            current, exists = None, False
        if op.op == "add" and exists and not op.path.endswith("/-"):
            parent, _ = _parent(work, op.path)
            if isinstance(parent, dict):
                if isinstance(current, dict) and isinstance(op.value, dict):
                    for k, v in op.value.items():
                        emit(PatchOp("add", pointer.join(op.path, (k,)), v))
                    return
                if current == op.value:
                    return
        if op.op == "add" and op.path.endswith("/-") and exists is False:
            try:
                container = pointer.resolve(work, op.path[: -len("/-")])
            except KeyError:
                container = None
            if isinstance(container, list) and op.value in container:
                return
        try:
            space.apply(op)
        except PatchError:
            return
        out.append(op)

    for op in ops:
        emit(op)
    return out

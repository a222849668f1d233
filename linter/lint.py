"""Lint one input's text: parse documents, evaluate each Kubernetes object, place its findings."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from gpuguard.sources.loader import Document, ParsedFile, parse_text
from gpuguard.sources.yamlsafe import InputError
from linter.positions import locate
from policies import pointer
from policies.config import Config
from policies.engine import Evaluation, UnrenderedPlaceholder, evaluate
from policies.facts import ClusterFacts
from policies.images import ImageFacts
from policies.types import Finding, PatchOp


@dataclass(frozen=True, slots=True)
class Located:
    """A finding placed in its file: the pointer is into the whole document (``/items/N/...``)."""

    finding: Finding
    file: str
    line: int
    column: int
    source: str | None

    def to_dict(self) -> dict[str, Any]:
        out = self.finding.to_dict()
        out.update(file=self.file, line=self.line, column=self.column, source=self.source)
        return out


@dataclass(slots=True)
class CheckedObject:
    document: Document
    prefix: str  # "" for a document, "/items/N" for an item of a List
    evaluation: Evaluation

    def patch(self) -> list[PatchOp]:
        return [_rebase_op(op, self.prefix) for op in self.evaluation.patch()]


@dataclass(slots=True)
class FileResult:
    file: str
    parsed: ParsedFile | None = None
    findings: list[Located] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    objects: list[CheckedObject] = field(default_factory=list)
    skipped_rules: set[str] = field(default_factory=set)

    @property
    def documents(self) -> int:
        return len(self.parsed.documents) if self.parsed else 0

    def patches(self) -> dict[int, list[PatchOp]]:
        """Combined fix ops per document index (documents without fixes left out)."""
        out: dict[int, list[PatchOp]] = {}
        for obj in self.objects:
            ops = obj.patch()
            if ops:
                out.setdefault(obj.document.index, []).extend(ops)
        return out


def _rebase_op(op: PatchOp, prefix: str) -> PatchOp:
    return op if not prefix else PatchOp(op.op, prefix + op.path, op.value)


def _rebase(finding: Finding, prefix: str) -> Finding:
    if not prefix:
        return finding
    return dataclasses.replace(
        finding, path=prefix + finding.path, fix=tuple(_rebase_op(op, prefix) for op in finding.fix)
    )


def _is_object(value: Any) -> bool:
    return isinstance(value, dict) and "apiVersion" in value and "kind" in value


def _objects(doc: Document, file: str, line: int) -> tuple[list[tuple[str, dict[str, Any]]], list[InputError]]:
    """The Kubernetes objects a document holds, with their pointer prefix; non-Kubernetes → none."""
    data = doc.data
    if isinstance(data, list):
        if any(_is_object(item) for item in data):
            return [], [
                InputError(
                    file,
                    line,
                    f"document is a YAML list of {len(data)} items, not a Kubernetes object; put each "
                    "object in its own `---` document or wrap them in `kind: List` with `items:`",
                )
            ]
        return [], []
    if not _is_object(data):
        return [], []  # empty, scalar or non-Kubernetes YAML: nothing to check
    kind, api_version = data["kind"], data["apiVersion"]
    if not isinstance(kind, str) or not isinstance(api_version, str):
        return [], [InputError(file, line, "apiVersion and kind must be strings")]
    if kind != "List" or "items" not in data:
        return [("", data)], []
    items = data["items"]
    if items is None:
        return [], []
    if not isinstance(items, list):
        return [], [InputError(file, line, "List.items must be a list of Kubernetes objects")]
    objects: list[tuple[str, dict[str, Any]]] = []
    errors: list[InputError] = []
    for i, item in enumerate(items):
        if _is_object(item):
            objects.append((f"/items/{i}", item))
        elif item is not None:
            item_line = locate(doc.node, f"/items/{i}")[0] if doc.node is not None else line
            errors.append(InputError(file, item_line, f"items[{i}] is not a Kubernetes object (no apiVersion/kind)"))
    return objects, errors


def placeholder_message(placeholder: UnrenderedPlaceholder, at: str) -> str:
    return (
        f"unrendered placeholder {placeholder.text} where a {placeholder.what} belongs "
        f"({pointer.to_dotted(at)}): render the "
        "manifest first (envsubst, kustomize, helm template or your deploy tool), then lint the result"
    )


def objects_in(doc: Document, file: str) -> list[dict[str, Any]]:
    """The Kubernetes objects of one parsed document (what ``lint_text`` evaluates)."""
    line = doc.node.start_mark.line + 1 if doc.node is not None else 1
    return [obj for _, obj in _objects(doc, file, line)[0]]


def lint_text(
    text: str, file: str, config: Config, facts: ClusterFacts, images: ImageFacts | None = None
) -> FileResult:
    result = FileResult(file)
    parsed = parse_text(text, file)
    result.parsed = parsed
    result.errors.extend(parsed.errors)
    for doc in parsed.documents:
        line = doc.node.start_mark.line + 1 if doc.node is not None else 1
        objects, errors = _objects(doc, file, line)
        result.errors.extend(errors)
        for prefix, obj in objects:
            try:
                ev = evaluate(obj, config, facts, images)
            except Exception as exc:  # an engine fault must not hide the other inputs' results
                name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
                result.errors.append(
                    InputError(file, line, f"internal error checking {obj.get('kind')} {name!r}: {exc!r}")
                )
                continue
            result.objects.append(CheckedObject(doc, prefix, ev))
            result.skipped_rules.update(ev.skipped_rules)
            for placeholder in ev.placeholders:
                at = prefix + placeholder.path
                row = locate(doc.node, at)[0] if doc.node is not None else line
                result.errors.append(InputError(file, row, placeholder_message(placeholder, at)))
            for finding in ev.findings:
                placed = _rebase(finding, prefix)
                row, col = locate(doc.node, placed.path) if doc.node is not None else (line, 1)
                result.findings.append(Located(placed, file, row, col, doc.source))
    result.findings.sort(key=lambda f: (f.line, f.column, f.finding.rule))
    return result


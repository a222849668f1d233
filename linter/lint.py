"""Lint one input's text: stream its documents, evaluate each Kubernetes object, place its findings.

Documents are handled one at a time (the items of a large ``kind: List`` one item at a time) and
only findings, input errors and, when asked, fix ops are kept: memory is the text plus one document.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from gpuguard.sources import env_inputs, kserve_inputs
from gpuguard.sources.dra_inputs import with_file
from gpuguard.sources.layout import Layout, LineCursor, Segment
from gpuguard.sources.yamlsafe import InputError
from gpuguard.sources.yamlstream import ListEnd, Unit, stream
from linter.positions import locate
from policies import pointer
from policies.config import Config
from policies.dra.facts import NO_INPUTS, DraInputs
from policies.engine import UnrenderedPlaceholder, evaluate
from policies.env_sources import NO_SOURCES, EnvSources
from policies.facts import ClusterFacts
from policies.images import ImageFacts
from policies.kserve import NO_VIEW, KServeView
from policies.podspec import misshapen_message, misshapen_templates
from policies.types import Finding, PatchOp
from policies.wording import plural


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
class _Sink:
    """What checking some objects produced (a file's, or a streamed List's until it is confirmed)."""

    findings: list[Located] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    objects: int = 0
    skipped_rules: set[str] = field(default_factory=set)
    fixes: dict[int, list[PatchOp]] = field(default_factory=dict)
    segments: dict[int, Segment] = field(default_factory=dict)

    def absorb(self, other: _Sink) -> None:
        self.findings.extend(other.findings)
        self.errors.extend(other.errors)
        self.objects += other.objects
        self.skipped_rules.update(other.skipped_rules)
        for index, ops in other.fixes.items():
            self.fixes.setdefault(index, []).extend(ops)
        self.segments.update(other.segments)


@dataclass(frozen=True, slots=True)
class HelmOrigin:
    """A document rendered from a Helm template: its lines [start, end) and its `# Source:` line
    (0-based), for reports that name the template (linter.artifacts)."""

    start: int
    end: int
    source_line: int
    template: str


@dataclass(slots=True)
class FileResult(_Sink):
    file: str = ""
    documents: int = 0
    excerpts: dict[int, str] = field(default_factory=dict)  # source lines of findings, for text output
    helm_origins: list[HelmOrigin] = field(default_factory=list)

    def patches(self) -> dict[int, list[PatchOp]]:
        """Combined fix ops per document index (documents without fixes left out); collected only
        when ``lint_text`` was asked for fixes."""
        return {index: ops for index, ops in self.fixes.items() if ops}


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


def _header_error(data: dict[str, Any], file: str, line: int) -> InputError | None:
    if not isinstance(data["kind"], str) or not isinstance(data["apiVersion"], str):
        return InputError(file, line, "apiVersion and kind must be strings")
    return None


def _objects(unit: Unit, file: str) -> tuple[list[tuple[str, dict[str, Any]]], list[InputError]]:
    """The Kubernetes objects a document holds, with their pointer prefix; non-Kubernetes → none."""
    data, line = unit.data, unit.line
    if isinstance(data, list):
        if any(_is_object(item) for item in data):
            return [], [
                InputError(
                    file,
                    line,
                    f"document is a YAML list of {plural(len(data), 'item')}, not a Kubernetes object; put each "
                    "object in its own `---` document or wrap them in `kind: List` with `items:`",
                )
            ]
        return [], []
    if not _is_object(data):
        return [], []  # empty, scalar or non-Kubernetes YAML: nothing to check
    error = _header_error(data, file, line)
    if error is not None:
        return [], [error]
    if data["kind"] != "List" or "items" not in data:
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
            item_line = locate(unit.positions, f"/items/{i}")[0]
            errors.append(InputError(file, item_line, f"items[{i}] is not a Kubernetes object (no apiVersion/kind)"))
    return objects, errors


def objects_in(unit: Unit, file: str) -> list[dict[str, Any]]:
    """The Kubernetes objects of one document or streamed List item (what ``lint_text`` evaluates)."""
    if unit.streamed:
        return [unit.data] if _is_object(unit.data) else []
    return [obj for _, obj in _objects(unit, file)[0]]


@dataclass(slots=True)
class _Checker:
    file: str
    config: Config
    facts: ClusterFacts
    images: ImageFacts | None
    fixes: bool
    dra_inputs: DraInputs = NO_INPUTS
    kserve: KServeView = NO_VIEW
    env_sources: EnvSources | None = None

    def check(self, sink: _Sink, unit: Unit, prefix: str, obj: dict[str, Any], relative: bool) -> None:
        """Evaluate one object; ``relative``: its pointers are located in ``unit`` without ``prefix``."""
        try:
            ev = evaluate(obj, self.config, self.facts, self.images, dra_inputs=self.dra_inputs, kserve=self.kserve,
                          env_sources=self.env_sources)
            ops = [_rebase_op(op, prefix) for op in ev.patch()] if self.fixes else []
        except Exception as exc:  # an engine fault must not hide the other inputs' results
            meta = obj.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            sink.errors.append(
                InputError(self.file, unit.line, f"internal error checking {obj.get('kind')} {name!r}: {exc!r}")
            )
            return
        sink.objects += 1
        sink.skipped_rules.update(ev.skipped_rules)
        if ops:
            sink.fixes.setdefault(unit.doc_index, []).extend(ops)
            sink.segments[unit.doc_index] = unit.segment
        for placeholder in ev.placeholders:
            at = prefix + placeholder.path
            row = locate(unit.positions, placeholder.path if relative else at)[0]
            sink.errors.append(InputError(self.file, row, placeholder_message(placeholder, at)))
        for use in ev.ignore_uses:  # a misspelled rule id skips nothing: said where it is written
            unknown = use.unknown_message()
            if unknown is not None:
                row = locate(unit.positions, use.pointer if relative else prefix + use.pointer)[0]
                sink.errors.append(InputError(self.file, row, unknown))
        for place in misshapen_templates(obj, self.config.workload_index):
            at = prefix + place.at
            row = locate(unit.positions, place.at if relative else at)[0]
            shown = dataclasses.replace(place, at=at)
            sink.errors.append(InputError(self.file, row, misshapen_message(obj.get("kind"), shown)))
        for finding in ev.findings:
            placed = _rebase(finding, prefix)
            row, col = locate(unit.positions, finding.path if relative else placed.path)
            sink.findings.append(Located(placed, self.file, row, col, unit.source))


def placeholder_message(placeholder: UnrenderedPlaceholder, at: str) -> str:
    return (
        f"unrendered placeholder {placeholder.text} where a {placeholder.what} belongs "
        f"({pointer.to_dotted(at)}): render the "
        "manifest first (envsubst, kustomize, helm template or your deploy tool), then lint the result"
    )


def lint_text(
    text: str,
    file: str,
    config: Config,
    facts: ClusterFacts,
    images: ImageFacts | None = None,
    *,
    fixes: bool = False,
    excerpts: bool = True,
    dra_inputs: DraInputs | None = None,
    kserve: KServeView | None = None,
    env_sources: EnvSources | None = None,
) -> FileResult:
    """Findings and input errors of one input; ``fixes``: also collect each document's fix ops;
    ``excerpts``: keep the source line of every finding (for text output); ``dra_inputs`` and
    ``kserve``: the DRA and KServe objects of the other inputs of the run (this text's own are added,
    nearest); ``env_sources``: the run's ConfigMaps and Secrets, which envFrom reads (this text's own
    are added, nearest: a run of manifests always knows its own)."""
    result = FileResult(file=file)
    checker = _Checker(file, config, facts, images, fixes, with_file(dra_inputs or NO_INPUTS, text, file),
                       kserve_inputs.with_file(kserve or NO_VIEW, text, file),
                       env_inputs.with_file(env_sources or NO_SOURCES, text, file))
    layout = Layout(text)
    streamed = _Sink()  # the items of a large List, until its end says whether it is a List
    in_list = False
    for item in stream(text, file, layout=layout):
        if isinstance(item, InputError):
            (streamed if in_list else result).errors.append(item)
        elif isinstance(item, ListEnd):
            in_list = False
            error = item.error
            if item.stands and _is_object(item.header):
                error = _header_error(item.header, file, item.line)
                if error is None:
                    result.absorb(streamed)
                    result.documents += 1
            if error is not None:
                result.errors.append(error)
            streamed = _Sink()  # withdrawn unless absorbed; a document that was no List follows whole
        elif item.streamed:
            in_list = True
            if _is_object(item.data):
                checker.check(streamed, item, item.prefix, item.data, relative=True)
            elif item.data is not None:
                streamed.errors.append(
                    InputError(file, item.line, f"items[{item.prefix.rsplit('/', 1)[1]}] is not a Kubernetes object "
                               "(no apiVersion/kind)")
                )
        else:
            result.documents += 1
            objects, errors = _objects(item, file)
            result.errors.extend(errors)
            for prefix, obj in objects:
                checker.check(result, item, prefix, obj, relative=False)
    result.findings.sort(key=lambda f: (f.line, f.column, f.finding.rule))
    for seg in layout.segments:
        found = layout.helm_source_line(seg)
        if found is not None:
            result.helm_origins.append(HelmOrigin(seg.start, seg.end, found[0], found[1]))
    # Helm output keeps the lines of its findings too: linter.artifacts finds them in the templates.
    if (excerpts or result.helm_origins) and result.findings:
        cursor = LineCursor(layout)
        for line in sorted({f.line for f in result.findings}):
            source = cursor.get(line)
            if source is not None:
                result.excerpts[line] = source
    return result

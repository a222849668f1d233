"""Judge existing objects one at a time against the current facts and, optionally, planned ones.

``Auditor.judge`` evaluates an object and returns what it found (a :class:`Judged`) without
keeping the object; ``commit`` records it.  The two are apart so that a reader can hold back the
items of a streamed ``kind: List`` until the List stands (see ``gpuguard.audit.dumps``).  Memory
is the findings, one small record per object for ownership, and at most ``MAX_MATRIX_ROWS`` matrix
rows; with ``limit_per_namespace`` (the webhook's periodic audit) the findings are bounded too.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuguard.audit.changes import classify, planned_facts
from gpuguard.audit.model import (
    LIVE,
    AuditFinding,
    AuditResult,
    Column,
    Matrix,
    MatrixRow,
    ObjectRef,
    Origin,
)
from gpuguard.audit.ownership import Link, Ownership, controller_link
from gpuguard.sources.yamlsafe import InputError
from policies import pointer
from policies.config import Config
from policies.cuda.versions import format_driver
from policies.engine import IGNORE_ANNOTATION, cluster_findings, evaluate, is_gpu_related, kserve_view
from policies.facts import ClusterFacts, NodeGroup
from policies.images import ImageFacts
from policies.placement import Cell, Placer, merge_cells
from policies.podspec import PodTemplate, extract, misshapen_message, misshapen_templates
from policies.registry import WORKLOAD_RULES
from policies.shapes import as_dict
from policies.types import Severity
from policies.wording import plural

MAX_MATRIX_ROWS = 300
MAX_IGNORE_NOTES = 20  # objects whose misspelled gpuguard.io/ignore is named in the notes (the rest counted)
MAX_WHOLE_JOB_NOTES = 20  # jobs the planned cluster cannot run as a whole, named in the notes (the rest counted)
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def object_ref(obj: Mapping[str, Any]) -> ObjectRef:
    meta = as_dict(obj.get("metadata"))
    name = _text(meta.get("name")) or _text(meta.get("generateName"))
    return ObjectRef(_text(obj.get("apiVersion")), _text(obj.get("kind")), name, _text(meta.get("namespace")),
                     _text(meta.get("uid")))


def is_object(obj: Any) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get("apiVersion"), str) and isinstance(obj.get("kind"), str)


@dataclass(slots=True)
class Judged:
    """One object's evaluation, not yet recorded."""

    ref: ObjectRef
    origin: Origin
    link: Link | None
    readable: bool
    outcome: str  # judged | terminal | exempt | owned (reported through an owner known already)
    findings: list[AuditFinding] = field(default_factory=list)
    gpu: bool = False
    ignored: bool = False
    skipped: tuple[str, ...] = ()
    rows: list[MatrixRow] = field(default_factory=list)
    owner: str | None = None
    errors: list[InputError] = field(default_factory=list)  # where its templates hold no object
    notes: list[str] = field(default_factory=list)  # gpuguard.io/ignore names that are no rule id
    broken: str = ""  # with --cluster-after: why the planned cluster cannot run it as a whole any more


def _template_label(pod: PodTemplate) -> str:
    """Where the template sits in its object, for people ("" for a Pod's own spec)."""
    at = pod.spec_pointer
    if pod.shape == "template" and at.endswith("/spec"):
        at = at[: -len("/spec")]
    return pointer.to_dotted(at) if at else ""


def _column_key(group: NodeGroup) -> tuple[object, ...]:
    """What a column of the matrix stands for: groups differing only in labels the matrix does not
    show (zones, say) share a column."""
    rep = group.representative
    return (rep.name if rep.pool is not None else None, rep.gpu_product,
            rep.labels.get("node.kubernetes.io/instance-type"), rep.driver_version, rep.taints, rep.unschedulable,
            tuple(sorted((k, v) for k, v in rep.allocatable.items() if "/" in k)))


def _columns(groups: list[NodeGroup]) -> tuple[list[Column], list[int], list[set[str]]]:
    """Columns, the column of each group, and each column's node names."""
    index: dict[tuple[object, ...], int] = {}
    members: list[list[NodeGroup]] = []
    of_group = []
    for group in groups:
        key = _column_key(group)
        if key not in index:
            index[key] = len(members)
            members.append([])
        members[index[key]].append(group)
        of_group.append(index[key])
    return [_column(gs) for gs in members], of_group, [{m.name for g in gs for m in g.members} for gs in members]


def _column(groups: list[NodeGroup]) -> Column:
    rep = groups[0].representative
    size = sum(g.size for g in groups)
    if rep.pool is not None:
        label = f"{rep.pool.origin} {rep.name}"
    else:
        label = rep.gpu_product or rep.labels.get("node.kubernetes.io/instance-type") or "GPU nodes"
    parts = [plural(size, "node") if rep.pool is None else "scales up on demand"]
    instance = rep.labels.get("node.kubernetes.io/instance-type")
    if instance and instance != label:
        parts.append(instance)
    driver = rep.driver_version
    if driver:
        parts.append(f"driver {format_driver(driver)}")
    gpus = [f"{q} {name}" for name, q in sorted(rep.allocatable.items()) if "/" in name and q > 0]
    if gpus:
        parts.append(", ".join(gpus))
    if rep.taints:
        parts.append("taints " + ", ".join(str(t) for t in rep.taints))
    if rep.unschedulable:
        parts.append("cordoned")
    return Column(label, "; ".join(parts), size, rep.name)


def _merge(cells: list[Cell], column_of: list[int]) -> list[Cell]:
    by_column: dict[int, list[Cell]] = {}
    for cell, column in zip(cells, column_of, strict=True):
        by_column.setdefault(column, []).append(cell)
    return [merge_cells(by_column[i]) for i in range(len(by_column))]


class Auditor:
    def __init__(
        self,
        config: Config,
        facts: ClusterFacts,
        after: ClusterFacts | None = None,
        *,
        images: ImageFacts | None = None,
        matrix: bool = False,
        limit_per_namespace: int | None = None,
        cluster: str | None = None,
        cluster_after: str | None = None,
        fail_on: Severity = Severity.ERROR,
    ) -> None:
        self.config = config
        self.facts = facts
        kept: list[str] = []
        if after is not None:
            after, kept = planned_facts(after, facts)
        self.after = after
        self.images = images
        self.limit = limit_per_namespace
        self.ownership = Ownership()
        self.result = AuditResult(cluster=cluster, cluster_after=cluster_after, fail_on=fail_on)
        self._findings: dict[str, list[AuditFinding]] = {}
        self._refs: dict[str, ObjectRef] = {}  # objects reported themselves
        self._other: set[str] = set()  # objects seen but not reported themselves (duplicates are counted)
        self._gpu: set[str] = set()
        self._per_namespace: dict[str, list[tuple[int, int, str, AuditFinding]]] = {}  # min-heaps by severity
        self._sequence = 0
        self._skipped: set[str] = set()
        self._rows_bad: list[MatrixRow] = []
        self._rows_clean: list[MatrixRow] = []
        self._rows_omitted = 0
        self._ignore_notes = 0
        self._broken: dict[str, str] = {}  # object key -> why the planned cluster cannot run it as a whole
        self._placer: Placer | None = None
        self._before_placer: Placer | None = None
        self._before_groups: list[list[int]] = []  # per column: the groups of today sharing its nodes
        self._column_of: list[int] = []
        self._matrix: Matrix | None = None
        if matrix:
            self._set_up_matrix(cluster, cluster_after)
        if kept:
            self.note(f"the planned cluster ({cluster_after or 'planned facts'}) holds no "
                      f"{' and no '.join(kept)}: today's are judged with it")

    # --- the node-pool matrix -----------------------------------------------------------------
    def _set_up_matrix(self, cluster: str | None, cluster_after: str | None) -> None:
        judged = self.after if self.after is not None else self.facts
        self._placer = Placer(judged, self.config, self.images)
        columns, self._column_of, names = _columns(self._placer.groups)
        self._matrix = Matrix(columns, [], (cluster_after if self.after is not None else cluster) or "none")
        if self.after is not None:
            self._before_placer = Placer(self.facts, self.config, self.images)
            before, _, before_names = _columns(self._before_placer.groups)
            # a cell's "before" is the same nodes' verdict today (a rolled-back driver changes a
            # group's labels, not its nodes): the groups of today that share nodes with the column
            self._before_groups = [
                [i for i, g in enumerate(self._before_placer.groups) if any(m.name in new for m in g.members)]
                for new in names
            ]
            now = set().union(*names) if names else set()
            self._matrix.removed = [f"{c.label} ({c.detail})" for c, old in zip(before, before_names, strict=True)
                                    if not old & now]

    def _rows(self, obj: dict[str, Any], ref: ObjectRef, worst: Severity | None) -> list[MatrixRow]:
        assert self._placer is not None
        bucket = self._rows_bad if worst is not None else self._rows_clean
        view = kserve_view(self.after if self.after is not None else self.facts)
        templates = [p for p in extract(obj, self.config.workload_index, kserve=view)
                     if is_gpu_related(p, self.config)]
        rows: list[MatrixRow] = []
        for pod in templates:
            if len(bucket) + len(rows) >= MAX_MATRIX_ROWS:
                self._rows_omitted += 1
                continue
            cells = self._placer.cells(obj, pod)
            if cells is None:
                continue
            merged = _merge(cells, self._column_of)
            before: tuple[Cell | None, ...] = ()
            if self._before_placer is not None:
                old = self._before_placer.cells(obj, pod)
                before = tuple(merge_cells([old[i] for i in groups]) if old is not None and groups else None
                               for groups in self._before_groups)
            rows.append(MatrixRow(ref, _template_label(pod), tuple(merged), before, worst))
        return rows

    # --- judging ------------------------------------------------------------------------------
    def judge(self, obj: dict[str, Any], origin: Origin) -> Judged:
        ref = object_ref(obj)
        link = controller_link(obj, ref.namespace)
        readable = (ref.group, ref.kind) in self.config.workload_index
        if ref.kind == "Pod" and ref.group == "" and _text(as_dict(obj.get("status")).get("phase")) in TERMINAL_PHASES:
            return Judged(ref, origin, link, readable, "terminal")
        # Known at once, so that the pods of a List see the controllers listed before them even
        # while the List's items are held back (``forget`` withdraws it).
        self.ownership.add(ref, link, readable)
        if link is not None:
            owner = self.ownership.owner_via(link)
            if owner is not None:
                return Judged(ref, origin, link, readable, "owned", owner=owner)
        ev = evaluate(obj, self.config, self.facts, self.images)
        if ev.exempt:
            return Judged(ref, origin, link, readable, "exempt")
        judged = Judged(ref, origin, link, readable, "judged", gpu=ev.gpu_related,
                        ignored=any(u.honoured for u in ev.ignore_uses))
        if origin.file is not None:  # a dump: what the API server would have refused is an input error
            judged.errors = [
                InputError(origin.file, origin.line or 0, f"{ref.kind} {ref.namespace}/{ref.name}: "
                           + misshapen_message(ref.kind, place))
                for place in misshapen_templates(obj, self.config.workload_index)
            ]
        where = f"{origin.file}:{origin.line}: " if origin.file is not None and origin.line else ""
        judged.notes = [f"{where}{ref.qualified()}: {message}"
                        for message in (u.unknown_message() for u in ev.ignore_uses) if message is not None]
        if self.after is None:
            judged.findings = [AuditFinding(f, ref, origin) for f in ev.findings]
            judged.skipped = ev.skipped_rules
        else:
            later = evaluate(obj, self.config, self.after, self.images)
            judged.findings = [AuditFinding(s.finding, ref, origin, s.change, s.previous)
                               for s in classify(obj, ev.findings, later.findings)]
            broken = [f.finding for f in judged.findings if f.change == "introduced"
                      and f.finding.rule in WORKLOAD_RULES and f.finding.severity is Severity.ERROR]
            if broken:
                reasons = "; ".join(f"{f.rule}: {f.message.split('; ', 1)[0]}" for f in broken)
                judged.broken = f"the planned cluster cannot run {ref.qualified()} as a whole any more ({reasons})"
            judged.skipped = tuple(sorted(set(ev.skipped_rules) | set(later.skipped_rules)))
        if self._placer is not None and ev.gpu_related:
            current = [f for f in judged.findings if f.change != "resolved"]
            worst = max((f.severity for f in current), default=None)
            judged.rows = self._rows(obj, ref, worst)
        return judged

    def commit(self, judged: Judged) -> None:
        ref = judged.ref
        key = ref.key
        counts = self.result.counts
        if key in self._refs or key in self._other:
            counts.duplicates += 1
            return
        if judged.outcome == "terminal":
            self._other.add(key)
            counts.terminal_pods += 1
            return
        self.ownership.add(ref, judged.link, judged.readable)
        if judged.outcome == "owned":
            self._other.add(key)
            assert judged.owner is not None
            self._through(judged.owner)
            if ref.kind == "Pod":  # pods own nothing gpuguard reads: their link is not needed any more
                self.ownership.remove(ref)
            return
        if judged.outcome == "exempt":
            self._other.add(key)
            counts.exempt += 1
            return
        self._refs[key] = ref
        counts.objects += 1
        self.result.errors.extend(judged.errors)
        for note in judged.notes:
            self._ignore_note(note)
        counts.ignore_annotations += judged.ignored
        self._skipped.update(judged.skipped)
        if judged.gpu:
            self._gpu.add(key)
        if judged.findings:
            self._findings[key] = self._bounded(key, ref.namespace, judged.findings)
        if judged.broken:
            self._broken[key] = judged.broken
        for row in judged.rows:
            (self._rows_bad if row.worst is not None else self._rows_clean).append(row)

    def _through(self, owner: str) -> None:
        self.result.counts.through_owners += 1
        self.result.children[owner] = self.result.children.get(owner, 0) + 1

    def _bounded(self, key: str, namespace: str, findings: list[AuditFinding]) -> list[AuditFinding]:
        """At most ``limit`` findings per namespace: a more severe one evicts the least severe kept."""
        if self.limit is None:
            return findings
        heap = self._per_namespace.setdefault(namespace, [])
        kept = []
        for f in sorted(findings, key=lambda f: -f.severity):
            self._sequence += 1
            if len(heap) < self.limit:
                heapq.heappush(heap, (int(f.severity), self._sequence, key, f))
                kept.append(f)
                continue
            if self.limit and heap[0][0] < f.severity:
                _, _, old_key, old = heapq.heapreplace(heap, (int(f.severity), self._sequence, key, f))
                kept.append(f)
                if old in kept:
                    kept.remove(old)
                else:
                    self._findings[old_key].remove(old)
            self.result.truncated[namespace] = self.result.truncated.get(namespace, 0) + 1
        return kept

    def forget(self, judged: Judged) -> None:
        """Withdraw a judged object that will not be committed."""
        if judged.ref.key not in self._refs and judged.ref.key not in self._other:
            self.ownership.remove(judged.ref)

    def feed(self, obj: dict[str, Any], origin: Origin) -> None:
        self.commit(self.judge(obj, origin))

    def error(self, error: InputError) -> None:
        self.result.errors.append(error)

    def _ignore_note(self, text: str) -> None:
        """A misspelled gpuguard.io/ignore, said for the first MAX_IGNORE_NOTES objects (then counted)."""
        self._ignore_notes += 1
        if self._ignore_notes <= MAX_IGNORE_NOTES:
            self.note(text)

    def note(self, text: str) -> None:
        if text not in self.result.notes:
            self.result.notes.append(text)

    # --- the end ------------------------------------------------------------------------------
    def _node_findings(self) -> None:
        """Problems of the nodes themselves (policies.engine.cluster_findings), one finding on each Node
        rather than one per workload that may land there; with planned facts, sorted by change."""
        now = cluster_findings(self.facts, self.config)
        later = cluster_findings(self.after, self.config) if self.after is not None else None
        nodes = sorted({f.name for f in (*now, *(later or ()))})
        for name in nodes:
            ref = ObjectRef("v1", "Node", name, "", "")
            before = [f for f in now if f.name == name]
            if later is None:
                found = [AuditFinding(f, ref, LIVE) for f in before]
            else:
                after = [f for f in later if f.name == name]
                found = [AuditFinding(s.finding, ref, LIVE, s.change, s.previous) for s in classify({}, before, after)]
            if found:
                self._findings[ref.key] = self._bounded(ref.key, "", found)

    def finish(self) -> AuditResult:
        """Apply ownership learnt after the fact (an owner read after its pods), add what is wrong with
        the nodes themselves, and sort."""
        result = self.result
        self._node_findings()
        for key in list(self._refs):
            owner = self.ownership.owner(key)
            if owner is None or owner == key:
                continue
            del self._refs[key]
            self._findings.pop(key, None)
            self._gpu.discard(key)
            result.counts.objects -= 1
            self._through(owner)
        kept = set(self._refs)
        result.counts.gpu_workloads = len(self._gpu)
        result.gpu_objects = sorted((self._refs[k] for k in self._gpu),
                                    key=lambda r: (r.namespace, r.kind, r.name))
        result.findings = sorted(
            (f for key, found in self._findings.items() for f in found),
            key=lambda f: (f.ref.namespace, f.ref.kind, f.ref.name, -f.severity, f.finding.rule, f.finding.path),
        )
        result.skipped_rules = sorted(self._skipped)
        broken = [self._broken[k] for k in sorted(self._broken, key=lambda k: self._refs[k].qualified())
                  if k in kept]
        if len(broken) > MAX_WHOLE_JOB_NOTES:
            rest = len(broken) - MAX_WHOLE_JOB_NOTES
            broken = [*broken[:MAX_WHOLE_JOB_NOTES],
                      f"the planned cluster cannot run {plural(rest, 'more job')} as a whole any more"]
        result.notes[:0] = [b for b in broken if b not in result.notes]
        if self._ignore_notes > MAX_IGNORE_NOTES:
            rest = self._ignore_notes - MAX_IGNORE_NOTES
            self.note(f"{IGNORE_ANNOTATION} names no rule on {plural(rest, 'more object')}")
        if self._matrix is not None:
            bad = [r for r in self._rows_bad if r.ref.key in kept]
            clean = [r for r in self._rows_clean if r.ref.key in kept]
            bad.sort(key=lambda r: (-(r.worst or 0), r.ref.namespace, r.ref.kind, r.ref.name, r.template))
            clean.sort(key=lambda r: (r.ref.namespace, r.ref.kind, r.ref.name, r.template))
            rows = (bad + clean)[:MAX_MATRIX_ROWS]
            self._matrix.rows = rows
            self._matrix.omitted = self._rows_omitted + len(bad) + len(clean) - len(rows)
            result.matrix = self._matrix
        return result

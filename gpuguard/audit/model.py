"""What an audit produces: findings on existing objects, their change, the matrix and the summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from gpuguard.sources.yamlsafe import InputError
from policies.placement import Cell
from policies.types import Finding, Severity

Change = Literal["introduced", "resolved", "unchanged"]
CHANGES: tuple[Change, ...] = ("introduced", "resolved", "unchanged")
EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object a finding is about, as a PolicyReport resource reference names it."""

    api_version: str
    kind: str
    name: str
    namespace: str
    uid: str

    @property
    def key(self) -> str:
        """Unique within one audit: the uid, or the object's coordinates when it has none."""
        return self.uid or f"{self.api_version}/{self.kind}/{self.namespace}/{self.name}"

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def label(self) -> str:
        return f"{self.kind}/{self.name}"

    def qualified(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}" if self.namespace else self.label()

    def to_dict(self) -> dict[str, str]:
        out = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        return out


@dataclass(frozen=True, slots=True)
class Origin:
    """Where an object was read: a dump file and the line its object starts at (None: a live cluster)."""

    file: str | None = None
    line: int | None = None


LIVE = Origin()


@dataclass(frozen=True, slots=True)
class AuditFinding:
    finding: Finding
    ref: ObjectRef
    origin: Origin
    change: Change | None = None  # with --cluster-after
    previous_severity: Severity | None = None  # the severity before the change, when it differs

    @property
    def severity(self) -> Severity:
        return self.finding.severity

    def to_dict(self) -> dict[str, Any]:
        out = self.finding.to_dict()
        out["apiVersion"] = self.ref.api_version
        out["uid"] = self.ref.uid
        if self.origin.file is not None:
            out["file"] = self.origin.file
            out["line"] = self.origin.line
        if self.change is not None:
            out["change"] = self.change
        if self.previous_severity is not None:
            out["previous_severity"] = str(self.previous_severity)
        return out


@dataclass(frozen=True, slots=True)
class Column:
    """One node group of the matrix."""

    label: str  # GPU product (or the pool's name)
    detail: str  # nodes, instance type, driver, taints
    nodes: int
    key: str  # the group's first member: how a group is recognised in the other snapshot


@dataclass(frozen=True, slots=True)
class MatrixRow:
    ref: ObjectRef
    template: str  # dotted path of the pod template in the object ("" for a Pod)
    cells: tuple[Cell, ...]
    before: tuple[Cell | None, ...] = ()  # with --cluster-after: the same group's cell today (None: new group)
    worst: Severity | None = None  # the object's most severe finding


@dataclass(slots=True)
class Matrix:
    columns: list[Column]
    rows: list[MatrixRow]
    facts: str  # which snapshot the cells judge
    omitted: int = 0  # rows left out to keep the report readable
    removed: list[str] = field(default_factory=list)  # groups of today's cluster the planned one lacks


@dataclass(slots=True)
class Counts:
    objects: int = 0  # objects judged and reported themselves
    gpu_workloads: int = 0  # of those, objects with a GPU pod template (or GPU-looking resources)
    through_owners: int = 0  # objects reported through an audited owner (pods, ReplicaSets, Jobs…)
    terminal_pods: int = 0  # Succeeded/Failed pods: they hold nothing and will not run again
    exempt: int = 0  # in an exempt namespace (config exemptNamespaces)
    ignore_annotations: int = 0  # objects where gpuguard.io/ignore skipped rules
    duplicates: int = 0  # the same object read twice (overlapping dumps, a relisted page)


@dataclass(slots=True)
class AuditResult:
    findings: list[AuditFinding] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    gpu_objects: list[ObjectRef] = field(default_factory=list)  # GPU workloads reported themselves
    children: dict[str, int] = field(default_factory=dict)  # object key -> objects reported through it
    cluster: str | None = None  # where the (current) facts came from
    cluster_after: str | None = None  # the planned facts (--cluster-after)
    skipped_rules: list[str] = field(default_factory=list)
    matrix: Matrix | None = None
    pools: list[dict[str, Any]] | None = None  # per-pool GPU summary (a live cluster, or nodes and pods)
    truncated: dict[str, int] = field(default_factory=dict)  # namespace -> findings dropped (bounded mode)
    fail_on: Severity = Severity.ERROR

    @property
    def compares(self) -> bool:
        return self.cluster_after is not None

    def current(self) -> list[AuditFinding]:
        """Findings against the facts judged last (the planned ones with --cluster-after)."""
        return [f for f in self.findings if f.change != "resolved"]

    def by_change(self, change: Change) -> list[AuditFinding]:
        return [f for f in self.findings if f.change == change]

    def severity_counts(self, findings: list[AuditFinding] | None = None) -> dict[str, int]:
        counts = {str(s): 0 for s in sorted(Severity, reverse=True)}
        for f in self.current() if findings is None else findings:
            counts[str(f.severity)] += 1
        return counts

    def change_counts(self) -> dict[str, int]:
        return {c: len(self.by_change(c)) for c in CHANGES}

    def exit_code(self) -> int:
        if self.errors:
            return EXIT_ERROR
        judged = self.by_change("introduced") if self.compares else self.findings
        if any(f.severity >= self.fail_on for f in judged):
            return EXIT_FINDINGS
        return EXIT_CLEAN

    def pods_through(self, ref: ObjectRef) -> int:
        return self.children.get(ref.key, 0)

    def summary(self) -> dict[str, Any]:
        c = self.counts
        out: dict[str, Any] = {
            "by_severity": self.severity_counts(),
            "objects": c.objects,
            "gpu_workloads": c.gpu_workloads,
            "reported_through_owners": c.through_owners,
            "terminal_pods_skipped": c.terminal_pods,
            "exempt": c.exempt,
            "ignore_annotations": c.ignore_annotations,
            "duplicates": c.duplicates,
            "input_errors": len(self.errors),
            "fail_on": str(self.fail_on),
            "cluster": self.cluster,
            "skipped_rules": list(self.skipped_rules),
            "notes": list(self.notes),
        }
        if self.compares:
            out["cluster_after"] = self.cluster_after
            out["changes"] = self.change_counts()
            out["introduced_by_severity"] = self.severity_counts(self.by_change("introduced"))
        if self.pools is not None:
            out["pools"] = list(self.pools)
        if self.truncated:
            out["findings_dropped"] = dict(self.truncated)
        return out

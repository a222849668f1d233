"""The results of one ``gpuguard lint`` run: findings, input errors, summary and exit code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuguard.sources.inputs import STDIN_NAME
from gpuguard.sources.yamlsafe import InputError
from linter.lint import FileResult, Located
from policies.types import Severity
from policies.wording import noun, plural

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2


@dataclass(slots=True)
class Report:
    results: list[FileResult] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)  # inputs that never became a FileResult
    fail_on: Severity = Severity.ERROR
    cluster: str | None = None
    fixed_files: list[str] = field(default_factory=list)
    # What the cluster facts say about the cluster beyond its nodes (policies.managed, capacity).
    extended_resource_toleration: str | None = None
    platform_note: str | None = None  # a detected platform that is not taken to run it (text only)
    scaling_pools: list[str] = field(default_factory=list)
    stdin_name: str = STDIN_NAME  # what stdin is called in the report (--stdin-filename)
    helm_chart: str | None = None  # the chart directory Helm rendered into stdin (--helm-chart)
    rendered_charts: list[str] = field(default_factory=list)  # charts gpuguard rendered (their directories)
    notes: list[str] = field(default_factory=list)  # said on stderr (text) or in the summary
    # Problems of the cluster's nodes themselves (policies.engine.cluster_notes): said once, as notes.
    node_problems: list[str] = field(default_factory=list)
    def charts(self) -> dict[str, str | None]:
        """Inputs that are Helm output, by name: the chart directory their templates are in
        (None when unknown: stdin without --helm-chart; its templates are named as Helm prints them)."""
        out: dict[str, str | None] = {self.stdin_name: self.helm_chart}
        out.update({chart: chart for chart in self.rendered_charts})
        return out

    @property
    def findings(self) -> list[Located]:
        return [f for r in self.results for f in r.findings]

    @property
    def all_errors(self) -> list[InputError]:
        return self.errors + [e for r in self.results for e in r.errors]

    @property
    def skipped_rules(self) -> list[str]:
        return sorted({rule for r in self.results for rule in r.skipped_rules})

    def counts(self) -> dict[str, int]:
        counts = {str(s): 0 for s in sorted(Severity, reverse=True)}
        for f in self.findings:
            counts[str(f.finding.severity)] += 1
        return counts

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "by_severity": self.counts(),
            "files": len(self.results) + len({e.file for e in self.errors}),
            "documents": sum(r.documents for r in self.results),
            "objects": sum(r.objects for r in self.results),
            "input_errors": len(self.all_errors),
            "fail_on": str(self.fail_on),
            "cluster": self.cluster,
            "skipped_rules": self.skipped_rules,
            "extended_resource_toleration": self.extended_resource_toleration,
            "scaling_pools": list(self.scaling_pools),
        }
        if self.fixed_files:
            out["fixed_files"] = list(self.fixed_files)
        return out

    def exit_code(self) -> int:
        if self.all_errors:
            return EXIT_ERROR
        if any(f.finding.severity >= self.fail_on for f in self.findings):
            return EXIT_FINDINGS
        return EXIT_CLEAN

    def cluster_notes(self) -> list[str]:
        notes = []
        if self.extended_resource_toleration:
            notes.append(
                f"ExtendedResourceToleration {self.extended_resource_toleration}: GPU pods are taken to tolerate "
                "NoSchedule taints keyed by the resources they request"
            )
        if self.platform_note:
            notes.append(self.platform_note)
        if self.scaling_pools:
            pools = ", ".join(self.scaling_pools)
            n = len(self.scaling_pools)
            notes.append(f"{plural(n, 'node pool')} {noun(n, 'scales', 'scale')} up and {noun(n, 'counts', 'count')} "
                         f"as nodes: {pools}")
        notes.extend(self.node_problems)
        return notes

    def skipped_note(self) -> str | None:
        if self.cluster is not None or not self.skipped_rules:
            return None
        return (
            f"no --cluster given: skipped {plural(len(self.skipped_rules), 'rule')} that need cluster facts "
            f"({', '.join(self.skipped_rules)}); pass --cluster FILE (or --cluster sample)"
        )

"""One run's findings, ready to render: the diagnosis plus what the renderers say around it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from policies.pending.diagnose import Diagnosis, PodDiagnosis
from policies.pending.state import ClusterState
from policies.pending.workloads import WorkloadDiagnosis, summary
from policies.wording import plural
from whypending.selection import Scope
from whypending.utilization import Utilization


@dataclass(slots=True)
class Report:
    diagnosis: Diagnosis
    state: ClusterState
    scope: Scope
    source: str
    utilization: Utilization | None = None
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    generated: datetime = field(default_factory=lambda: datetime.now(UTC))

    @property
    def pods(self) -> list[PodDiagnosis]:
        return self.diagnosis.pods

    @property
    def workloads(self) -> list[WorkloadDiagnosis]:
        return self.diagnosis.workloads

    @property
    def gated(self) -> int:
        return sum(1 for p in self.pods if p.pod.gated)

    @property
    def gpu_nodes(self) -> int:
        return len(self.state.allocation.nodes)

    def all_notes(self) -> list[str]:
        """Missing pods first, then input, selection and Prometheus notes."""
        utilization = self.utilization.notes if self.utilization is not None else []
        return [*self.missing, *self.notes, *utilization]

    def notes_only(self) -> list[str]:
        """Input, selection and Prometheus notes (the missing pods are errors, said apart)."""
        utilization = self.utilization.notes if self.utilization is not None else []
        return [*self.notes, *utilization]

    def headline(self) -> str:
        more = f"; {summary(self.workloads)}" if self.workloads else ""
        return self._pods_headline() + more

    def _pods_headline(self) -> str:
        where = self.scope.describe()
        n = len(self.pods)
        if not n:
            hint = "" if self.scope.namespace is None or self.scope.names else " (-A for all namespaces)"
            return f"no pending GPU pods in {where}{hint}"
        gated = f" ({self.gated} gated)" if self.gated else ""
        pods = plural(n, "pending GPU pod")
        if self.scope.names:
            return f"{pods} among the {len(self.scope.names)} named{gated}"
        return f"{pods} in {where}{gated}"

    def input_line(self) -> str:
        s = self.state
        return (f"{self.source}: {plural(len(s.nodes), 'node')} ({self.gpu_nodes} with GPUs), "
                f"{plural(len(s.pods), 'pod')}, {plural(len(s.events), 'FailedScheduling event')}")

    def utilization_line(self) -> str:
        u = self.utilization
        if u is None:
            return "GPU utilization: not measured (pass --prometheus URL to name idle GPU holders)"
        if not u.available:
            return f"GPU utilization: unavailable from {u.url} (see notes)"
        return (f"GPU utilization: {u.url}, {u.gpus_measured} pod-held GPUs over the last {u.window}; "
                f"idle means max utilization below {u.threshold:g}%")

"""One reason a pod (or a workload without pods) waits: its kind, a one-line message, and the nodes
and pods it names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Reason:
    kind: str
    message: str
    nodes: tuple[str, ...] = ()
    pods: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.nodes:
            out["nodes"] = list(self.nodes)
        if self.pods:
            out["pods"] = list(self.pods)
        return out

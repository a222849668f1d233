"""Compare what two inputs make of the same cluster."""

from __future__ import annotations

from typing import Any

from policies.pending.fit import FitAnalyser
from policies.pending.state import ClusterObjects, ClusterState


def summary(objects: ClusterObjects) -> dict[str, Any]:
    """Pools, pending verdicts and scheduler messages: what why-pending will print."""
    state = ClusterState.build(objects)
    analyser = FitAnalyser(state)
    pending = {}
    for pod in sorted(state.pending_gpu_pods(), key=lambda p: p.key):
        report = analyser.analyse(pod)
        pending[pod.key] = (pod.priority, pod.preemption_policy, pod.gated, report.verdict,
                            [n.node for n in report.best()],
                            pod.scheduled.message if pod.scheduled else "")
    pools = [(p.name, p.resource, p.nodes, p.allocatable, p.allocated, p.reserved, p.free)
             for p in state.allocation.pools]
    return {"pools": pools, "pending": pending, "events": len(state.events),
            "unknown": [p.key for p in state.allocation.unknown_node_pods]}

"""The per-pool GPU summary of an audit: allocatable, allocated and free GPUs, and idle ones.

The same numbers ``gpuguard why-pending`` reports (``policies.pending``): free = allocatable − the
effective GPU requests of the non-terminal pods bound to a node − GPUs nominated pods reserve; a
pool is the nodes of one GPU product and instance type.  With a Prometheus URL, ``idle`` counts the
GPUs held by pods whose DCGM utilization stayed under 1% over the window (``gpuguard.prometheus``);
a slow or unreachable Prometheus gives a note, not a failure.

Pods are kept pruned to what the analysis reads (``gpuguard.kube.prune``), so a large cluster's
pods cost little memory while the audit judges them whole.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from gpuguard.kube.prune import decode_item
from policies.config import Config
from policies.pending.diagnose import diagnose
from policies.pending.state import ClusterObjects, ClusterState

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(slots=True)
class PoolInputs:
    """Nodes and the non-terminal pods bound to them, gathered while the audit reads its objects."""

    objects: ClusterObjects = field(default_factory=ClusterObjects)

    def pod(self, raw: bytes | msgspec.Raw) -> None:
        obj = decode_item(raw, "Pod")
        if isinstance(obj, dict):
            status = obj.get("status")
            phase = status.get("phase") if isinstance(status, dict) else None
            if phase not in TERMINAL_PHASES:
                self.objects.pods.append(obj)

    def nodes(self, nodes: list[Mapping[str, Any]]) -> None:
        self.objects.nodes.extend(nodes)


@dataclass(slots=True)
class PoolSummary:
    pools: list[dict[str, Any]]
    notes: list[str]


def pool_summary(
    inputs: PoolInputs,
    config: Config,
    prometheus: str | None = None,
    window: str = "1h",
    timeout: float = 10.0,
) -> PoolSummary:
    state = ClusterState.build(inputs.objects, config.is_gpu)
    notes: list[str] = []
    use = None
    window_start = None
    if prometheus:
        from gpuguard.prometheus import PrometheusClient, gpu_use, gpu_utilization, parse_window

        with PrometheusClient(prometheus, timeout=timeout) as client:
            report = gpu_utilization(client, window)
        notes.extend(report.notes)
        if report.available:
            use = gpu_use(report)
            window_start = dt.datetime.fromtimestamp(report.at - parse_window(window), dt.UTC)
    views = diagnose(state, [], use=use, window_start=window_start).pools
    pools = []
    for view in views:
        row = view.to_dict()
        row["nodes"] = view.pool.nodes
        if view.pool.unhealthy:
            row["unhealthy"] = view.pool.unhealthy
        pools.append(row)
    if not state.allocation.pools and state.nodes:
        notes.append("no node advertises a GPU resource: no GPU pools to summarise")
    return PoolSummary(pools, notes)

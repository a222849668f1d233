"""Measured GPU utilization from Prometheus (DCGM exporter metrics), or a note saying why not.

A slow, unreachable or misbehaving Prometheus never fails the run: the analysis goes on without
the ``idle-holders`` reason and the pools' ``idle`` column, and a note says what happened.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gpuguard.prometheus import (
    DEFAULT_TIMEOUT_SECONDS,
    IDLE_THRESHOLD_PERCENT,
    PrometheusClient,
    gpu_use,
    gpu_utilization,
    parse_window,
)
from policies.pending.diagnose import GpuUse

TIMEOUT_SECONDS = DEFAULT_TIMEOUT_SECONDS  # per query, end to end (tests shorten it)


@dataclass(slots=True)
class Utilization:
    url: str
    window: str
    threshold: float = IDLE_THRESHOLD_PERCENT
    use: Mapping[tuple[str, str], GpuUse] | None = None  # None: no utilization data
    window_start: datetime | None = None
    gpus_measured: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def available(self) -> bool:
        return self.use is not None


def measure(url: str, window: str, *, timeout: float | None = None) -> Utilization:
    """Utilization per pod over ``window`` (already validated); never raises for server trouble."""
    out = Utilization(url, window)
    with PrometheusClient(url, timeout=TIMEOUT_SECONDS if timeout is None else timeout) as client:
        report = gpu_utilization(client, window)
    out.notes.extend(report.notes)
    if not report.available or not report.gpus:
        if report.available:
            out.notes.append("no pod-held GPU has utilization data: idle holders cannot be named")
        return out
    out.use = gpu_use(report)
    out.gpus_measured = len(report.gpus)
    out.window_start = datetime.fromtimestamp(report.at - parse_window(window), UTC)
    return out

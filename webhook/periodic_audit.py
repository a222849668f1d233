"""``gpuguard serve --audit-interval DURATION``: audit the cluster in the background, publish PolicyReports.

Every interval (the first run once the live facts are loaded) a daemon thread runs the audit of
``gpuguard audit`` (``gpuguard.audit.live.audit_cluster``) against the webhook's own live facts and
current config, and creates or updates one report per namespace and a cluster report
(``gpuguard.audit.publish``).  Admission never waits for it and it never touches the request path.

Memory is bounded: objects are listed a page at a time and dropped once judged, and each
namespace keeps at most ``MAX_FINDINGS_PER_NAMESPACE`` findings (the most severe; the report says
how many it left out).  A failed run is logged and retried at the next interval.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuguard.audit.live import audit_cluster
from gpuguard.audit.policyreport import Flavour, build_reports
from gpuguard.audit.publish import Published, Publisher
from webhook.app import FactsProvider
from webhook.configsource import ConfigSource

log = logging.getLogger("gpuguard.audit")

MAX_FINDINGS_PER_NAMESPACE = 1000
READY_POLL_SECONDS = 1.0
MIN_INTERVAL_SECONDS = 1.0
_DURATION = re.compile(r"^(?:\d+(?:ms|s|m|h|d))+$")
_PART = re.compile(r"(\d+)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_interval(text: str) -> float:
    """Seconds in a duration such as ``30m``, ``1h`` or ``1h30m``; ValueError otherwise."""
    if not _DURATION.match(text):
        raise ValueError(f"{text!r} is not a duration (e.g. 90s, 30m, 1h, 1h30m)")
    seconds = sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _PART.findall(text))
    if seconds < MIN_INTERVAL_SECONDS:
        raise ValueError(f"{text!r} is shorter than {MIN_INTERVAL_SECONDS:g}s")
    return seconds


@dataclass(slots=True)
class AuditRun:
    """What one run did (kept for logs and tests)."""

    started: float
    seconds: float
    objects: int
    findings: int
    published: Published | None
    error: str | None = None


class PeriodicAudit:
    def __init__(
        self,
        interval: float,
        facts: FactsProvider,
        config: ConfigSource,
        api_client: Callable[[], Any],
        flavour: Flavour = "policyreport",
        *,
        limit_per_namespace: int = MAX_FINDINGS_PER_NAMESPACE,
    ) -> None:
        self.interval = interval
        self.facts = facts
        self.config = config
        self.api_client = api_client
        self.flavour = flavour
        self.limit = limit_per_namespace
        self.runs: list[AuditRun] = []  # the last few runs
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpuguard-audit", daemon=True)

    def start(self) -> PeriodicAudit:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def run_once(self) -> AuditRun:
        started = time.time()
        clock = time.monotonic()
        try:
            client = self.api_client()
            result = audit_cluster(client, self.config.current(), self.facts.current(),
                                   limit_per_namespace=self.limit, cluster="live facts")
            published = Publisher(client, self.flavour).publish(build_reports(result, self.flavour))
        except Exception as exc:  # the next interval tries again; the webhook keeps serving
            run = AuditRun(started, time.monotonic() - clock, 0, 0, None, f"{type(exc).__name__}: {exc}")
            log.error("periodic audit failed: %s", run.error)
        else:
            run = AuditRun(started, time.monotonic() - clock, result.counts.objects, len(result.findings), published)
            for error in result.errors:
                log.warning("periodic audit: %s: %s", error.file, error.message)
            for problem in published.errors:
                log.error("periodic audit: cannot write report: %s", problem)
            log.info(
                "periodic audit: %d objects, %d GPU workloads, %d findings in %.1fs; reports: %d created, "
                "%d updated, %d unchanged, %d emptied", result.counts.objects, result.counts.gpu_workloads,
                len(result.findings), run.seconds, published.created, published.updated, published.unchanged,
                published.emptied,
            )
        self.runs = [*self.runs[-4:], run]
        return run

    def _loop(self) -> None:
        while not self.facts.ready:
            if self._stop.wait(READY_POLL_SECONDS):
                return
        while not self._stop.is_set():
            self.run_once()
            if self._stop.wait(self.interval):
                return

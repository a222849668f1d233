"""Prometheus metrics in the text exposition format (version 0.0.4), kept in plain dicts.

All updates happen on the server's event loop thread; ``render`` may run on the health port's own
thread, so it reads copies (a dict copy is one step under the GIL), never a dict being updated.
Label values come from bounded sets only: an object kind outside the kinds gpuguard reads is
counted as ``other``, so a client sending made-up kinds cannot grow the series without bound.  With
``--workers N`` each worker process keeps its own counters (scrape each pod, not each process;
prefer one worker per pod and more replicas).

Why not prometheus-client (measured, not assumed): its labelled counter and histogram updates take
3.4 and 3.8 µs each (``Counter.labels(...).inc()``, ``Histogram.labels(...).observe()``, with their
locks) against 0.24 and 0.27 µs for the dict and bisect updates here, on the same 2-core machine;
a review makes three to six updates, so prometheus-client would add 10-20 µs to a review the engine
judges in 60-200 µs, on the event loop.  What it brings beyond the format is not needed (one process
per pod, no multiprocess mode, no default collectors but the GC counts rendered below).  The format
is checked by Prometheus' own ``promtool check metrics`` and prometheus-client's parser
(tests/webhook/test_metrics.py).
"""

from __future__ import annotations

import bisect
import gc
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping

from policies.types import Finding

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    if not names:
        return ""
    return "{" + ",".join(f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)) + "}"


def _number(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)



# Live facts' publishing (webhook.live_facts.PublishStats), as metrics: key, type, help.
PUBLISHING = (
    ("publishes_total", "counter", "Snapshots of the live cluster facts published."),
    ("events_applied_total", "counter", "Watch events that changed what the rules read."),
    ("events_unchanged_total", "counter",
     "Watch events that changed nothing the rules read (status heartbeats, GFD timestamps)."),
    ("longest_build_seconds", "gauge", "The longest time building one snapshot took since start."),
    ("last_build_seconds", "gauge", "The time building the current snapshot took."),
    ("regroups_total", "counter", "Snapshots that regrouped every node (the per-node label keys changed)."),
)


class Histogram:
    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)  # the last slot is +Inf only
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1


class Metrics:
    def __init__(self, known_kinds: Iterable[str] = ()) -> None:
        self.known_kinds = frozenset(known_kinds)
        self._lock = threading.Lock()
        self.reviews: defaultdict[tuple[str, str, str, str], int] = defaultdict(int)
        self.findings: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.errors: defaultdict[tuple[str, str], int] = defaultdict(int)
        self.latency: dict[str, Histogram] = {}
        self.cert_reloads: defaultdict[str, int] = defaultdict(int)
        self.cert_not_after: float | None = None
        self.image_lookups: defaultdict[str, int] = defaultdict(int)
        self.would_deny: defaultdict[str, int] = defaultdict(int)
        self.ignore_uses: defaultdict[str, int] = defaultdict(int)
        self.config_reloads: defaultdict[str, int] = defaultdict(int)
        self.rejected: defaultdict[str, int] = defaultdict(int)
        self.config_loaded_at: float | None = None

    def observe_review(self, endpoint: str, kind: str, operation: str, allowed: bool, seconds: float) -> None:
        shown = kind if kind in self.known_kinds else "other"
        self.reviews[(endpoint, shown, operation, "true" if allowed else "false")] += 1
        hist = self.latency.get(endpoint)
        if hist is None:
            hist = self.latency[endpoint] = Histogram()
        hist.observe(seconds)

    def observe_findings(self, findings: Iterable[Finding]) -> None:
        for f in findings:
            self.findings[(f.rule, str(f.severity))] += 1

    def count_error(self, endpoint: str, reason: str) -> None:
        """reason: bad_request | too_large | engine_error."""
        self.errors[(endpoint, reason)] += 1

    def count_cert_reload(self, result: str | None, not_after: float | None = None) -> None:
        """result: ok | invalid | expired | not_yet_valid (None: no reload, the certificate at start);
        not_after: when the certificate now in use expires (Unix time)."""
        if result is not None:
            self.cert_reloads[result] += 1
        if not_after is not None:
            self.cert_not_after = not_after

    def observe_would_deny(self, findings: Iterable[Finding]) -> None:
        """Findings that ``enforcement: warn`` admitted instead of denying, by rule."""
        for f in findings:
            self.would_deny[f.rule] += 1

    def count_ignore_use(self, result: str) -> None:
        """result: honoured | refused (allowIgnoreAnnotation) | unknown_rule."""
        self.ignore_uses[result] += 1

    def count_config_reload(self, result: str, loaded_at: float | None = None) -> None:
        """result: ok | invalid | unreadable."""
        self.config_reloads[result] += 1
        if loaded_at is not None:
            self.config_loaded_at = loaded_at

    def count_rejected(self, reason: str) -> None:
        """Connections closed by the HTTP limits (webhook.protocol), by reason (from either server's thread)."""
        with self._lock:
            self.rejected[reason] += 1

    def count_image_lookup(self, result: str) -> None:
        """result: hit | miss (per image a review needs) | pending (past the budget) | failure."""
        self.image_lookups[result] += 1

    def render(
        self,
        facts_age_seconds: float | None,
        facts_ready: bool,
        facts_nodes: int,
        facts_lag_seconds: float | None = None,
        publishing: Mapping[str, float] | None = None,
    ) -> str:
        out: list[str] = []

        def family(name: str, typ: str, doc: str) -> None:
            out.append(f"# HELP {name} {doc}")
            out.append(f"# TYPE {name} {typ}")

        name = "gpuguard_admission_reviews_total"
        family(name, "counter", "AdmissionReviews answered, by endpoint, object kind, operation and verdict.")
        keys = ("endpoint", "kind", "operation", "allowed")
        for values, n in sorted(self.reviews.copy().items()):
            out.append(f"{name}{_labels(keys, values)} {n}")

        name = "gpuguard_admission_review_duration_seconds"
        family(name, "histogram", "Time to answer an AdmissionReview, from first byte read to response.")
        for endpoint, hist in sorted(self.latency.copy().items()):
            cumulative = 0
            for bound, n in zip(hist.buckets, list(hist.counts), strict=False):
                cumulative += n
                lbl = _labels(("endpoint", "le"), (endpoint, _number(bound)))
                out.append(f"{name}_bucket{lbl} {cumulative}")
            lbl = _labels(("endpoint", "le"), (endpoint, "+Inf"))
            out.append(f"{name}_bucket{lbl} {hist.count}")
            out.append(f"{name}_sum{_labels(('endpoint',), (endpoint,))} {_number(hist.total)}")
            out.append(f"{name}_count{_labels(('endpoint',), (endpoint,))} {hist.count}")

        name = "gpuguard_findings_total"
        family(name, "counter", "Findings reported in AdmissionReviews, by rule and severity.")
        for pair, n in sorted(self.findings.copy().items()):
            out.append(f"{name}{_labels(('rule', 'severity'), pair)} {n}")

        name = "gpuguard_admission_errors_total"
        family(name, "counter", "Requests answered with an error or by failureMode, by endpoint and reason.")
        for pair, n in sorted(self.errors.copy().items()):
            out.append(f"{name}{_labels(('endpoint', 'reason'), pair)} {n}")

        name = "gpuguard_tls_certificate_reloads_total"
        family(name, "counter", "Serving certificate reloads after the files changed, by result.")
        for result, n in sorted(self.cert_reloads.copy().items()):
            out.append(f"{name}{_labels(('result',), (result,))} {n}")

        if self.cert_not_after is not None:
            name = "gpuguard_tls_certificate_expiry_timestamp_seconds"
            family(name, "gauge", "When the serving certificate in use expires (notAfter, Unix time).")
            out.append(f"{name} {_number(self.cert_not_after)}")

        if self.image_lookups:
            name = "gpuguard_image_lookups_total"
            family(
                name,
                "counter",
                "Registry image lookups: hit/miss in the memory cache per image a review needs, pending when a "
                "review's budget ran out, failure when a lookup failed.",
            )
            for result, n in sorted(self.image_lookups.copy().items()):
                out.append(f"{name}{_labels(('result',), (result,))} {n}")

        name = "gpuguard_would_deny_total"
        family(name, "counter", "Findings admitted with a warning instead of denied (enforcement: warn), by rule.")
        for rule, n in sorted(self.would_deny.copy().items()):
            out.append(f"{name}{_labels(('rule',), (rule,))} {n}")

        name = "gpuguard_ignore_annotation_uses_total"
        family(name, "counter", "gpuguard.io/ignore annotations on checked objects, by result.")
        for result, n in sorted(self.ignore_uses.copy().items()):
            out.append(f"{name}{_labels(('result',), (result,))} {n}")

        name = "gpuguard_connections_rejected_total"
        family(name, "counter", "Connections closed by the HTTP limits (head size, timeouts, cap), by reason.")
        for reason, n in sorted(self.rejected.copy().items()):
            out.append(f"{name}{_labels(('reason',), (reason,))} {n}")

        name = "gpuguard_config_reloads_total"
        family(name, "counter", "Policy config reloads after the file changed, by result.")
        for result, n in sorted(self.config_reloads.copy().items()):
            out.append(f"{name}{_labels(('result',), (result,))} {n}")
        if self.config_loaded_at is not None:
            name = "gpuguard_config_last_reload_success_timestamp_seconds"
            family(name, "gauge", "When the config in force was loaded (Unix time).")
            out.append(f"{name} {_number(round(self.config_loaded_at, 3))}")

        family("gpuguard_cluster_facts_ready", "gauge", "1 once cluster facts are loaded (or none are configured).")
        out.append(f"gpuguard_cluster_facts_ready {1 if facts_ready else 0}")
        family("gpuguard_cluster_facts_nodes", "gauge", "Nodes in the current cluster facts.")
        out.append(f"gpuguard_cluster_facts_nodes {facts_nodes}")
        if facts_age_seconds is not None:
            family(
                "gpuguard_cluster_facts_age_seconds",
                "gauge",
                "Seconds since the API server last confirmed the cluster facts.",
            )
            out.append(f"gpuguard_cluster_facts_age_seconds {_number(round(facts_age_seconds, 3))}")
        if facts_lag_seconds is not None:
            family(
                "gpuguard_cluster_facts_lag_seconds",
                "gauge",
                "Seconds the oldest change the watch received has waited for a new snapshot (0: none waits).",
            )
            out.append(f"gpuguard_cluster_facts_lag_seconds {_number(round(facts_lag_seconds, 3))}")
        for key, typ, doc in PUBLISHING:
            if publishing is not None and key in publishing:
                metric = f"gpuguard_cluster_facts_{key}"
                family(metric, typ, doc)
                out.append(f"{metric} {_number(round(publishing[key], 6))}")
        # The collector's work, named as prometheus-client's GCCollector names it, and what is frozen
        # out of its reach (webhook.heap).
        family("python_gc_collections_total", "counter", "Number of times this generation was collected")
        for generation, stats in enumerate(gc.get_stats()):
            out.append(f'python_gc_collections_total{{generation="{generation}"}} {stats["collections"]}')
        family("gpuguard_gc_frozen_objects", "gauge",
               "Objects in the permanent generation (gc.freeze): long-lived facts full collections skip.")
        out.append(f"gpuguard_gc_frozen_objects {gc.get_freeze_count()}")
        return "\n".join(out) + "\n"

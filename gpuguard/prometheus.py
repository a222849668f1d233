"""GPU utilization per pod from DCGM exporter metrics in Prometheus (pending-gpus.md §5).

A small client for the Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``; form-encoded
POST is allowed for long queries [P-api]) with a wall-clock deadline and a cap on response size,
and :func:`gpu_utilization`, which never raises for Prometheus trouble: a slow, unreachable or
misbehaving server gives a note instead.

DCGM exporter facts used [D-*]: ``DCGM_FI_DEV_GPU_UTIL`` is a gauge in percent; its Kubernetes
mapping adds ``pod``/``namespace``/``container`` (``pod_name``/``pod_namespace``/``container_name``
with ``--use-old-namespace``); a ServiceMonitor without ``honorLabels`` makes Prometheus rename them
``exported_pod``/``exported_namespace``/``exported_container`` (and ``pod`` is then the exporter's
own pod); the host label is ``Hostname`` in release 4.5.3-4.8.2 and ``hostname`` on main; the GPU
is ``UUID`` (``uuid`` with the old namespace); GPUs no pod holds carry no pod label.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from policies.pending.diagnose import GpuUse

DEFAULT_TIMEOUT_SECONDS = 10.0
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
UTIL_METRIC = "DCGM_FI_DEV_GPU_UTIL"  # gauge, percent [D-csv]
IDLE_THRESHOLD_PERCENT = 1.0  # "< 1" as in the reference query (§5.3)

# Label spellings, most specific first: exported_* (relabelled by Prometheus) beats the plain name,
# which then names the exporter's own pod [D-i85].
POD_LABELS = ("exported_pod", "pod", "pod_name")
NAMESPACE_LABELS = ("exported_namespace", "namespace", "pod_namespace")
CONTAINER_LABELS = ("exported_container", "container", "container_name")
HOST_LABELS = ("Hostname", "hostname")
UUID_LABELS = ("UUID", "uuid")
GROUP_LABELS = (*POD_LABELS, *NAMESPACE_LABELS, *CONTAINER_LABELS, *HOST_LABELS, *UUID_LABELS, "gpu")

# Prometheus duration syntax (model.ParseDuration): one or more <number><unit>, units ms s m h d w y.
_DURATION = re.compile(r"^(?:\d+(?:ms|s|m|h|d|w|y))+$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")


class PrometheusError(Exception):
    """A query that did not produce a usable answer; ``kind`` says why."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # unreachable | timeout | too-large | http | bad-response | query
        self.message = message


def parse_window(text: str) -> float:
    """Seconds in a Prometheus duration such as ``1h``, ``90m`` or ``1h30m``; ValueError otherwise."""
    if not _DURATION.match(text):
        raise ValueError(f"{text!r} is not a Prometheus duration (e.g. 30m, 1h, 6h, 1d)")
    seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in _PART.findall(text))
    if seconds <= 0:
        raise ValueError(f"{text!r} is an empty window")
    return float(seconds)


@dataclass(frozen=True, slots=True)
class Series:
    labels: Mapping[str, str]
    values: tuple[tuple[float, float], ...]  # (unix time, value); NaN kept as float("nan")

    @property
    def last(self) -> float:
        return self.values[-1][1] if self.values else math.nan


@dataclass(frozen=True, slots=True)
class QueryResult:
    result_type: str
    series: tuple[Series, ...]
    warnings: tuple[str, ...] = ()


def _value(raw: Any) -> float:
    # Sample values are strings so NaN/Inf survive JSON [P-api]
    try:
        return float(raw)
    except (TypeError, ValueError):
        return math.nan


def _pair(item: Any) -> tuple[float, float]:
    if not isinstance(item, list) or len(item) != 2:
        raise PrometheusError("bad-response", f"malformed sample {str(item)[:80]!r}")
    return float(item[0]), _value(item[1])


def _decode(data: Mapping[str, Any]) -> QueryResult:
    rtype = data.get("resultType")
    result = data.get("result")
    series: list[Series] = []
    if rtype in ("vector", "matrix") and isinstance(result, list):
        for item in result:
            if not isinstance(item, dict):
                raise PrometheusError("bad-response", "result item is not an object")
            metric = item.get("metric")
            labels = {str(k): str(v) for k, v in metric.items()} if isinstance(metric, dict) else {}
            if rtype == "vector":
                values: tuple[tuple[float, float], ...] = (_pair(item.get("value")),)
            else:
                raw = item.get("values")
                values = tuple(_pair(v) for v in raw) if isinstance(raw, list) else ()
            series.append(Series(labels, values))
    elif rtype in ("scalar", "string") and isinstance(result, list):
        series.append(Series({}, (_pair(result),)))
    else:
        raise PrometheusError("bad-response", f"unexpected resultType {rtype!r}")
    return QueryResult(str(rtype), tuple(series))


class PrometheusClient:
    """Read-only client for one Prometheus server.

    ``timeout`` bounds each call end to end (connect, send, wait, read), not just each socket
    operation; ``max_bytes`` bounds the response body.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_bytes: int = MAX_RESPONSE_BYTES,
        headers: Mapping[str, str] | None = None,
        verify: bool | str = True,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        parsed = httpx.URL(url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ValueError(f"Prometheus URL must be http(s)://host[:port][/prefix], got {url!r}")
        self.url = str(parsed).rstrip("/")
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            headers={"Accept": "application/json", **(headers or {})},
            verify=verify,
            follow_redirects=False,
            transport=transport,
        )

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def query(self, promql: str, at: float | None = None) -> QueryResult:
        form = {"query": promql, "timeout": f"{max(1, int(self.timeout))}s"}
        if at is not None:
            form["time"] = f"{at:.3f}"
        return self._post("/api/v1/query", form)

    def query_range(self, promql: str, start: float, end: float, step: float) -> QueryResult:
        form = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}",
                "timeout": f"{max(1, int(self.timeout))}s"}
        return self._post("/api/v1/query_range", form)

    def _body(self, chunks: Iterator[bytes], deadline: float) -> bytes:
        body = bytearray()
        for chunk in chunks:
            body += chunk
            if len(body) > self.max_bytes:
                raise PrometheusError("too-large", f"response larger than {self.max_bytes} bytes; narrow the query")
            if time.monotonic() > deadline:
                raise PrometheusError("timeout", f"no complete answer within {self.timeout:g}s")
        return bytes(body)

    def _post(self, path: str, form: Mapping[str, str]) -> QueryResult:
        deadline = time.monotonic() + self.timeout
        try:
            with self._client.stream("POST", self.url + path, data=dict(form)) as resp:
                body = self._body(resp.iter_bytes(), deadline)
                status = resp.status_code
        except httpx.TimeoutException:
            raise PrometheusError("timeout", f"{self.url} did not answer within {self.timeout:g}s") from None
        except httpx.TransportError as exc:
            raise PrometheusError("unreachable", f"cannot reach {self.url}: {exc or type(exc).__name__}") from None
        try:
            envelope = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            envelope = None
        if not isinstance(envelope, dict):
            text = body[:120].decode("utf-8", "replace")
            raise PrometheusError("bad-response" if status < 400 else "http",
                                  f"HTTP {status} from {self.url}{path}, not a Prometheus API answer: {text!r}")
        if envelope.get("status") != "success":
            kind = str(envelope.get("errorType") or "error")
            raise PrometheusError("query", f"Prometheus {kind} (HTTP {status}): {envelope.get('error', '')}")
        data = envelope.get("data")
        if not isinstance(data, dict):
            raise PrometheusError("bad-response", "answer has no data object")
        result = _decode(data)
        warnings = envelope.get("warnings")
        if isinstance(warnings, list) and warnings:
            return QueryResult(result.result_type, result.series, tuple(str(w) for w in warnings))
        return result


# --- DCGM utilization per pod ---------------------------------------------------------------------


def first_label(labels: Mapping[str, str], names: Sequence[str]) -> str:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return ""


@dataclass(frozen=True, slots=True)
class GpuUtilization:
    """One GPU held by one pod over the window."""

    namespace: str
    pod: str
    container: str
    node: str
    gpu: str  # UUID, else the index
    max_percent: float
    avg_percent: float
    samples: int


@dataclass(frozen=True, slots=True)
class PodUtilization:
    namespace: str
    pod: str
    gpus: tuple[GpuUtilization, ...]

    @property
    def max_percent(self) -> float:
        return max(g.max_percent for g in self.gpus)

    @property
    def avg_percent(self) -> float:
        return sum(g.avg_percent for g in self.gpus) / len(self.gpus)

    @property
    def samples(self) -> int:
        return min(g.samples for g in self.gpus)

    def idle(self, threshold: float = IDLE_THRESHOLD_PERCENT) -> bool:
        return self.max_percent < threshold


@dataclass(slots=True)
class UtilizationReport:
    window: str
    at: float
    gpus: list[GpuUtilization] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    spellings: dict[str, list[str]] = field(default_factory=dict)  # labels that carried pod/namespace/host
    available: bool = False  # True when Prometheus answered the main query

    def by_pod(self) -> dict[tuple[str, str], PodUtilization]:
        grouped: dict[tuple[str, str], list[GpuUtilization]] = {}
        for g in self.gpus:
            grouped.setdefault((g.namespace, g.pod), []).append(g)
        return {k: PodUtilization(k[0], k[1], tuple(v)) for k, v in grouped.items()}

    def idle_pods(self, threshold: float = IDLE_THRESHOLD_PERCENT) -> list[PodUtilization]:
        return sorted((p for p in self.by_pod().values() if p.idle(threshold)), key=lambda p: (p.namespace, p.pod))


def gpu_use(report: UtilizationReport) -> dict[tuple[str, str], GpuUse]:
    """The engine's view of a report: (namespace, pod) -> max/avg utilization and sample count."""
    return {k: GpuUse(p.max_percent, p.avg_percent, p.samples) for k, p in report.by_pod().items()}


def _key(labels: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(labels.get(n, "") for n in GROUP_LABELS)


def utilization_queries(window: str, metric: str = UTIL_METRIC) -> dict[str, str]:
    by = ", ".join(GROUP_LABELS)
    return {
        fn: f"max by ({by}) ({fn}_over_time({metric}[{window}]))"
        for fn in ("max", "avg", "count")
    }


def gpu_utilization(
    client: PrometheusClient, window: str = "1h", at: float | None = None, metric: str = UTIL_METRIC
) -> UtilizationReport:
    """Per-GPU max/avg utilization and sample count of every pod-held GPU over ``window``.

    Problems are reported in ``notes``; the function itself only raises ValueError for a bad
    ``window``.
    """
    parse_window(window)
    when = time.time() if at is None else at
    report = UtilizationReport(window, when)
    queries = utilization_queries(window, metric)
    try:
        maxima = client.query(queries["max"], at=when)
    except PrometheusError as exc:
        report.notes.append(f"GPU utilization unavailable ({exc.kind}): {exc.message}")
        return report
    report.available = True
    report.notes.extend(f"Prometheus warning: {w}" for w in maxima.warnings)
    extra: dict[str, dict[tuple[str, ...], float]] = {}
    for fn in ("avg", "count"):
        try:
            extra[fn] = {_key(s.labels): s.last for s in client.query(queries[fn], at=when).series}
        except PrometheusError as exc:
            report.notes.append(f"{fn}_over_time query failed ({exc.kind}): {exc.message}")
            extra[fn] = {}
    if not maxima.series:
        report.notes.append(f"no {metric} series in the last {window}: is dcgm-exporter scraped by this Prometheus?")
        return report
    unlabelled = 0
    for s in maxima.series:
        labels = s.labels
        pod = first_label(labels, POD_LABELS)
        if not pod:
            unlabelled += 1
            continue
        for what, names in (("pod", POD_LABELS), ("namespace", NAMESPACE_LABELS), ("host", HOST_LABELS)):
            used = next((n for n in names if labels.get(n)), "")
            seen = report.spellings.setdefault(what, [])
            if used and used not in seen:
                seen.append(used)
                seen.sort()
        top = s.last
        if math.isnan(top):
            continue
        key = _key(labels)
        avg = extra["avg"].get(key, math.nan)
        count = extra["count"].get(key, math.nan)
        report.gpus.append(GpuUtilization(
            namespace=first_label(labels, NAMESPACE_LABELS),
            pod=pod,
            container=first_label(labels, CONTAINER_LABELS),
            node=first_label(labels, HOST_LABELS),
            gpu=first_label(labels, UUID_LABELS) or labels.get("gpu", ""),
            max_percent=top,
            avg_percent=top if math.isnan(avg) else avg,
            samples=0 if math.isnan(count) else int(count),
        ))
    if unlabelled and not report.gpus:
        report.notes.append(
            f"{unlabelled} {metric} series carry no pod label: enable dcgm-exporter's Kubernetes mapping "
            "(-k / DCGM_EXPORTER_KUBERNETES=true)"
        )
    return report

"""DCGM utilization from a real Prometheus loaded with hours of history; slow and broken servers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpuguard.prometheus import PrometheusClient, PrometheusError, gpu_use, gpu_utilization, parse_window
from tests.support.http_replies import reply
from tests.support.prometheus import HistorySeries, RunningPrometheus, free_port, prometheus_with_history

METRIC = "DCGM_FI_DEV_GPU_UTIL"
STEP = 30
END = (int(time.time()) // 60) * 60 - 300
START = END - 3 * 3600


def gpu_labels(gpu: int, host: str, host_label: str = "Hostname", **k8s: str) -> dict[str, str]:
    return {
        "gpu": str(gpu),
        "UUID": f"GPU-{host}-{gpu:02d}-0000-0000-000000000000",
        "pci_bus_id": f"00000000:{gpu + 0x18:02X}:00.0",
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA H100 80GB HBM3",
        host_label: host,
        **k8s,
    }


def points(value: float | None = None, *, start: int = START, busy_until: int | None = None,
           busy: float = 92.0) -> list[tuple[float, float]]:
    out = []
    for i, ts in enumerate(range(start, END + 1, STEP)):
        if busy_until is not None:
            out.append((float(ts), busy if ts < busy_until else 0.0))
        else:
            out.append((float(ts), value if value is not None else 80.0 + (i % 20)))
    return out


HISTORY = [
    # exporter scraped directly / honor_labels: pod, namespace, container; release host label Hostname
    HistorySeries(METRIC, gpu_labels(0, "h100-a", pod="notebook-idle", namespace="ml", container="notebook"),
                  points(0.0)),
    HistorySeries(METRIC, gpu_labels(1, "h100-a", pod="train-a", namespace="ml", container="main"), points()),
    HistorySeries(METRIC, gpu_labels(2, "h100-a", pod="train-a", namespace="ml", container="main"), points()),
    # through a ServiceMonitor without honorLabels: exported_*; pod is the exporter; main's "hostname"
    HistorySeries(METRIC, gpu_labels(0, "h100-b", "hostname", exported_pod="init-pod", exported_namespace="ml",
                                     exported_container="main", pod="dcgm-exporter-7xk2p",
                                     namespace="gpu-operator", container="exporter"), points(0.4)),
    # busy for two hours, quiet for the last hour
    HistorySeries(METRIC, gpu_labels(1, "h100-b", pod="went-quiet", namespace="research", container="main"),
                  points(busy_until=END - 3600 - STEP)),
    # started ten minutes ago
    HistorySeries(METRIC, gpu_labels(3, "h100-b", pod="just-started", namespace="ml", container="main"),
                  points(0.0, start=END - 600)),
    # a GPU no pod holds: no pod labels at all
    HistorySeries(METRIC, gpu_labels(7, "h100-b"), points(0.0)),
]


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPrometheus]:
    with prometheus_with_history(HISTORY, tmp_path_factory.mktemp("prometheus")) as running:
        yield running


@pytest.mark.integration
def test_idle_pods_over_the_last_hour(prom: RunningPrometheus) -> None:
    with PrometheusClient(prom.url) as client:
        report = gpu_utilization(client, "1h", at=END)
    assert report.available and report.notes == []
    pods = report.by_pod()
    assert set(pods) == {("ml", "notebook-idle"), ("ml", "train-a"), ("ml", "init-pod"),
                         ("research", "went-quiet"), ("ml", "just-started")}
    assert [(p.namespace, p.pod) for p in report.idle_pods()] == [
        ("ml", "init-pod"), ("ml", "just-started"), ("ml", "notebook-idle"), ("research", "went-quiet")]
    train = pods[("ml", "train-a")]
    assert len(train.gpus) == 2 and train.max_percent == 99.0 and 80 <= train.avg_percent <= 99
    # the relabelled series: workload pod from exported_pod, node from the lower-case hostname label
    (init_gpu,) = pods[("ml", "init-pod")].gpus
    assert (init_gpu.node, init_gpu.container, init_gpu.max_percent) == ("h100-b", "main", 0.4)
    assert report.spellings == {"pod": ["exported_pod", "pod"], "namespace": ["exported_namespace", "namespace"],
                                "host": ["Hostname", "hostname"]}
    # a full hour at 30 s holds 120-121 samples; the new pod only about 20: callers can tell them apart
    assert pods[("ml", "notebook-idle")].samples >= 120
    assert pods[("ml", "just-started")].samples <= 21
    # what the engine's diagnosis takes
    use = gpu_use(report)
    assert use[("ml", "init-pod")].max_percent == 0.4 and use[("ml", "train-a")].max_percent == 99.0


@pytest.mark.integration
def test_a_longer_window_sees_the_busy_hours(prom: RunningPrometheus) -> None:
    with PrometheusClient(prom.url) as client:
        report = gpu_utilization(client, "3h", at=END)
    idle = {(p.namespace, p.pod) for p in report.idle_pods()}
    assert ("research", "went-quiet") not in idle
    assert ("ml", "notebook-idle") in idle


@pytest.mark.integration
def test_query_range_returns_the_backfilled_matrix(prom: RunningPrometheus) -> None:
    with PrometheusClient(prom.url) as client:
        result = client.query_range(f'{METRIC}{{pod="train-a",gpu="1"}}', END - 600, END, 60)
    assert result.result_type == "matrix"
    (series,) = result.series
    assert len(series.values) == 11 and all(80 <= v <= 99 for _, v in series.values)


@pytest.mark.integration
def test_bad_promql_is_a_query_error_with_the_server_message(prom: RunningPrometheus) -> None:
    with PrometheusClient(prom.url) as client, pytest.raises(PrometheusError) as caught:
        client.query("max_over_time(DCGM_FI_DEV_GPU_UTIL[", at=END)
    assert caught.value.kind == "query" and "bad_data" in caught.value.message


@pytest.mark.integration
def test_no_dcgm_series_gives_a_note(prom: RunningPrometheus) -> None:
    with PrometheusClient(prom.url) as client:
        report = gpu_utilization(client, "1h", at=END, metric="DCGM_FI_DEV_NOT_SCRAPED")
    assert report.available and report.gpus == []
    assert report.notes and "is dcgm-exporter scraped" in report.notes[0]


def test_unreachable_prometheus_is_a_note_not_a_failure() -> None:
    port = free_port()  # nothing listens there any more
    with PrometheusClient(f"http://127.0.0.1:{port}", timeout=2.0) as client:
        report = gpu_utilization(client, "1h")
    assert not report.available and report.gpus == []
    assert report.notes[0].startswith("GPU utilization unavailable (unreachable)")


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts connections, reads the request, never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        listener.close()


def test_slow_prometheus_times_out_into_a_note(silent_server: int) -> None:
    started = time.monotonic()
    with PrometheusClient(f"http://127.0.0.1:{silent_server}", timeout=0.5) as client:
        report = gpu_utilization(client, "1h")
    elapsed = time.monotonic() - started
    assert elapsed < 5.0
    assert not report.available
    assert report.notes[0].startswith("GPU utilization unavailable (timeout)")


class _Canned(BaseHTTPRequestHandler):
    body = b""
    status = 200

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        reply(self, self.status, self.body)


@pytest.fixture
def canned() -> Iterator[tuple[int, type[_Canned]]]:
    handler = type("Handler", (_Canned,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler
    finally:
        server.shutdown()
        server.server_close()


def test_oversized_answer_is_cut_off(canned: tuple[int, type[_Canned]]) -> None:
    port, handler = canned
    handler.body = b'{"status":"success","data":{"resultType":"vector","result":[' + b" " * 50_000 + b"]}}"
    with PrometheusClient(f"http://127.0.0.1:{port}", max_bytes=10_000) as client:
        report = gpu_utilization(client, "1h")
    assert report.notes[0].startswith("GPU utilization unavailable (too-large)")


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (200, b"<html>login</html>", "bad-response"),
        (502, b"Bad Gateway", "http"),
        (200, b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1]]}]}}',
         "bad-response"),
        (503, b'{"status":"error","errorType":"timeout","error":"query timed out"}', "query"),
    ],
)
def test_answers_that_are_not_usable_become_notes(canned: tuple[int, type[_Canned]], status: int, body: bytes,
                                                   kind: str) -> None:
    port, handler = canned
    handler.status, handler.body = status, body
    with PrometheusClient(f"http://127.0.0.1:{port}") as client:
        report = gpu_utilization(client, "1h")
    assert report.notes[0].startswith(f"GPU utilization unavailable ({kind})")


def test_window_and_url_validation() -> None:
    assert parse_window("1h") == 3600 and parse_window("1h30m") == 5400 and parse_window("90s") == 90
    for bad in ("1 hour", "", "h", "-1h", "0s"):
        with pytest.raises(ValueError):
            parse_window(bad)
    for url in ("ftp://x", "localhost:9090", "http://"):
        with pytest.raises(ValueError):
            PrometheusClient(url)

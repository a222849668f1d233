"""``--prometheus``: idle GPU holders from a real Prometheus (Debian's) loaded with three hours of
DCGM-exporter history in every label spelling, queried over HTTP by the command; a slow or
unreachable Prometheus is a note, never a failure."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuguard.cli import main
from policies.pending import diagnose as dg
from tests.support.proc import gpuguard
from tests.support.prometheus import HistorySeries, RunningPrometheus, free_port, prometheus_with_history
from tests.whypending.support import cluster, happening_now, objects, reasons, write_dump
from whypending import utilization

pytestmark = pytest.mark.integration

METRIC = "DCGM_FI_DEV_GPU_UTIL"
STEP = 30
END = (int(time.time()) // 60) * 60 - 60
START = END - 3 * 3600
WINDOW = "45m"


def gpu(host: str, index: int, host_label: str = "Hostname", uuid_label: str = "UUID", **k8s: str) -> dict[str, str]:
    """Labels as dcgm-exporter writes them (pending-gpus.md §5.1): gpu, UUID, pci_bus_id, device,
    modelName, the host label, and the Kubernetes mapping."""
    return {"gpu": str(index), uuid_label: f"GPU-{host}-{index:02d}-0000-0000-000000000000",
            "pci_bus_id": f"00000000:{index + 0x18:02X}:00.0", "device": f"nvidia{index}",
            "modelName": "NVIDIA H100 80GB HBM3", host_label: host, **k8s}


def busy(i: int) -> float:
    return 70.0 + (i * 7) % 29


def series(labels: dict[str, str], value: float | None) -> HistorySeries:
    pts = [(float(ts), busy(i) if value is None else value) for i, ts in enumerate(range(START, END + 1, STEP))]
    return HistorySeries(METRIC, labels, pts)


def history() -> list[HistorySeries]:
    out = []
    # scraped directly or with honorLabels: pod/namespace/container, release host label "Hostname"
    for n in range(4):
        out.append(series(gpu("h100-a", n, pod="train-a", namespace="ml", container="main"), None))
    for n in (4, 5):
        out.append(series(gpu("h100-a", n, pod="notebook-idle", namespace="ml", container="notebook"), 0.0))
    # through a ServiceMonitor without honorLabels (exported_*), main's lower-case "hostname"
    for n in range(3):
        out.append(series(gpu("h100-b", n, "hostname", exported_pod="init-pod", exported_namespace="ml",
                              exported_container="fetch", pod="dcgm-exporter-x2k9q", namespace="gpu-operator"),
                          0.4))
    for n in (3, 4, 5):
        out.append(series(gpu("h100-b", n, "hostname", exported_pod="sidecar-pod", exported_namespace="ml",
                              exported_container="main", pod="dcgm-exporter-x2k9q", namespace="gpu-operator"), None))
    for n in range(4):
        out.append(series(gpu("h100-c", n, pod="train-c", namespace="ml", container="main"), None))
    for n in (4, 5):
        out.append(series(gpu("h100-c", n, pod="terminating", namespace="ml", container="main"), 0.0))
    for n in range(7):
        out.append(series(gpu("a100-unhealthy", n, pod="a100-job", namespace="ml", container="main"), None))
    # --use-old-namespace: pod_name/pod_namespace/container_name and "uuid"
    for n in (0, 1):
        out.append(series(gpu("l4-b", n, uuid_label="uuid", pod_name="kata-infer", pod_namespace="serving",
                              container_name="server"), 0.0))
    # GPUs no pod holds carry no pod labels
    out.append(series(gpu("h100-a", 6), 0.0))
    return out


@pytest.fixture(scope="module")
def prom(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPrometheus]:
    with prometheus_with_history(history(), tmp_path_factory.mktemp("prometheus")) as running:
        yield running


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dump(objects(happening_now(cluster())), tmp_path_factory.mktemp("dump") / "cluster.json", "json")


def test_idle_holders_and_idle_pools(prom: RunningPrometheus, dump: Path) -> None:
    done = gpuguard("why-pending", "--dump", str(dump), "-A", "--prometheus", prom.url, "--idle-window", WINDOW,
                    "--format", "json")
    assert done.code == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    idle = reasons(doc, "ml/big-train")[dg.IDLE_HOLDERS]
    # h100-a and h100-b fit big-train but for GPUs; of their holders, init-pod (0.4 %) and the
    # notebook (0 %) stayed under 1 %; train-a and sidecar-pod are busy
    assert idle["pods"] == ["ml/init-pod", "ml/notebook-idle"]
    assert idle["nodes"] == ["h100-b", "h100-a"]
    assert idle["message"].startswith("5 GPUs the pod could use are held by pods whose utilization stayed below 1%")
    assert "ml/notebook-idle holds 2 GPUs on h100-a at max 0% (priority 0, owner StatefulSet/notebook" in \
        idle["message"]
    # kata-infer (old label namespace) is idle on l4-b, which l4-infer needs
    assert reasons(doc, "serving/l4-infer").get(dg.IDLE_HOLDERS) is None  # l4-b is short of cpu, not GPUs
    pools = {p["name"]: p for p in doc["cluster"]["pools"]}
    # H100: notebook 2 + init-pod 3 + the terminating pod's 2; L4: kata-infer 2
    assert pools["NVIDIA-H100-80GB-HBM3 (p5.48xlarge)"]["idle"] == 7
    assert pools["NVIDIA-L4 (g6.12xlarge)"]["idle"] == 2
    assert pools["NVIDIA-A100-SXM4-80GB (p4de.24xlarge)"]["idle"] == 0
    assert "utilization" not in done.stderr  # no Prometheus note


def test_idle_holders_in_text(prom: RunningPrometheus, dump: Path) -> None:
    done = gpuguard("why-pending", "--dump", str(dump), "-n", "ml", "big-train", "--prometheus", prom.url,
                    "--idle-window", WINDOW)
    assert done.code == 0, done.stderr
    text = done.stdout
    assert f"GPU utilization: {prom.url}, 27 pod-held GPUs over the last {WINDOW}" in " ".join(text.split())
    block = text[text.index("  idle-holders"):]
    lines = [line.strip() for line in block.splitlines()[:4]]
    assert lines[0].startswith("idle-holders") and "5 GPUs the pod could use" in lines[0]
    assert lines[1].startswith("stayed below 1%") or "stayed below 1%" in lines[0] + lines[1]
    assert "- ml/init-pod holds 3 GPUs on h100-b at max 0.4%" in block
    assert "idle" in text[text.index("GPU pools"):].splitlines()[1]


def test_a_pod_started_inside_the_window_is_not_idle(prom: RunningPrometheus, tmp_path: Path) -> None:
    """max_over_time only sees samples that exist: a pod younger than the window proves nothing."""
    parts = happening_now(cluster())
    for p in parts["pods"]:
        if p["metadata"]["name"] == "notebook-idle":
            recent = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(END - 600))
            p["status"]["startTime"] = p["metadata"]["creationTimestamp"] = recent
    dump = write_dump(objects(parts), tmp_path / "c.json", "json")
    done = gpuguard("why-pending", "--dump", str(dump), "-n", "ml", "big-train", "--prometheus", prom.url,
                    "--idle-window", WINDOW, "--format", "json")
    assert done.code == 0, done.stderr
    assert reasons(json.loads(done.stdout), "ml/big-train")[dg.IDLE_HOLDERS]["pods"] == ["ml/init-pod"]


class SilentServer:
    """Accepts connections and reads requests but never answers (a Prometheus stuck on a query)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.release = threading.Event()
        self.accepted = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        held = []
        self.sock.settimeout(0.1)
        while not self.release.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            held.append(conn)
            self.accepted.set()
        for conn in held:
            conn.close()

    def close(self) -> None:
        self.release.set()
        self.thread.join(timeout=5)
        self.sock.close()


def test_a_slow_prometheus_is_a_note(capsys: pytest.CaptureFixture[str], dump: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(utilization, "TIMEOUT_SECONDS", 1.0)
    server = SilentServer()
    try:
        started = time.monotonic()
        code = main(["why-pending", "--dump", str(dump), "-A", "--prometheus", f"http://127.0.0.1:{server.port}",
                     "--format", "json"])
        elapsed = time.monotonic() - started
    finally:
        server.close()
    out, err = capsys.readouterr()
    assert code == 0 and server.accepted.is_set()
    assert elapsed < 10
    doc = json.loads(out)
    assert all("idle" not in p for p in doc["cluster"]["pools"])
    assert all(dg.IDLE_HOLDERS not in reasons(doc, f"{p['namespace']}/{p['name']}") for p in doc["pods"])
    assert f"note: GPU utilization unavailable (timeout): http://127.0.0.1:{server.port} did not answer within 1s" \
        in err


def test_an_unreachable_prometheus_is_a_note(dump: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = gpuguard("why-pending", "--dump", str(dump), "-A", "--prometheus", url)
    assert done.code == 0, done.stderr
    flat = " ".join(done.stdout.split())
    assert f"GPU utilization: unavailable from {url} (see notes)" in flat
    assert f"GPU utilization unavailable (unreachable): cannot reach {url}" in flat

"""A real Prometheus server (Debian's ``prometheus`` package) with backfilled history, on loopback.

History is written as OpenMetrics and turned into TSDB blocks by ``promtool tsdb
create-blocks-from openmetrics`` before the server starts, so "the last N hours" exist at once
(pending-gpus.md §7).  Under CI (``GPUGUARD_CI=1``) missing tools fail the test instead of
skipping it; ``.ci/run`` installs them.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.paths import IN_CI

READY_DEADLINE = 30.0


def require_tools() -> tuple[str, str]:
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prometheus and promtool:
        return prometheus, promtool
    message = "prometheus/promtool not installed (apt-get install --no-install-recommends prometheus)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(frozen=True)
class HistorySeries:
    metric: str
    labels: Mapping[str, str]
    points: Sequence[tuple[float, float]]  # (unix seconds, value), in time order


def openmetrics(series: Iterable[HistorySeries], help_text: str = "GPU utilization (in %).") -> str:
    """OpenMetrics text with explicit timestamps, grouped per metric family, ending in ``# EOF``."""
    families: dict[str, list[HistorySeries]] = {}
    for s in series:
        families.setdefault(s.metric, []).append(s)
    lines: list[str] = []
    for metric, members in families.items():
        lines.append(f"# HELP {metric} {help_text}")
        lines.append(f"# TYPE {metric} gauge")
        for s in members:
            labels = ",".join(f'{k}="{v}"' for k, v in s.labels.items())
            lines.extend(f"{metric}{{{labels}}} {value:g} {ts:.0f}" for ts, value in s.points)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@dataclass
class RunningPrometheus:
    url: str
    process: subprocess.Popen[bytes]
    data: Path


def backfill(promtool: str, text: str, workdir: Path) -> Path:
    data = workdir / "data"
    source = workdir / "history.om"
    source.write_text(text)
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"promtool failed: {done.stderr or done.stdout}"
    return data


@contextlib.contextmanager
def prometheus_with_history(series: Iterable[HistorySeries], workdir: Path) -> Iterator[RunningPrometheus]:
    """Backfill ``series``, start Prometheus on 127.0.0.1 over that storage, stop it afterwards."""
    prometheus, promtool = require_tools()
    data = backfill(promtool, openmetrics(series), workdir)
    config = workdir / "prometheus.yml"
    config.write_text("global: {scrape_interval: 30s, evaluation_interval: 30s}\nscrape_configs: []\n")
    port = free_port()
    log = (workdir / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [prometheus, f"--config.file={config}", f"--storage.tsdb.path={data}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=3650d"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, proc, workdir / "prometheus.log")
        yield RunningPrometheus(url, proc, data)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_DEADLINE
    with httpx.Client(timeout=1.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"prometheus exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                if client.get(f"{url}/-/ready").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            # the server is starting: poll its readiness endpoint at a short interval
            time.sleep(0.05)
    raise AssertionError(f"prometheus not ready within {READY_DEADLINE}s: {log.read_text()[-2000:]}")

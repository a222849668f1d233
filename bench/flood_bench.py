"""Peak memory of ``gpuguard serve`` under each flood of issue 10, against its own idle memory.

Each flood gets a fresh server (TLS, 7-node example cluster, the shipped defaults: 1,024
connections, 10 s request timeout) so its peak is its own.  The baseline, in the same run, is the
server's resident memory once ready and answering; a flood's figure is its peak (VmHWM) over it.
After every flood the server must still answer ``/healthz`` and a real review on the webhook port.

Floods:

* ``headers``: 3 connections in parallel, each streaming a request head of up to 146 MiB;
* ``connections``: 15,000 connections at once: silent TCP, idle TLS, and heads trickled a byte
  at a time (slow loris), a third each;
* ``bodies``: 32 connections in parallel, each streaming a 64 MiB body;
* ``annotations``: 2,000 distinct pods, each carrying 192 KB of annotations (as the API server
  accepts), 16 at a time;
* ``kinds``: 60 reviews whose ``request.kind.kind`` is 5 MiB, then 5,000 with distinct kinds; the
  ``/metrics`` scrape size after it is reported too.

And those of the adversarial review (issue 21), each with a victim: one client sending ordinary
reviews one after another while the attack runs, counted as late past the webhooks' 5 s timeout
(under ``failurePolicy: Ignore`` a late review is an admission):

* ``idle-sockets``: 1,500 idle TCP sockets from another address (127.0.0.2), then 20 fresh reviews;
  ``idle-sockets-spread`` the same from six addresses (250 each: under the per-source share);
* ``redos``: one attacker connection posting distinct reviews to ``/mutate`` and ``/validate`` with a
  32 KiB ``pytorch/pytorch:111…1-`` image and a 40 KiB ``{{…`` nodeSelector value;
* ``cel``: 5 attacker connections posting distinct 117 KiB ResourceClaimTemplates of 12 CEL
  selectors;
* ``memory``: 500 reviews with distinct 1 MiB images, then 12 concurrent 5.9 MiB reviews.

Goal: every peak under the shipped memory limit (512 MiB), /metrics small, and no victim review late.
``--server-root``/``--server-python`` run another checkout's ``gpuguard serve`` (the previous
release, say) under the same floods, for before/after figures from one machine.

    .venv/bin/python bench/flood_bench.py [--only headers,kinds]
    .venv/bin/python bench/flood_bench.py --server-root ../old --server-python ../old/.venv/bin/python
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

REVIEW = ROOT / "tests" / "fixtures" / "admission" / "pod-gpu-with-limit.json"
EXAMPLE_CLUSTER = ROOT / "examples" / "cluster.yaml"
LIMIT_MIB = 512  # deploy/deployment.yaml resources.limits.memory
MIB = 1024 * 1024


@dataclass
class Target:
    proc: subprocess.Popen[bytes]
    port: int
    health_port: int
    ca: Path

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        ctx.check_hostname = False
        return ctx

    def memory_kib(self, field: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise RuntimeError(f"{field} not in /proc/{self.proc.pid}/status")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def review_body(obj: dict[str, Any] | None = None, kind: str = "Pod") -> bytes:
    review = json.loads(REVIEW.read_text())
    if obj is not None:
        review["request"]["object"] = obj
    review["request"]["kind"]["kind"] = kind
    return json.dumps(review).encode()


def answers(target: Target) -> bool:
    """/healthz on the health port and one real review on the webhook port."""
    with httpx.Client(verify=target.context(), timeout=10) as client:
        health = client.get(f"http://127.0.0.1:{target.health_port}/healthz")
        verdict = client.post(
            f"https://127.0.0.1:{target.port}/validate", content=review_body(),
            headers={"Content-Type": "application/json"},
        )
    return health.status_code == 200 and verdict.status_code == 200 and verdict.json()["response"]["allowed"]


SERVER = {"root": ROOT, "python": Path(sys.executable)}


def start(work: Path, cert: Path, key: Path, ca: Path) -> Target:
    port, health_port = free_port(), free_port()
    root, python = SERVER["root"], SERVER["python"]
    cmd = [
        str(python), "-m", "gpuguard.cli", "serve", "--tls-cert", str(cert), "--tls-key", str(key),
        "--host", "127.0.0.1", "--port", str(port), "--health-port", str(health_port),
        "--cluster", str(EXAMPLE_CLUSTER),
    ]
    log = (work / f"serve-{port}.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=log)
    target = Target(proc, port, health_port, ca)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}; see {log.name}")
        try:
            if answers(target):
                return target
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("server did not become ready")


def stop(target: Target) -> None:
    target.proc.terminate()
    try:
        target.proc.wait(10)
    except subprocess.TimeoutExpired:
        target.proc.kill()


async def _open(target: Target, use_tls: bool) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(
        "127.0.0.1", target.port, ssl=target.context() if use_tls else None,
        server_hostname="localhost" if use_tls else None,
    )


async def _drain_answer(reader: asyncio.StreamReader) -> bytes:
    try:
        return await asyncio.wait_for(reader.read(4096), 30)
    except (TimeoutError, ConnectionError, ssl.SSLError):
        return b""


async def _stream(target: Target, head: bytes, chunk: bytes, size: int, parallel: int) -> str:
    """``parallel`` connections each send ``head`` then ``chunk`` until ``size`` bytes are sent or
    the server answers or closes; what they were answered."""

    async def one() -> bytes:
        reader, writer = await _open(target, True)
        writer.write(head)
        sent = 0
        try:
            while sent < size and not reader.at_eof():
                writer.write(chunk)
                await writer.drain()
                sent += len(chunk)
        except (ConnectionError, ssl.SSLError):
            pass
        answer = await _drain_answer(reader)
        writer.close()
        return answer

    answers_ = await asyncio.gather(*(one() for _ in range(parallel)))
    status = sorted({a.split(b"\r\n", 1)[0].decode(errors="replace") or "(closed)" for a in answers_})
    return "answered " + ", ".join(status)


async def flood_headers(target: Target) -> str:
    """Stream a huge head until the server answers or closes."""
    head = b"POST /validate HTTP/1.1\r\nHost: localhost\r\n"
    return await _stream(target, head, b"X-Flood: " + b"a" * (64 * 1024 - 11) + b"\r\n", 146 * MIB, 3)


async def flood_connections(target: Target, count: int = 15_000) -> str:
    """Silent TCP, idle TLS and trickled heads, held until the server closes them."""
    opened: list[asyncio.StreamWriter] = []
    refused = 0

    async def silent() -> None:
        nonlocal refused
        try:
            _, writer = await _open(target, False)
            opened.append(writer)
        except OSError:
            refused += 1

    async def idle_tls() -> None:
        nonlocal refused
        try:
            _, writer = await _open(target, True)
            opened.append(writer)
        except (OSError, ssl.SSLError):
            refused += 1

    async def trickle() -> None:
        nonlocal refused
        try:
            reader, writer = await _open(target, True)
        except (OSError, ssl.SSLError):
            refused += 1
            return
        opened.append(writer)
        try:
            for byte in b"POST /validate HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"z" * 64:
                if reader.at_eof():
                    return
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.5)  # the attack's pace, not synchronisation
        except (ConnectionError, ssl.SSLError):
            return

    kinds = (silent, idle_tls, trickle)
    tasks = [asyncio.ensure_future(kinds[i % 3]()) for i in range(count)]
    await asyncio.gather(*tasks)
    held = sum(1 for w in opened if not w.is_closing())
    for writer in opened:
        writer.close()
    return f"{count} opened or attempted, {refused} refused at connect, {held} still open at the end"


async def flood_bodies(target: Target) -> str:
    size = 64 * MIB
    head = (b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {size}\r\n\r\n".encode())
    return await _stream(target, head, b" " * (256 * 1024), size, 32)


async def _post_all(target: Target, bodies: Callable[[int], bytes], count: int, parallel: int = 16) -> dict[int, int]:
    statuses: dict[int, int] = {}
    queue = iter(range(count))
    async with httpx.AsyncClient(verify=target.context(), timeout=60,
                                 limits=httpx.Limits(max_connections=parallel)) as client:
        async def worker() -> None:
            for n in queue:
                response = await client.post(
                    f"https://127.0.0.1:{target.port}/validate", content=bodies(n),
                    headers={"Content-Type": "application/json"},
                )
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

        await asyncio.gather(*(worker() for _ in range(parallel)))
    return statuses


async def flood_annotations(target: Target) -> str:
    base = json.loads(REVIEW.read_text())["request"]["object"]
    filler = "x" * (192 * 1024)

    def body(n: int) -> bytes:
        obj = json.loads(json.dumps(base))
        obj["metadata"]["name"] = f"train-{n}"
        obj["metadata"]["annotations"] = {"example.com/notes": f"{n}:{filler}"}
        obj["spec"]["containers"][0]["name"] = f"train-{n}"
        return review_body(obj)

    statuses = await _post_all(target, body, 2000)
    return f"2000 reviews of ~193 KB: HTTP {statuses}"


async def flood_kinds(target: Target) -> str:
    huge = await _post_all(target, lambda n: review_body(kind=f"K{n}" + "k" * (5 * MIB)), 60, parallel=4)
    small = await _post_all(target, lambda n: review_body(kind=f"Kind{n}"), 5000)
    async with httpx.AsyncClient(timeout=30) as client:
        scrape = await client.get(f"http://127.0.0.1:{target.health_port}/metrics")
    return f"60 x 5 MiB kinds: HTTP {huge}; 5,000 distinct kinds: HTTP {small}; /metrics {len(scrape.content):,} bytes"


TIMEOUT = 5.0  # the shipped webhooks' timeoutSeconds


class Victim:
    """Ordinary reviews sent one after another on their own connection while an attack runs."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.latencies: list[float] = []
        self.failed = 0
        self.stopped = asyncio.Event()

    async def run(self) -> None:
        async with httpx.AsyncClient(verify=self.target.context(), timeout=30) as client:
            n = 0
            while not self.stopped.is_set():
                n += 1
                started = time.perf_counter()
                try:
                    response = await client.post(
                        f"https://127.0.0.1:{self.target.port}/validate", content=_victim_body(n),
                        headers={"Content-Type": "application/json"},
                    )
                    if response.status_code != 200:
                        self.failed += 1
                except httpx.HTTPError:
                    self.failed += 1
                self.latencies.append(time.perf_counter() - started)

    def summary(self) -> str:
        lat = sorted(self.latencies)
        if not lat:
            return "victim: no review answered"
        late = sum(1 for x in lat if x > TIMEOUT)
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
        return (f"victim: {len(lat)} reviews, {late} ({100 * late / len(lat):.0f} %) later than {TIMEOUT:.0f} s, "
                f"p50 {lat[len(lat) // 2] * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms, "
                f"{self.failed} failed")


def _victim_body(n: int) -> bytes:
    obj = json.loads(REVIEW.read_text())["request"]["object"]
    obj["metadata"]["name"] = f"victim-{n}"
    obj["spec"]["containers"][0]["image"] = f"registry.example.com/team/app:{n}"
    return review_body(obj)


async def _with_victim(target: Target, attack: Coroutine[Any, Any, str]) -> str:
    victim = Victim(target)
    running = asyncio.ensure_future(victim.run())
    try:
        outcome = await attack
    finally:
        victim.stopped.set()
        await running
    return f"{outcome}; {victim.summary()}"


async def _attack_posts(target: Target, bodies: Callable[[int], tuple[str, bytes]], seconds: float,
                        connections: int) -> str:
    """``connections`` attacker connections posting ``bodies(n)`` (endpoint, body) for ``seconds``."""
    sent = 0
    statuses: dict[int, int] = {}
    end = time.monotonic() + seconds
    async with httpx.AsyncClient(verify=target.context(), timeout=60,
                                 limits=httpx.Limits(max_connections=connections)) as client:
        async def attacker(k: int) -> None:
            nonlocal sent
            n = k
            while time.monotonic() < end:
                endpoint, body = bodies(n)
                n += connections
                try:
                    response = await client.post(f"https://127.0.0.1:{target.port}/{endpoint}", content=body,
                                                 headers={"Content-Type": "application/json"})
                    statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                except httpx.HTTPError:
                    statuses[0] = statuses.get(0, 0) + 1
                sent += 1

        await asyncio.gather(*(attacker(k) for k in range(connections)))
    return f"{sent} attack reviews over {seconds:.0f} s: HTTP {statuses}"


async def flood_idle_sockets(target: Target, sources: int = 1) -> str:
    sockets: list[asyncio.StreamWriter] = []
    for n in range(1500):
        try:
            _, writer = await asyncio.open_connection(
                "127.0.0.1", target.port, local_addr=(f"127.0.0.{2 + n % sources}", 0)
            )
            sockets.append(writer)
        except OSError:
            pass
    answered = 0
    latencies = []
    async with httpx.AsyncClient(verify=target.context(), timeout=TIMEOUT) as client:
        for n in range(20):
            started = time.perf_counter()
            try:
                response = await client.post(f"https://127.0.0.1:{target.port}/validate", content=_victim_body(n),
                                             headers={"Content-Type": "application/json"})
                answered += response.status_code == 200
            except httpx.HTTPError:
                pass
            latencies.append(time.perf_counter() - started)
    held = sum(1 for w in sockets if not w.is_closing())
    for writer in sockets:
        writer.close()
    return (f"1,500 idle sockets from {sources} address(es) ({len(sockets)} accepted at connect); "
            f"{answered}/20 fresh reviews answered "
            f"within {TIMEOUT:.0f} s (slowest {max(latencies) * 1000:.0f} ms); {held} sockets still open")


def _pytorch_review(n: int) -> tuple[str, bytes]:
    obj = json.loads(REVIEW.read_text())["request"]["object"]
    obj["metadata"]["name"] = f"redos-{n}"
    obj["spec"]["containers"][0]["image"] = "pytorch/pytorch:" + "1" * (32 * 1024 + n % 7) + "-"
    obj["spec"]["nodeSelector"] = {"pool": "{{" * (20 * 1024 + n % 5)}
    return ("mutate" if n % 2 else "validate"), review_body(obj)


async def flood_redos(target: Target) -> str:
    return await _with_victim(target, _attack_posts(target, _pytorch_review, 30, 1))


def _claim_template(n: int) -> tuple[str, bytes]:
    selectors = [
        {"cel": {"expression": " || ".join(
            f"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA-{n:06d}-{s:02d}-{i:04d}'" for i in range(125)
        )}}
        for s in range(12)
    ]
    obj = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": f"cel-{n}", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": selectors}}
        ]}}},
    }
    review = json.loads(REVIEW.read_text())
    review["request"]["object"] = obj
    review["request"]["kind"] = {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaimTemplate"}
    review["request"]["resource"] = {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaimtemplates"}
    return "validate", json.dumps(review).encode()


async def flood_cel(target: Target) -> str:
    size = len(_claim_template(0)[1])
    outcome = await _with_victim(target, _attack_posts(target, _claim_template, 30, 5))
    return f"templates of {size / 1024:.0f} KiB: {outcome}"


async def flood_memory(target: Target) -> str:
    base = json.loads(REVIEW.read_text())["request"]["object"]

    def distinct_image(n: int) -> bytes:
        obj = json.loads(json.dumps(base))
        obj["metadata"]["name"] = f"img-{n}"
        obj["spec"]["containers"][0]["image"] = f"nvidia/cuda:{n}" + "9" * MIB
        return review_body(obj)

    images = await _post_all(target, distinct_image, 500, parallel=4)
    after_images = target.memory_kib("VmRSS") / 1024

    def large(n: int) -> bytes:
        obj = json.loads(json.dumps(base))
        obj["metadata"]["name"] = f"large-{n}"
        c = obj["spec"]["containers"][0]
        obj["spec"]["containers"] = [{**c, "name": f"c{i}-{n}", "env": [{"name": f"V{j}", "value": "x" * 96}
                                                                          for j in range(40)]}
                                     for i in range(1150)]
        return review_body(obj)

    sample = len(large(0))
    bodies = await _post_all(target, large, 12, parallel=12)
    return (f"500 reviews with distinct 1 MiB images: HTTP {images}, RSS after them {after_images:.0f} MiB; "
            f"12 concurrent {sample / MIB:.1f} MiB reviews: HTTP {bodies}")


FLOODS: dict[str, Callable[[Target], Coroutine[Any, Any, str]]] = {
    "headers": flood_headers,
    "connections": flood_connections,
    "bodies": flood_bodies,
    "annotations": flood_annotations,
    "kinds": flood_kinds,
    "idle-sockets": flood_idle_sockets,
    "idle-sockets-spread": lambda target: flood_idle_sockets(target, sources=6),
    "redos": flood_redos,
    "cel": flood_cel,
    "memory": flood_memory,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(FLOODS), help="comma-separated floods to run")
    parser.add_argument("--server-root", type=Path, default=ROOT, help="the checkout whose gpuguard serve runs")
    parser.add_argument("--server-python", type=Path, default=Path(sys.executable), help="its Python")
    args = parser.parse_args(argv)
    SERVER.update(root=args.server_root.resolve(), python=args.server_python.absolute())
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in FLOODS]
    if unknown:
        parser.error(f"unknown flood {', '.join(unknown)}; choose from {', '.join(FLOODS)}")
    # 15,000 client connections and the server's own: both sides need the descriptors.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    from certs.tls import generate_bundle

    rows = []
    with tempfile.TemporaryDirectory(prefix="gpuguard-flood-") as tmp:
        work = Path(tmp)
        bundle = generate_bundle("gpuguard", "gpuguard", work / "certs", extra_sans=["localhost", "127.0.0.1"])
        for name in chosen:
            target = start(work, bundle.tls_crt, bundle.tls_key, bundle.ca_crt)
            try:
                idle = target.memory_kib("VmRSS") / 1024
                started = time.monotonic()
                outcome = asyncio.run(FLOODS[name](target))
                seconds = time.monotonic() - started
                peak = target.memory_kib("VmHWM") / 1024
                after = target.memory_kib("VmRSS") / 1024
                still = answers(target)
            finally:
                stop(target)
            rows.append((name, idle, peak, after, seconds, still, outcome))

    print(f"gpuguard serve under floods (fresh server each; shipped limit {LIMIT_MIB} MiB)")
    print(f"{'flood':<13}{'idle MiB':>9}{'peak MiB':>9}{'peak/idle':>10}{'after MiB':>10}{'secs':>7}  answers after")
    ok = True
    for name, idle, peak, after, seconds, still, _ in rows:
        answered = "yes" if still else "NO"
        print(f"{name:<13}{idle:>9.0f}{peak:>9.0f}{peak / idle:>10.2f}{after:>10.0f}{seconds:>7.1f}  {answered}")
        ok = ok and still and peak < LIMIT_MIB
    for name, *_, outcome in rows:
        ok = ok and " later than" not in outcome.replace(" 0 (0 %) later than", "")
        ok = ok and ("fresh reviews answered" not in outcome or "20/20 fresh" in outcome)
        print(f"  {name}: {outcome}")
    print(("PASS" if ok else "MISS") + f" every peak under {LIMIT_MIB} MiB, the server answering after each flood "
          "and no victim review late")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

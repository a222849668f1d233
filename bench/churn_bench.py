"""Live facts at fleet scale: what a large cluster's normal churn costs ``gpuguard serve``.

An in-process API server (tests/support/fake_apiserver.py, the list/watch wire format the
``kubernetes`` client reads) runs in a child process with a realistic fleet (bench/fleet.py:
5,000 nodes by default, 70 % GPU nodes in four pools, Node objects as kubelets report them) and
streams the churn such a fleet produces: GPU Feature Discovery relabelling every GPU node once a
minute and kubelets reporting status every five minutes, about 75 Node events per second at
5,000 nodes.  ``gpuguard serve --kubeconfig`` watches it, and this process sends distinct,
realistic AdmissionReviews (bench/distinct_reviews.py) at a steady ``--rate`` (open loop: each
review's latency counts from when it was due, so a stalled server cannot hide its backlog).

Measured, in one run:

1. review p50/p99 without churn, then with churn (same load): goal p99 ratio ≤ 1.5;
2. the server's CPU over ``--duration`` seconds of churn with no reviews: goal ≤ 0.25 of a core;
3. freshness under churn and load: a NoSchedule taint added to all nodes of the H100 pool within
   one second must change a probe review's verdict within 5 s of the first taint, and a taint on
   one node within 2 s;
4. ``--dra``: the same with each GPU node's GPUs published as a ResourceSlice and 20 ResourceClaim
   allocations per second (each created, allocated, and deleted a minute later);
5. ``--soak SECONDS``: the server's RSS at the start and end of churn and load.

Also read from the server's ``/metrics``: facts publishes, events that changed nothing, and the
longest rebuild of the facts (the longest stretch a rebuild held the watch thread).

    .venv/bin/python bench/churn_bench.py [--nodes 5000] [--rate 120] [--duration 30] [--dra] [--soak 600]
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import http.client
import json
import multiprocessing
import os
import queue
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import distinct_reviews  # noqa: E402
import fleet  # noqa: E402

TAINT_KEY = "gpuguard.bench/maintenance"
HISTORY_LIMIT = 20_000  # events kept per resource (compaction beyond), as etcd compacts


# --- the API server process ----------------------------------------------------------------------
class Cluster:
    """The API server's state, and the threads that churn it."""

    def __init__(self, state: Any, nodes: list[dict[str, Any]], dra: bool) -> None:
        self.state = state
        self.names = [n["metadata"]["name"] for n in nodes]
        self.gpu_names = [n["metadata"]["name"] for n in nodes if fleet.is_gpu_node(n)]
        self.dra = dra
        self.stop = threading.Event()
        self.churning = threading.Event()
        self.claiming = threading.Event()
        self.sent = 0
        self.claim_events = 0
        threading.Thread(target=self._node_churn, daemon=True).start()
        if dra:
            threading.Thread(target=self._claim_churn, daemon=True).start()

    def modify(self, name: str, change: Any) -> None:
        with self.state.cond:
            node = self.state.objects["nodes"][name]
            change(node)
            self.state.put("nodes", node)

    def _node_churn(self) -> None:
        churn = fleet.NodeChurn(self.gpu_names, self.names)
        while not self.stop.is_set():
            self.churning.wait()
            for due, kind, name in churn.schedule(time.monotonic()):
                if self.stop.is_set() or not self.churning.is_set():
                    break
                delay = due - time.monotonic()
                if delay > 0:
                    self.stop.wait(delay)
                epoch = time.time()
                self.modify(name, lambda node, k=kind, e=epoch: fleet.apply_node_event(node, k, e))
                self.sent += 1

    def _claim_churn(self, rate: float = 20.0) -> None:
        claims = fleet.ClaimChurn(self.gpu_names)
        actions: list[tuple[float, int, str, Any]] = []
        serial = 0
        while not self.stop.is_set():
            self.claiming.wait()
            next_create = time.monotonic()
            while self.claiming.is_set() and not self.stop.is_set():
                now = time.monotonic()
                if now >= next_create:
                    claim = claims.create()
                    self.state.put("resourceclaims", claim)
                    serial += 1
                    heapq.heappush(actions, (now + 0.5, serial, "allocate", claim))
                    next_create += 1 / rate
                    self.claim_events += 1
                while actions and actions[0][0] <= now:
                    _, _, what, claim = heapq.heappop(actions)
                    key = f"{claim['metadata']['namespace']}/{claim['metadata']['name']}"
                    if what == "allocate":
                        allocated = claims.allocate(claim)
                        if allocated is not None:
                            self.state.put("resourceclaims", allocated)
                            serial += 1
                            heapq.heappush(actions, (now + claims.lifetime, serial, "delete", allocated))
                    else:
                        claims.release(claim)
                        self.state.delete("resourceclaims", key)
                    self.claim_events += 1
                wake = min(next_create, actions[0][0] if actions else next_create)
                self.stop.wait(max(0.0, wake - time.monotonic()))

    def taint(self, names: list[str], spread: float) -> tuple[float, float]:
        """Add the bench taint to ``names``, evenly over ``spread`` seconds; (first, last) monotonic times."""
        start = time.monotonic()
        first = last = start
        for i, name in enumerate(names):
            due = start + spread * i / max(1, len(names))
            delay = due - time.monotonic()
            if delay > 0:
                self.stop.wait(delay)
            self.modify(name, _add_taint)
            last = time.monotonic()
            if i == 0:
                first = last
        return first, last

    def untaint(self, names: list[str]) -> None:
        for name in names:
            self.modify(name, _remove_taint)


def _add_taint(node: dict[str, Any]) -> None:
    taints = node.setdefault("spec", {}).setdefault("taints", [])
    taints.append({"key": TAINT_KEY, "value": "scheduled", "effect": "NoSchedule"})


def _remove_taint(node: dict[str, Any]) -> None:
    spec = node.setdefault("spec", {})
    spec["taints"] = [t for t in spec.get("taints", []) if t.get("key") != TAINT_KEY]


def api_process(conn: Connection, nodes: int, dra: bool) -> None:
    from tests.support import fake_apiserver as fa

    resources = (*fa.DEFAULT_RESOURCES, *(fa.DRA_RESOURCES if dra else ()))
    state = fa.FakeApiServer(resources)
    state.absent -= set(resources)
    state.history_limit = HISTORY_LIMIT
    objects = fleet.fleet(nodes, dra=dra)
    for node in objects:
        state.put("nodes", node, notify=False)
    for rc in fleet.runtime_classes():
        state.put("runtimeclasses", rc, notify=False)
    if dra:
        state.put("deviceclasses", fleet.device_class(), notify=False)
        for node in objects:
            if fleet.is_gpu_node(node):
                state.put("resourceslices", fleet.resource_slice(node), notify=False)
    with fa.serving(state):
        cluster = Cluster(state, objects, dra)
        conn.send(("port", state.port))
        pools: dict[str, list[str]] = {}
        for node in objects:
            pools.setdefault(node["metadata"]["labels"]["pool"], []).append(node["metadata"]["name"])
        while True:
            command, *args = conn.recv()
            if command == "quit":
                cluster.stop.set()
                cluster.churning.set()
                cluster.claiming.set()
                conn.send(("ok",))
                return
            if command == "churn":
                (cluster.churning.set if args[0] else cluster.churning.clear)()
                reply: tuple[Any, ...] = ("ok", cluster.sent)
            elif command == "claims":
                (cluster.claiming.set if args[0] else cluster.claiming.clear)()
                reply = ("ok", cluster.claim_events)
            elif command == "taint-pool":
                reply = ("ok", *cluster.taint(pools[args[0]], args[1]))
            elif command == "taint-node":
                reply = ("ok", *cluster.taint([args[0]], 0.0))
            elif command == "untaint-pool":
                cluster.untaint(pools[args[0]])
                reply = ("ok",)
            elif command == "untaint-node":
                cluster.untaint([args[0]])
                reply = ("ok",)
            elif command == "counts":
                reply = ("ok", cluster.sent, cluster.claim_events)
            else:
                reply = ("error", command)
            conn.send(reply)


class ApiServer:
    """The child process serving the fleet; ``call`` sends it a command and waits for the reply."""

    def __init__(self, nodes: int, dra: bool) -> None:
        context = multiprocessing.get_context("fork")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=api_process, args=(child, nodes, dra), daemon=True)
        self.process.start()
        reply = self.conn.recv()
        self.port: int = reply[1]

    def call(self, *command: Any) -> tuple[Any, ...]:
        self.conn.send(command)
        reply: tuple[Any, ...] = self.conn.recv()
        if reply[0] != "ok":
            raise RuntimeError(f"api server: {reply}")
        return reply

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call("quit")
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()


# --- the webhook ---------------------------------------------------------------------------------
@dataclass
class Webhook:
    proc: subprocess.Popen[bytes]
    port: int
    health_port: int
    context: ssl.SSLContext

    def pids(self) -> list[int]:
        """The server and its worker processes."""
        out = [self.proc.pid]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError):
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    if int(fields[1]) == self.proc.pid:
                        out.append(int(entry.name))
        return out

    def cpu_seconds(self) -> float:
        total = 0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / os.sysconf("SC_CLK_TCK")

    def rss_mib(self) -> float:
        total = 0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        return total / 1024

    def get(self, path: str) -> bytes:
        conn = http.client.HTTPConnection("127.0.0.1", self.health_port, timeout=10)
        try:
            conn.request("GET", path)
            return conn.getresponse().read()
        finally:
            conn.close()

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for line in self.get("/metrics").decode().splitlines():
            if line.startswith(("gpuguard_cluster_facts", "gpuguard_gc_", "python_gc_collections")) and " " in line:
                name, _, value = line.rpartition(" ")
                with contextlib.suppress(ValueError):
                    out[name] = float(value)
        return out

    def connection(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=30)


def start_webhook(work: Path, api_port: int) -> Webhook:
    from certs.tls import generate_bundle
    from tests.support.kubeconfig import write_kubeconfig

    bundle = generate_bundle("gpuguard", "gpuguard", work / "certs", extra_sans=["localhost", "127.0.0.1"])
    kubeconfig = write_kubeconfig(work / "kubeconfig", f"http://127.0.0.1:{api_port}")
    port, health = _free_port(), _free_port()
    cmd = [sys.executable, "-m", "gpuguard.cli", "serve", "--tls-cert", str(bundle.tls_crt),
           "--tls-key", str(bundle.tls_key), "--host", "127.0.0.1", "--port", str(port),
           "--health-port", str(health), "--kubeconfig", str(kubeconfig)]
    log = (work / "serve.log").open("wb")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
    context = ssl.create_default_context(cafile=str(bundle.ca_crt))
    context.check_hostname = False
    hook = Webhook(proc, port, health, context)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gpuguard serve exited with {proc.returncode}: see {work / 'serve.log'}")
        with contextlib.suppress(OSError, ValueError):
            ready = json.loads(hook.get("/readyz"))
            if ready.get("ready") and ready.get("nodes"):
                return hook
        time.sleep(0.2)
    raise RuntimeError("gpuguard serve did not become ready")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def post(conn: http.client.HTTPSConnection, body: bytes) -> bytes:
    conn.request("POST", "/validate?timeout=10s", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")
    return data


# --- load ----------------------------------------------------------------------------------------
class Load:
    """Reviews due at a steady rate, sent by a pool of keep-alive connections (open loop)."""

    def __init__(self, hook: Webhook, bodies: list[bytes], rate: float, connections: int = 16) -> None:
        self.hook = hook
        self.bodies = bodies
        self.rate = rate
        self.due: queue.Queue[tuple[float, bytes] | None] = queue.Queue()
        self.latencies: list[float] = []
        self.errors = 0
        self.lock = threading.Lock()
        self.recording = False
        self.running = threading.Event()
        self.workers = [threading.Thread(target=self._work, daemon=True) for _ in range(connections)]
        for w in self.workers:
            w.start()
        self.pacer = threading.Thread(target=self._pace, daemon=True)
        self.stopped = threading.Event()
        self.pacer.start()

    def _pace(self) -> None:
        i = 0
        while not self.stopped.is_set():
            self.running.wait()
            start = time.monotonic()
            n = 0
            while self.running.is_set() and not self.stopped.is_set():
                due = start + n / self.rate
                delay = due - time.monotonic()
                if delay > 0:
                    self.stopped.wait(delay)
                self.due.put((due, self.bodies[i % len(self.bodies)]))
                i += 1
                n += 1

    def _work(self) -> None:
        conn = self.hook.connection()
        while True:
            item = self.due.get()
            if item is None:
                return
            due, body = item
            try:
                post(conn, body)
            except Exception:
                with self.lock:
                    self.errors += 1
                conn.close()
                conn = self.hook.connection()
                continue
            done = time.monotonic()
            if self.recording:
                with self.lock:
                    self.latencies.append(done - due)

    @contextlib.contextmanager
    def measuring(self) -> Iterator[list[float]]:
        with self.lock:
            self.latencies = []
        self.recording = True
        try:
            yield self.latencies
        finally:
            self.recording = False

    def close(self) -> None:
        self.running.clear()
        self.stopped.set()
        for _ in self.workers:
            self.due.put(None)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure_load(load: Load, seconds: float) -> dict[str, float]:
    load.running.set()
    time.sleep(2)  # warm-up: connections open, caches of the image tables filled
    with load.measuring() as latencies:
        time.sleep(seconds)
        taken = list(latencies)
    return {"n": len(taken), "p50_ms": percentile(taken, 0.50) * 1e3, "p99_ms": percentile(taken, 0.99) * 1e3,
            "max_ms": max(taken, default=float("nan")) * 1e3}


# --- freshness ------------------------------------------------------------------------------------
def probe_review(node_selector: dict[str, str]) -> bytes:
    review = json.loads(distinct_reviews.BASE_REVIEW.read_text())
    pod = review["request"]["object"]
    pod["metadata"]["name"] = "probe"
    pod["spec"]["nodeSelector"] = node_selector
    pod["spec"]["tolerations"].append({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"})
    return json.dumps(review).encode()


def time_to_verdict(hook: Webhook, body: bytes, started: float, deadline_s: float = 30.0) -> float:
    """Seconds from ``started`` until a review of ``body`` names the bench taint (probing every 20 ms)."""
    conn = hook.connection()
    try:
        while time.monotonic() < started + deadline_s:
            if TAINT_KEY.encode() in post(conn, body):
                return time.monotonic() - started
            time.sleep(0.02)
    finally:
        conn.close()
    return float("inf")


def freshness(api: ApiServer, hook: Webhook) -> dict[str, float]:
    pool_probe = probe_review({"pool": "h100"})
    node_probe = probe_review({"kubernetes.io/hostname": "a100-00007"})
    assert TAINT_KEY.encode() not in post(hook.connection(), pool_probe), "the probe already names the taint"
    result: dict[str, float] = {}
    box: dict[str, float] = {}

    def taint_pool() -> None:
        _, first, last = api.call("taint-pool", "h100", 1.0)
        box["first"], box["last"] = first, last

    started = time.monotonic()
    thread = threading.Thread(target=taint_pool)
    thread.start()
    result["pool_s"] = time_to_verdict(hook, pool_probe, started)
    thread.join()
    result["pool_burst_s"] = box["last"] - box["first"]
    _, first, _ = api.call("taint-node", "a100-00007")
    result["node_s"] = time_to_verdict(hook, node_probe, first)
    api.call("untaint-pool", "h100")
    api.call("untaint-node", "a100-00007")
    return result


# --- the run -------------------------------------------------------------------------------------
def scenario(args: argparse.Namespace, dra: bool, bodies: list[bytes]) -> dict[str, Any]:
    out: dict[str, Any] = {"dra": dra}
    api = ApiServer(args.nodes, dra)
    with tempfile.TemporaryDirectory(prefix="gpuguard-churn-") as tmp:
        hook = start_webhook(Path(tmp), api.port)
        load = Load(hook, bodies, args.rate)
        try:
            out["quiet"] = measure_load(load, args.duration)
            load.running.clear()
            before = hook.metrics()
            api.call("churn", True)
            if dra:
                api.call("claims", True)
            time.sleep(3)  # churn reaches its rate
            cpu0, wall0, sent0 = hook.cpu_seconds(), time.monotonic(), api.call("counts")
            time.sleep(args.duration)
            cpu1, wall1, sent1 = hook.cpu_seconds(), time.monotonic(), api.call("counts")
            out["churn_cpu_cores"] = (cpu1 - cpu0) / (wall1 - wall0)
            out["node_events_per_s"] = (sent1[1] - sent0[1]) / (wall1 - wall0)
            out["claim_events_per_s"] = (sent1[2] - sent0[2]) / (wall1 - wall0)
            out["churn"] = measure_load(load, args.duration)
            out["freshness"] = freshness(api, hook)
            if args.soak:
                rss0 = hook.rss_mib()
                time.sleep(args.soak)
                out["soak"] = {"seconds": args.soak, "rss_start_mib": rss0, "rss_end_mib": hook.rss_mib()}
            load.running.clear()
            after = hook.metrics()
            out["metrics"] = {k: after.get(k, 0.0) - before.get(k, 0.0) if k.endswith("_total") else after[k]
                              for k in after}
            out["errors"] = load.errors
        finally:
            load.close()
            hook.proc.terminate()
            try:
                hook.proc.wait(10)
            except subprocess.TimeoutExpired:
                hook.proc.kill()
            api.close()
    return out


def report(args: argparse.Namespace, results: list[dict[str, Any]]) -> bool:
    ok = True
    print(f"{args.nodes} nodes, {args.rate:.0f} reviews/s (open loop, distinct reviews), {args.duration}s per "
          f"measurement, {os.cpu_count()} CPUs")
    for r in results:
        name = "DRA (ResourceSlices, claim churn)" if r["dra"] else "device plugin"
        q, c, f = r["quiet"], r["churn"], r["freshness"]
        print(f"\n[{name}]  node events {r['node_events_per_s']:.0f}/s, claim events {r['claim_events_per_s']:.0f}/s")
        for label, part in (("quiet", q), ("churn", c)):
            print(f"  {label}:  p50 {part['p50_ms']:.2f} ms  p99 {part['p99_ms']:.2f} ms"
                  f"  max {part['max_ms']:.1f} ms  ({part['n']} reviews)")
        for key, value in sorted(r["metrics"].items()):
            print(f"  {key} {value:g}")
        ratio = c["p99_ms"] / q["p99_ms"]
        checks = [
            (f"p99 churn / quiet = {ratio:.2f} (goal <= 1.5)", ratio <= 1.5),
            (f"CPU on churn alone = {r['churn_cpu_cores']:.3f} cores (goal <= 0.25)", r["churn_cpu_cores"] <= 0.25),
            (f"pool taint ({f['pool_burst_s']:.2f} s burst) seen after {f['pool_s']:.2f} s (goal <= 5)",
             f["pool_s"] <= 5),
            (f"one node's taint seen after {f['node_s']:.2f} s (goal <= 2)", f["node_s"] <= 2),
            (f"review errors = {r['errors']}", r["errors"] == 0),
        ]
        if "soak" in r:
            s = r["soak"]
            checks.append((f"RSS over a {s['seconds']:.0f} s soak: {s['rss_start_mib']:.0f} -> "
                           f"{s['rss_end_mib']:.0f} MiB (goal: flat, <= +10 %)",
                           s["rss_end_mib"] <= s["rss_start_mib"] * 1.10))
        for text, passed in checks:
            print(("  PASS " if passed else "  MISS ") + text)
            ok = ok and passed
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=120.0, help="reviews per second")
    parser.add_argument("--duration", type=int, default=30, help="seconds per measurement")
    parser.add_argument("--dra", action="store_true", help="also run the DRA scenario")
    parser.add_argument("--only-dra", action="store_true", help="run only the DRA scenario")
    parser.add_argument("--soak", type=int, default=0, help="seconds of churn and load to watch RSS over")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    bodies = distinct_reviews.reviews(6000)
    results = []
    if not args.only_dra:
        results.append(scenario(args, False, bodies))
    if args.dra or args.only_dra:
        results.append(scenario(args, True, bodies))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if report(args, results) else 1


if __name__ == "__main__":
    sys.exit(main())

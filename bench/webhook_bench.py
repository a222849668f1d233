"""Throughput and latency of ``POST /validate`` over TLS, against a bare ASGI app on the same stack.

Runs seven servers in turn, each a subprocess with the same uvicorn/TLS settings as
``gpuguard serve`` (one worker, a certificate from ``certs.tls``), and drives each with ``wrk``
(keep-alive, N concurrent connections) POSTing 6,000 distinct, realistic AdmissionReviews in turn
(bench/distinct_reviews.py: more than any memo holds, so every review is evaluated afresh):

1. a bare ASGI app that reads each body and answers a fixed small JSON body;
2. gpuguard with the 7-node example cluster (examples/cluster.yaml);
3. gpuguard with a generated 5,000-node heterogeneous cluster snapshot;
4. gpuguard with one review repeated (memo hits; informational);
5. gpuguard with replicas: 6,000 distinct pods, ten in a row from each of 600 templates, with the
   per-pod names, token volumes, hostnames and RANKs a controller and the API server give them
   (bench/distinct_reviews.py ``replica_reviews``; informational);
6. gpuguard's webhook layer with an engine that finds nothing (informational);
7. gpuguard with one small pod whose container is renamed in every request: the "distinct pods"
   stream of the 0.1.0 benchmark, kept so that figures can be compared with that release
   (informational).

Goals: gpuguard ≥ 0.40× the bare app's requests/s and p99 ≤ 10 ms at 16 connections; p99 with
5,000 heterogeneous nodes within 1.5× of the 7-node cluster.  Needs ``wrk`` (Debian: ``apt-get
install wrk``).

``--registry`` measures registry lookups instead: the same review with its image on a local
registry (a minimal plain-HTTP server in this process), served by gpuguard with lookups off and
with lookups on; wrk's warm-up fills the in-memory image cache, so the measured run is the warm
path.  Goal: p99 with lookups on within 1.1× of lookups off.

    .venv/bin/python bench/webhook_bench.py [--connections 16] [--duration 10] [--registry]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import distinct_reviews  # noqa: E402

REVIEW = ROOT / "tests" / "fixtures" / "admission" / "pod-gpu-with-limit.json"
EXAMPLE_CLUSTER = ROOT / "examples" / "cluster.yaml"
BARE_BODY = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"x","allowed":true}}'

WRK_LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open("{body}", "rb"))
wrk.body = f:read("*a")
f:close()
"""

# Cycles through distinct reviews, one per line of {bodies} (bench/distinct_reviews.py): more
# reviews than any memo holds, so every evaluation is a real one.
WRK_LUA_DISTINCT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local bodies = {}
for line in io.lines("{bodies}") do
  if #line > 0 then bodies[#bodies + 1] = line end
end
local n = 0
request = function()
  n = n % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[n])
end
"""

# The first release's "distinct pods" stream: the fixture review, its container renamed per request.
WRK_LUA_RENAMED = WRK_LUA + """
local n = 0
request = function()
  n = n + 1
  local body = string.gsub(wrk.body, '"name": *"train"', '"name":"train-' .. n .. '"', 1)
  return wrk.format(nil, nil, nil, body)
end
"""


async def bare_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The baseline: read the body, answer a fixed small JSON."""
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(BARE_BODY)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": BARE_BODY})


def serve_bare(cert: str, key: str, port: int) -> int:
    from policies.config import Config
    from webhook.app import StaticFacts
    from webhook.server import ServeOptions, bind, run_app

    options = ServeOptions(
        config=Config(), facts_factory=StaticFacts, tls_cert=Path(cert), tls_key=Path(key), host="127.0.0.1", port=port
    )
    return 0 if run_app(bare_app, options, bind("127.0.0.1", port)) else 1


def serve_stub_engine(cert: str, key: str, port: int) -> int:
    """gpuguard's app with the engine replaced by one that finds nothing: the webhook layer's cost."""
    from policies.config import Config
    from policies.engine import Evaluation
    from webhook.app import StaticFacts, create_app
    from webhook.server import ServeOptions, bind, run_app

    app = create_app(Config(), StaticFacts(), evaluator=lambda obj, config, facts: Evaluation(obj, config, facts))
    options = ServeOptions(
        config=Config(), facts_factory=StaticFacts, tls_cert=Path(cert), tls_key=Path(key), host="127.0.0.1", port=port
    )
    return 0 if run_app(app, options, bind("127.0.0.1", port)) else 1


def engine_microseconds(cluster: Path, bodies: list[bytes] | None = None) -> float:
    """In-process cost of one evaluate(): of the fixed review, or of each of ``bodies`` once."""
    import orjson

    from gpuguard.sources.snapshot import load_cluster_facts
    from policies.config import Config
    from policies.engine import evaluate

    facts, config = load_cluster_facts(str(cluster)), Config()
    if bodies is None:
        obj = orjson.loads(REVIEW.read_bytes())["request"]["object"]
        objects = [obj] * 500
    else:
        objects = [orjson.loads(body)["request"]["object"] for body in bodies]
    evaluate(objects[0], config, facts)
    start = time.perf_counter()
    for item in objects:
        evaluate(item, config, facts)
    return (time.perf_counter() - start) / len(objects) * 1e6


def generate_snapshot(path: Path, nodes: int) -> None:
    """``nodes`` GPU nodes cloned from the example cluster's node pools, as a JSON List.

    Heterogeneous as real fleets are: allocatable memory and ephemeral storage differ by a few KiB
    from node to node, every node carries its own instance id and serial, three zones."""
    import yaml

    with EXAMPLE_CLUSTER.open() as fh:
        example = [d for d in yaml.safe_load_all(fh) if d]
    items = [i for doc in example for i in (doc.get("items") or [doc])]
    templates = [i for i in items if i.get("kind") == "Node"]
    classes = [i for i in items if i.get("kind") == "RuntimeClass"]
    zones = ("us-east-1a", "us-east-1b", "us-east-1c")
    out = []
    for n in range(nodes):
        node = json.loads(json.dumps(templates[n % len(templates)]))
        name = f"node-{n:05d}"
        meta = node["metadata"]
        meta["name"] = name
        meta["uid"] = f"00000000-0000-4000-8000-{n:012d}"
        labels = meta.setdefault("labels", {})
        labels["kubernetes.io/hostname"] = name
        labels["topology.kubernetes.io/zone"] = zones[n % len(zones)]
        labels["node.example.com/instance-id"] = f"i-{n * 7919:017x}"
        labels["nvidia.com/gpu.serial"] = f"{1320000000000 + n * 31}"
        status = node.setdefault("status", {})
        for which in ("allocatable", "capacity"):
            amounts = status.setdefault(which, {})
            amounts["memory"] = f"{2_000_000_000 - (n * 7919) % 65_536}Ki"
            amounts["ephemeral-storage"] = str(1_887_436_798_102 - (n * 104_729) % 4_194_304)
        out.append(node)
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": out + classes}))


def serve_local_image() -> tuple[str, Any]:
    """A plain-HTTP registry serving one image with CUDA_VERSION in its config; (host, server)."""
    import hashlib
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Env": ["CUDA_VERSION=12.4.1"]}}).encode()
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                   "size": len(config)},
        "layers": [],
    }).encode()
    routes = {
        "/v2/bench/cuda/manifests/12.4": (manifest, "application/vnd.oci.image.manifest.v1+json"),
        f"/v2/bench/cuda/blobs/{config_digest}": (config, "application/vnd.oci.image.config.v1+json"),
    }

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body, media_type = routes.get(self.path, (b"{}", "application/json"))
            self.send_response(200 if self.path in routes else 404)
            self.send_header("Content-Type", media_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"127.0.0.1:{server.server_address[1]}", server


def registry_runs(serve: list[str], work: Path, connections: int, duration: int) -> int:
    host, server = serve_local_image()
    try:
        review = json.loads(REVIEW.read_text())
        review["request"]["object"]["spec"]["containers"][0]["image"] = f"{host}/bench/cuda:12.4"
        body = work / "review-local-image.json"
        body.write_text(json.dumps(review))
        lua = work / "post-local.lua"
        lua.write_text(WRK_LUA.replace("{body}", str(body)))
        runs = {}
        for label, enabled in (("lookups off", "false"), ("lookups on, warm", "true")):
            config = work / f"registry-{enabled}.yaml"
            config.write_text(f"registry: {{enabled: {enabled}, insecure: ['{host}']}}\n")
            port = free_port()
            cmd = [*serve, "--port", str(port), "--cluster", str(EXAMPLE_CLUSTER), "--config", str(config)]
            runs[label] = measure(cmd, port, lua, connections, duration)
    finally:
        server.shutdown()
    print(f"POST /validate over TLS, {connections} keep-alive connections, {duration}s each, image on a local registry")
    print(f"{'server':<26}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'non-2xx':>10}")
    for label, r in runs.items():
        print(f"{label:<26}{r['rps']:>10.0f}{r['p50_ms']:>10.2f}{r['p99_ms']:>10.2f}{r['non_2xx']:>10.0f}")
    off, on = runs["lookups off"], runs["lookups on, warm"]
    growth = on["p99_ms"] / off["p99_ms"]
    ok = growth <= 1.1 and all(r["non_2xx"] == 0 for r in runs.values())
    print(("PASS " if ok else "MISS ") + f"p99 lookups on (warm) / off = {growth:.2f} (goal <= 1.1)")
    return 0 if ok else 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_healthy(port: int, proc: subprocess.Popen[bytes], deadline_s: float = 60.0) -> None:
    import ssl
    import urllib.request

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=ctx, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not become healthy")


def _seconds(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[unit]


def run_wrk(port: int, lua: Path, connections: int, duration: int) -> dict[str, float]:
    url = f"https://127.0.0.1:{port}/validate?timeout=10s"
    base = ["wrk", "-t1", f"-c{connections}", "-s", str(lua), "--latency"]
    subprocess.run([*base, "-d2s", url], check=True, capture_output=True)  # warm-up
    out = subprocess.run([*base, f"-d{duration}s", url], check=True, capture_output=True, text=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _seconds(re.search(r"\s50%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    p99 = _seconds(re.search(r"\s99%\s+(\S+)", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {
        "rps": rps,
        "p50_ms": p50 * 1000,
        "p99_ms": p99 * 1000,
        "non_2xx": float(bad.group(1)) if bad else 0.0,
        "socket_errors": 1.0 if errors else 0.0,
    }


def measure(cmd: list[str], port: int, lua: Path, connections: int, duration: int) -> dict[str, float]:
    # The server's log (a line per denial) goes to a file, as a container runtime would take it: a
    # pipe nobody reads would fill and stall the server.
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
        try:
            wait_healthy(port, proc)
            return run_wrk(port, lua, connections, duration)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--duration", type=int, default=10, help="seconds per measurement")
    parser.add_argument("--nodes", type=int, default=5000, help="nodes in the large generated cluster")
    parser.add_argument("--reviews", type=int, default=6000, help="distinct reviews sent in turn")
    parser.add_argument("--registry", action="store_true", help="measure registry lookups (warm cache) instead")
    parser.add_argument("--serve-bare", nargs=3, metavar=("CERT", "KEY", "PORT"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-stub-engine", nargs=3, metavar=("CERT", "KEY", "PORT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_bare:
        cert, key, port = args.serve_bare
        return serve_bare(cert, key, int(port))
    if args.serve_stub_engine:
        cert, key, port = args.serve_stub_engine
        return serve_stub_engine(cert, key, int(port))
    if shutil.which("wrk") is None:
        print("wrk not found (Debian: apt-get install wrk)", file=sys.stderr)
        return 2

    from certs.tls import generate_bundle

    with tempfile.TemporaryDirectory(prefix="gpuguard-bench-") as tmp:
        work = Path(tmp)
        bundle = generate_bundle("gpuguard", "gpuguard", work / "certs", extra_sans=["localhost", "127.0.0.1"])
        lua = work / "post.lua"
        lua.write_text(WRK_LUA.replace("{body}", str(REVIEW)))
        bodies = distinct_reviews.reviews(args.reviews)
        jsonl = work / "reviews.jsonl"
        jsonl.write_bytes(b"\n".join(bodies) + b"\n")
        lua_distinct = work / "post-distinct.lua"
        lua_distinct.write_text(WRK_LUA_DISTINCT.replace("{bodies}", str(jsonl)))
        replica_bodies = distinct_reviews.replica_reviews(args.reviews)
        replicas_jsonl = work / "replicas.jsonl"
        replicas_jsonl.write_bytes(b"\n".join(replica_bodies) + b"\n")
        lua_replicas = work / "post-replicas.lua"
        lua_replicas.write_text(WRK_LUA_DISTINCT.replace("{bodies}", str(replicas_jsonl)))
        lua_renamed = work / "post-renamed.lua"
        lua_renamed.write_text(WRK_LUA_RENAMED.replace("{body}", str(REVIEW)))
        big = work / f"cluster-{args.nodes}.json"
        generate_snapshot(big, args.nodes)
        tls = ["--tls-cert", str(bundle.tls_crt), "--tls-key", str(bundle.tls_key), "--host", "127.0.0.1"]
        serve = [sys.executable, "-m", "gpuguard.cli", "serve", *tls]
        if args.registry:
            return registry_runs(serve, work, args.connections, args.duration)
        runs: dict[str, dict[str, float]] = {}
        pair = [str(bundle.tls_crt), str(bundle.tls_key)]
        port = free_port()
        bare_cmd = [sys.executable, __file__, "--serve-bare", *pair, str(port)]
        runs["bare ASGI app"] = measure(bare_cmd, port, lua_distinct, args.connections, args.duration)
        for label, cluster in (("gpuguard, 7 nodes", EXAMPLE_CLUSTER), (f"gpuguard, {args.nodes} nodes", big)):
            port = free_port()
            cmd = [*serve, "--port", str(port), "--cluster", str(cluster)]
            runs[label] = measure(cmd, port, lua_distinct, args.connections, args.duration)
        port = free_port()
        cmd = [*serve, "--port", str(port), "--cluster", str(EXAMPLE_CLUSTER)]
        runs["gpuguard, one template"] = measure(cmd, port, lua, args.connections, args.duration)
        port = free_port()
        cmd = [*serve, "--port", str(port), "--cluster", str(EXAMPLE_CLUSTER)]
        runs["gpuguard, replicas"] = measure(cmd, port, lua_replicas, args.connections, args.duration)
        port = free_port()
        stub_cmd = [sys.executable, __file__, "--serve-stub-engine", *pair, str(port)]
        runs["gpuguard, engine stubbed"] = measure(stub_cmd, port, lua_distinct, args.connections, args.duration)
        port = free_port()
        cmd = [*serve, "--port", str(port), "--cluster", str(EXAMPLE_CLUSTER)]
        runs["gpuguard, renamed pod"] = measure(cmd, port, lua_renamed, args.connections, args.duration)
        engine_small = engine_microseconds(EXAMPLE_CLUSTER, bodies)
        engine_large = engine_microseconds(big, bodies)
        engine_repeat = engine_microseconds(EXAMPLE_CLUSTER)
        engine_replicas = engine_microseconds(EXAMPLE_CLUSTER, replica_bodies)

    print(f"POST /validate over TLS, {args.connections} keep-alive connections, {args.duration}s each, "
          f"{args.reviews} distinct reviews in turn, {os.cpu_count()} CPUs")
    print(f"{'server':<26}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'non-2xx':>10}")
    for label, r in runs.items():
        print(f"{label:<26}{r['rps']:>10.0f}{r['p50_ms']:>10.2f}{r['p99_ms']:>10.2f}{r['non_2xx']:>10.0f}")
    bare, small, large, repeat, replicas, stub, renamed = (runs[k] for k in list(runs))
    print(f"engine alone (in-process evaluate, each distinct review once): {engine_small:.0f} us with 7 nodes, "
          f"{engine_large:.0f} us with {args.nodes} nodes; {engine_repeat:.0f} us for one template repeated; "
          f"{engine_replicas:.0f} us for replicas")
    print(f"one repeated template (memo hits) / bare = {repeat['rps'] / bare['rps']:.2f}, "
          f"p99 {repeat['p99_ms']:.2f} ms")
    print(f"replicas (10 distinct pods per template, in a row) / bare = {replicas['rps'] / bare['rps']:.2f}, "
          f"p99 {replicas['p99_ms']:.2f} ms")
    print(f"webhook layer alone (engine stubbed) / bare = {stub['rps'] / bare['rps']:.2f}")
    print(f"one small pod renamed per request (0.1.0's distinct-pods stream) / bare = "
          f"{renamed['rps'] / bare['rps']:.2f}, p99 {renamed['p99_ms']:.2f} ms")
    ratio = small["rps"] / bare["rps"]
    growth = large["p99_ms"] / small["p99_ms"]
    checks = [
        (f"throughput gpuguard/bare on distinct reviews = {ratio:.2f} (goal >= 0.40)", ratio >= 0.40),
        (f"p99 at {args.connections} connections = {small['p99_ms']:.2f} ms (goal <= 10 ms)", small["p99_ms"] <= 10),
        (f"p99 {args.nodes} heterogeneous nodes / 7 nodes = {growth:.2f} (goal <= 1.5)", growth <= 1.5),
        ("all responses 2xx", all(r["non_2xx"] == 0 for r in runs.values())),
    ]
    for text, ok in checks:
        print(("PASS " if ok else "MISS ") + text)
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Running the webhook: one uvicorn server per worker process, each with its own TLS watcher.

The listening socket is bound once in the parent.  With ``workers > 1`` the parent forks that
many children which share the socket (the kernel spreads connections) and waits; SIGTERM/SIGINT
are forwarded, and if one child dies the rest are stopped and the exit code is non-zero so that
Kubernetes restarts the container.  Every worker builds its own facts source after the fork
(threads do not survive ``fork``), its own SSLContext and certificate watcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, cast

import uvicorn

from policies.config import Config
from policies.wording import plural
from webhook.app import DEFAULT_MAX_BODY_BYTES, FactsProvider, StaticFacts, create_app, create_health_app
from webhook.configsource import ConfigSource, ReloadingConfig, StaticConfig
from webhook.lanes import LaneLimits
from webhook.metrics import Metrics
from webhook.protocol import ConnectionLimits, guarded_protocol, tls_accepting
from webhook.tlsreload import CertificateReloader, server_context

log = logging.getLogger("gpuguard.serve")


@dataclass(frozen=True)
class ServeOptions:
    config: Config
    facts_factory: Callable[[], FactsProvider]
    tls_cert: Path
    tls_key: Path
    client_ca: Path | None = None
    host: str = "0.0.0.0"
    port: int = 8443
    workers: int = 1
    tls_reload_interval: float = 10.0
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    keep_alive_seconds: int = 75  # longer than a client's idle pool timeout (Go's is 90 s)
    config_path: Path | None = None  # watched for changes when set
    config_reload_interval: float = 5.0  # a valid edit applies within this (plus the kubelet's sync)
    health_port: int | None = None  # plain-HTTP /healthz, /readyz and /metrics
    health_host: str | None = None  # default: the webhook's host
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    lanes: LaneLimits = field(default_factory=LaneLimits)
    audit_interval: float | None = None  # seconds between periodic audits (the first worker runs them)
    audit_reports: str = "policyreport"


class _Quiet(uvicorn.Server):
    """The health server, on its own thread and event loop: it answers probes and scrapes even
    while the webhook's loop is busy evaluating; the webhook's server owns signals and shutdown."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def run_app(
    app: Any,
    options: ServeOptions,
    sock: socket.socket,
    metrics: Metrics | None = None,
    health: tuple[Any, socket.socket] | None = None,
    config: ReloadingConfig | None = None,
) -> bool:
    """Serve ``app`` over TLS on ``sock`` until SIGTERM/SIGINT; False if it never started.

    ``health``: an app and its socket served over plain HTTP alongside; ``config``: a config file
    source to check for changes every ``options.config_reload_interval`` seconds."""
    context = server_context(options.tls_cert, options.tls_key, options.client_ca)
    on_reload = metrics.count_cert_reload if metrics is not None else None
    reloader = CertificateReloader(context, options.tls_cert, options.tls_key, on_reload)
    on_reject = metrics.count_rejected if metrics is not None else None
    # TLS is terminated by tls_accepting, not by uvicorn's ssl: the connection cap and the
    # handshake deadline must hold before the handshake (webhook.protocol).
    uconfig = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_keep_alive=options.keep_alive_seconds,
        server_header=False,
        http=cast(Any, tls_accepting(context, options.limits, on_reject)),
    )
    server = uvicorn.Server(uconfig)
    health_server: uvicorn.Server | None = None
    if health is not None:
        health_config = uvicorn.Config(
            health[0],
            log_config=None,
            access_log=False,
            lifespan="off",
            server_header=False,
            timeout_keep_alive=5,
            http=guarded_protocol(options.limits, on_reject),
        )
        health_server = _Quiet(health_config)

    async def main() -> None:
        watchers = [asyncio.create_task(reloader.run(options.tls_reload_interval))]
        if config is not None:
            watchers.append(asyncio.create_task(config.run(options.config_reload_interval)))
        try:
            await server.serve(sockets=[sock])
        finally:
            for watcher in watchers:
                watcher.cancel()
            for task in watchers:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    health_thread = None
    if health_server is not None and health is not None:
        health_thread = threading.Thread(
            target=asyncio.run, args=(health_server.serve(sockets=[health[1]]),), name="gpuguard-health", daemon=True
        )
        health_thread.start()
    try:
        with asyncio.Runner(loop_factory=uconfig.get_loop_factory()) as runner:
            runner.run(main())
    finally:
        if health_server is not None and health_thread is not None:
            health_server.should_exit = True
            health_thread.join(timeout=10)
    return bool(server.started)


def run_worker(
    options: ServeOptions, sock: socket.socket, health_sock: socket.socket | None = None, index: int = 0
) -> int:
    # What exists now (the modules) lives as long as the server: kept out of the collector's view, a
    # full collection no longer walks it and stalls every connection for tens of milliseconds.
    gc.freeze()
    facts = options.facts_factory()
    if isinstance(facts, StaticFacts):
        # A snapshot is never replaced, so it may be frozen too.  Live facts are not: a replaced
        # snapshot holds reference cycles (its memo), and frozen cycles are never collected.
        gc.freeze()
    metrics = Metrics()
    reloading: ReloadingConfig | None = None
    source: ConfigSource = StaticConfig(options.config)
    if options.config_path is not None:
        reloading = ReloadingConfig(options.config_path, options.config)
        reloading.on_result = lambda result: metrics.count_config_reload(
            result, reloading.loaded_at if reloading is not None and result == "ok" else None
        )
        metrics.config_loaded_at = reloading.loaded_at
        source = reloading
    app = create_app(source, facts, metrics=metrics, max_body_bytes=options.max_body_bytes, lanes=options.lanes)
    health = (create_health_app(facts, metrics), health_sock) if health_sock is not None else None
    audit = _periodic_audit(options, facts, source) if index == 0 else None
    try:
        started = run_app(app, options, sock, metrics, health=health, config=reloading)
    finally:
        if audit is not None:
            audit.stop()
        stop = getattr(facts, "stop", None)
        if callable(stop):
            stop()
    return 0 if started else 1


def _periodic_audit(options: ServeOptions, facts: FactsProvider, config: ConfigSource) -> Any:
    """The background audit of ``--audit-interval``, on the live facts' API client (worker 0 only)."""
    if options.audit_interval is None or not hasattr(facts, "api_client"):
        return None
    from gpuguard.audit.policyreport import Flavour
    from webhook.periodic_audit import PeriodicAudit

    live: Any = facts
    flavour: Flavour = "openreports" if options.audit_reports == "openreports" else "policyreport"
    return PeriodicAudit(options.audit_interval, facts, config, lambda: live.api_client, flavour).start()


def serve(options: ServeOptions) -> int:
    sock = bind(options.host, options.port)
    health_sock = None
    if options.health_port is not None:
        health_host = options.health_host or options.host
        health_sock = bind(health_host, options.health_port)
        log.info("health, readiness and metrics on http://%s:%d", health_host, options.health_port)
    log.info("listening on https://%s:%d with %s", options.host, options.port, plural(options.workers, "worker"))
    if options.workers <= 1:
        return run_worker(options, sock, health_sock)
    children: list[int] = []
    for index in range(options.workers):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = run_worker(options, sock, health_sock, index)
            except BaseException:
                log.exception("worker failed")
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        children.append(pid)
    return _supervise(children)


def _supervise(children: list[int]) -> int:
    stopping = False

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    code = 0
    alive = set(children)
    while alive:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        alive.discard(pid)
        exit_code = os.waitstatus_to_exitcode(status)
        if not stopping:
            log.error("worker %d exited with %d; stopping the others", pid, exit_code)
            code = 1
            forward(signal.SIGTERM, None)
        elif exit_code not in (0, -signal.SIGTERM, -signal.SIGINT):
            # uvicorn re-raises the signal it shut down on, so a clean stop may end "by signal".
            code = code or exit_code
    return code

"""``gpuguard serve``: the validating/mutating admission webhook over TLS."""

from __future__ import annotations

import argparse
import sys
from typing import Any

DEFAULT_PORT = 8443


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tls-cert", required=True, metavar="FILE", help="serving certificate (PEM, chain allowed)")
    parser.add_argument("--tls-key", required=True, metavar="FILE", help="private key of the serving certificate")
    parser.add_argument(
        "--client-ca", metavar="FILE", help="require client certificates signed by this CA (mutual TLS)"
    )
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default: 0.0.0.0)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})")
    parser.add_argument(
        "--health-port",
        type=int,
        metavar="PORT",
        help="also serve /healthz, /readyz and /metrics over plain HTTP on this port (for kubelet probes and "
        "scraping, so that --client-ca can protect the webhook port alone)",
    )
    parser.add_argument(
        "--max-connections",
        type=int,
        default=1024,
        metavar="N",
        help="close new connections beyond N open ones per worker (default: 1024)",
    )
    parser.add_argument(
        "--max-connections-per-source",
        type=int,
        default=256,
        metavar="N",
        help="refuse a client address more than N open connections; at --max-connections a new connection "
        "evicts one that serves no request, from the address holding the most (default: 256)",
    )
    parser.add_argument(
        "--handshake-timeout",
        type=float,
        default=3.0,
        metavar="SECONDS",
        help="close a connection whose TLS handshake takes longer, counted from the TCP connect (default: 3)",
    )
    parser.add_argument(
        "--review-deadline",
        type=float,
        default=4.0,
        metavar="SECONDS",
        help="answer every review within this many seconds of its arrival, per failureMode if it is not judged "
        "by then; keep it below the webhooks' timeoutSeconds (default: 4)",
    )
    parser.add_argument(
        "--request-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="close a connection whose request head (or, separately, body) takes longer (default: 10)",
    )
    parser.add_argument(
        "--config-reload-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how often to check --config for changes; a valid edit applies, an invalid one is logged and "
        "the last good config stays (default: 5)",
    )
    parser.add_argument(
        "--config", metavar="FILE", help="gpuguard policy config (YAML); without it the rule defaults apply"
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--cluster", metavar="FILE", help="cluster facts from a snapshot (`kubectl get nodes,runtimeclasses -o yaml`)"
    )
    source.add_argument(
        "--in-cluster", action="store_true",
        help="watch Nodes, RuntimeClasses, NodePools and DRA objects with the pod's service account"
    )
    source.add_argument(
        "--kubeconfig", metavar="FILE",
        help="watch Nodes, RuntimeClasses, NodePools and DRA objects using this kubeconfig",
    )
    parser.add_argument("--workers", type=int, default=1, help="worker processes sharing the port (default: 1)")
    parser.add_argument(
        "--tls-reload-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often to check the certificate files for rotation (default: 10)",
    )
    parser.add_argument(
        "--audit-interval",
        metavar="DURATION",
        help="also audit the cluster every DURATION (e.g. 1h) and publish PolicyReports per namespace; needs "
        "--in-cluster or --kubeconfig and the RBAC of deploy/audit (default: off)",
    )
    parser.add_argument(
        "--audit-reports",
        choices=("policyreport", "openreports"),
        default="policyreport",
        help="the report API of --audit-interval: wgpolicyk8s.io/v1alpha2 PolicyReports or openreports.io/v1alpha1 "
        "Reports (default: policyreport)",
    )
    parser.add_argument(
        "--log-level", default="info", choices=("debug", "info", "warning", "error"), help="(default: info)"
    )


def _source_line(args: argparse.Namespace) -> str:
    if args.cluster:
        return f"cluster facts from snapshot {args.cluster}"
    if args.in_cluster:
        return "cluster facts from the API server (in-cluster service account), watched live"
    if args.kubeconfig:
        return f"cluster facts from the API server (kubeconfig {args.kubeconfig}), watched live"
    return (
        "no cluster source (--cluster, --in-cluster or --kubeconfig): running without cluster facts; "
        "rules that need them are skipped"
    )


def run(args: argparse.Namespace) -> int:
    import logging
    from pathlib import Path

    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    log = logging.getLogger("gpuguard.serve")
    log.info("gpuguard webhook starting: %s", _source_line(args))

    from gpuguard.sources.configfile import load_config_file
    from gpuguard.sources.snapshot import load_cluster_facts
    from gpuguard.sources.yamlsafe import InputError
    from policies.config import Config
    from webhook.app import FactsProvider, StaticFacts
    from webhook.heap import HeapKeeper
    from webhook.lanes import LaneLimits
    from webhook.protocol import ConnectionLimits
    from webhook.server import ServeOptions, serve
    from webhook.tlsreload import CertificateError, check_pair, read_pair

    if args.workers < 1:
        log.error("--workers must be at least 1")
        return 2
    if args.health_port is not None and args.health_port == args.port:
        log.error("--health-port must differ from --port")
        return 2
    if min(args.max_connections, args.max_connections_per_source) < 1 or min(
        args.request_timeout, args.handshake_timeout, args.review_deadline
    ) <= 0:
        log.error(
            "--max-connections, --max-connections-per-source, --request-timeout, --handshake-timeout and "
            "--review-deadline must be positive"
        )
        return 2
    if args.config_reload_interval <= 0:
        log.error("--config-reload-interval must be positive")
        return 2
    audit_interval = None
    if args.audit_interval is not None:
        from webhook.periodic_audit import parse_interval

        try:
            audit_interval = parse_interval(args.audit_interval)
        except ValueError as exc:
            log.error("--audit-interval: %s", exc)
            return 2
        if not (args.in_cluster or args.kubeconfig):
            log.error("--audit-interval lists the cluster's workloads: it needs --in-cluster or --kubeconfig")
            return 2
    try:
        config = load_config_file(args.config)[0] if args.config else Config()
        snapshot = load_cluster_facts(args.cluster) if args.cluster else None
        check_pair(read_pair(Path(args.tls_cert), Path(args.tls_key)))
    except InputError as exc:
        log.error("%s", exc)
        return 2
    except CertificateError as exc:
        log.error("%s", exc)
        return 2
    if config.registry.enabled:
        from gpuguard.registry.client import RegistryError, tls_context

        try:  # a bad registry CA is a startup error, not a failure on every lookup
            tls_context(Path(config.registry.ca) if config.registry.ca else None)
        except RegistryError as exc:
            log.error("%s", exc)
            return 2
        log.info(
            "registry lookups on: a review waits at most %.0f ms for them", config.registry.review_budget * 1000
        )
    if snapshot is not None:
        log.info("loaded %d nodes and %d RuntimeClasses", len(snapshot.nodes), len(snapshot.runtime_classes))
    live: Any = None
    # Full garbage collections would walk every object of the facts with the GIL held (webhook.heap).
    heap = HeapKeeper()
    if args.in_cluster or args.kubeconfig:
        from webhook.live_facts import from_kubeconfig

        try:  # load the credentials now so that a missing kubeconfig fails before serving
            live = from_kubeconfig(args.kubeconfig, args.in_cluster, on_update=heap.settle)
        except Exception as exc:
            log.error("cannot load Kubernetes credentials: %s", exc)
            return 2

    def facts_factory() -> FactsProvider:
        # Called in each worker process: the watch threads start after the fork.
        if live is not None:
            provider: FactsProvider = live.start()
            return provider
        static = StaticFacts(snapshot)
        heap.settle()
        return static

    options = ServeOptions(
        config=config,
        facts_factory=facts_factory,
        tls_cert=Path(args.tls_cert),
        tls_key=Path(args.tls_key),
        client_ca=Path(args.client_ca) if args.client_ca else None,
        host=args.host,
        port=args.port,
        workers=args.workers,
        tls_reload_interval=args.tls_reload_interval,
        config_path=Path(args.config) if args.config else None,
        config_reload_interval=args.config_reload_interval,
        health_port=args.health_port,
        limits=ConnectionLimits(
            head_timeout=args.request_timeout,
            body_timeout=args.request_timeout,
            max_connections=args.max_connections,
            max_connections_per_source=args.max_connections_per_source,
            handshake_timeout=args.handshake_timeout,
        ),
        lanes=LaneLimits(deadline=args.review_deadline),
        audit_interval=audit_interval,
        audit_reports=args.audit_reports,
    )
    # Building the CEL grammar takes seconds; do it once before forking workers, not in the first
    # review of a DRA claim (policies.dra.cel).
    from policies.dra.cel import compile_selector

    compile_selector("device.driver == 'gpuguard.io'")
    try:
        return serve(options)
    except OSError as exc:
        log.error("cannot serve on %s:%d: %s", args.host, args.port, exc)
        return 1


if __name__ == "__main__":  # `python -m webhook.cmd_serve ...` runs the server without the other subcommands
    _parser = argparse.ArgumentParser(prog="gpuguard serve")
    add_arguments(_parser)
    sys.exit(run(_parser.parse_args()))

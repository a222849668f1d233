"""``gpuguard audit [PATH…|-] [--kubeconfig FILE | --in-cluster]``: judge objects that already exist.

Exit codes: without ``--cluster-after`` as for ``gpuguard lint`` (0 nothing at or above
``--fail-on``, 1 findings at or above it, 2 an input could not be read, a kind could not be
listed, or bad usage); with ``--cluster-after``, 1 only when the change introduces findings at or
above ``--fail-on``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from gpuguard.audit.model import AuditResult
    from gpuguard.audit.pools import PoolInputs
    from policies.config import Config
    from policies.facts import ClusterFacts

FORMATS = ("text", "json", "sarif", "policyreport", "openreports", "html")
LEVELS = ("error", "warning", "info")
EXIT_USAGE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="dumps (`kubectl get deploy,rs,sts,ds,jobs,cronjobs,pods,<CRDs> -A -o yaml` or -o json): files, "
        "directories or - for stdin",
    )
    live = parser.add_mutually_exclusive_group()
    live.add_argument("--kubeconfig", metavar="FILE", help="audit the live cluster of this kubeconfig (read-only)")
    live.add_argument("--in-cluster", action="store_true", help="audit the live cluster with the pod's service account")
    parser.add_argument(
        "--cluster",
        metavar="FILE",
        help="cluster facts (`kubectl get nodes,runtimeclasses -o yaml`, or `sample`); default for a live "
        "cluster: the cluster itself",
    )
    parser.add_argument(
        "--cluster-after",
        metavar="FILE",
        help="the planned cluster (a snapshot after the change): findings are marked introduced, resolved or "
        "unchanged",
    )
    parser.add_argument("--config", metavar="FILE", help="gpuguard config (default: .gpuguard.yaml upward from cwd)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument("--output", metavar="FILE", help="write the report to FILE instead of stdout")
    parser.add_argument(
        "--fail-on",
        choices=LEVELS,
        default="error",
        help="exit 1 when a finding (with --cluster-after: an introduced finding) has this severity or higher "
        "(default: error)",
    )
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        help="Prometheus with DCGM exporter metrics: the GPU pool summary adds GPUs held by idle pods",
    )
    parser.add_argument("--idle-window", default="1h", metavar="DURATION",
                        help="how long a pod's GPUs must have stayed idle (Prometheus duration; default: 1h)")
    from gpuguard.terminal import add_output_arguments

    add_output_arguments(parser)


def _fail(message: str) -> int:
    sys.stderr.write(f"gpuguard audit: {message}\n")
    return EXIT_USAGE


def _usage_problem(args: argparse.Namespace) -> str | None:
    live = bool(args.kubeconfig or args.in_cluster)
    if live and args.paths:
        return "give dumps or a live cluster (--kubeconfig/--in-cluster), not both"
    if not live and not args.paths:
        return "nothing to audit: give dump files (or - for stdin), or --kubeconfig FILE / --in-cluster"
    if args.cluster_after and not (args.cluster or live):
        return "--cluster-after needs the current facts too: --cluster FILE, or a live cluster"
    if args.prometheus:
        from gpuguard.prometheus import parse_window

        try:
            parse_window(args.idle_window)
        except ValueError as exc:
            return f"--idle-window: {exc}"
        if not args.prometheus.startswith(("http://", "https://")):
            return f"--prometheus must be an http(s) URL, got {args.prometheus!r}"
    return None


def run(args: argparse.Namespace) -> int:
    from gpuguard.sources.configfile import load_config_file
    from gpuguard.sources.snapshot import load_cluster_facts
    from gpuguard.sources.yamlsafe import InputError
    from policies.facts import ClusterFacts

    problem = _usage_problem(args)
    if problem:
        return _fail(problem)
    try:
        config, _ = load_config_file(args.config)
        facts = load_cluster_facts(args.cluster) if args.cluster else None
        after = load_cluster_facts(args.cluster_after) if args.cluster_after else None
    except InputError as exc:
        return _fail(exc.text())
    if args.kubeconfig or args.in_cluster:
        outcome = _audit_live(args, config, facts, after)
    else:
        outcome = _audit_dumps(args, config, facts or ClusterFacts.empty(), after)
    if isinstance(outcome, int):
        return outcome
    return _write(args, outcome)


def _auditor(args: argparse.Namespace, config: Config, facts: ClusterFacts, after: ClusterFacts | None,
             cluster: str | None) -> Any:
    from gpuguard.audit.auditor import Auditor
    from policies.types import Severity

    return Auditor(config, facts, after, matrix=args.format == "html", cluster=cluster,
                   cluster_after=args.cluster_after, fail_on=Severity.parse(args.fail_on))


def _audit_dumps(args: argparse.Namespace, config: Config, facts: ClusterFacts,
                 after: ClusterFacts | None) -> AuditResult | int:
    from gpuguard.audit.dumps import DumpReader
    from gpuguard.audit.pools import PoolInputs
    from gpuguard.sources.snapshot import SAMPLE
    from policies.wording import plural

    auditor = _auditor(args, config, facts, after, args.cluster)
    pools = PoolInputs() if args.cluster and args.cluster != SAMPLE else None
    DumpReader(auditor, pods=pools.pod if pools is not None else None).read(args.paths)
    result: AuditResult = auditor.finish()
    if not args.cluster and result.skipped_rules:
        result.notes.append(
            f"no --cluster given: skipped {plural(len(result.skipped_rules), 'rule')} that need cluster facts "
            f"({', '.join(result.skipped_rules)}); pass --cluster FILE (or --cluster sample)"
        )
    if pools is not None and pools.objects.pods:
        from gpuguard.kube.dump import load_dumps

        loaded = load_dumps([args.cluster])
        if loaded.errors:
            result.notes.append(f"no GPU pool summary: {loaded.errors[0].message}")
        else:
            pools.nodes(loaded.objects.nodes)
            _pools(args, config, pools, result)
    return result


def _audit_live(args: argparse.Namespace, config: Config, facts: ClusterFacts | None,
                after: ClusterFacts | None) -> AuditResult | int:
    from gpuguard.audit.live import audit_workloads, list_facts
    from gpuguard.audit.pools import PoolInputs
    from gpuguard.kube.discovery import ApiError, Discovery, RestClient
    from gpuguard.kube.live import api_client_from

    try:
        api_client = api_client_from(args.kubeconfig, args.in_cluster)
    except Exception as exc:  # a missing kubeconfig, no service account: the client's own message
        return _fail(f"cannot load Kubernetes credentials: {str(exc).splitlines()[0] if str(exc) else exc!r}")
    with api_client:
        client = RestClient(api_client)
        discovery = Discovery(client)
        try:
            listed = list_facts(client, discovery)
        except ApiError as exc:
            hint = "; grant `list` on nodes (cluster-wide)" if exc.status == 403 else ""
            return _fail(f"cannot list nodes: {exc.message}{hint}")
        auditor = _auditor(args, config, facts or listed.facts, after, args.cluster or "live cluster")
        for note in listed.notes:
            auditor.note(note)
        pools = PoolInputs()
        pools.nodes(listed.nodes)
        audit_workloads(client, discovery, auditor, pods=pools.pod)
    result: AuditResult = auditor.finish()
    _pools(args, config, pools, result)
    return result


def _pools(args: argparse.Namespace, config: Config, inputs: PoolInputs, result: AuditResult) -> None:
    from gpuguard.audit.pools import pool_summary

    summary = pool_summary(inputs, config, args.prometheus, args.idle_window)
    result.pools = summary.pools
    result.notes.extend(summary.notes)


def _renderer(args: argparse.Namespace) -> Callable[[AuditResult, TextIO], None]:
    from audit.formats import html, json_format, reports, sarif, text
    from gpuguard.terminal import use_colour

    def render_text(result: AuditResult, stream: TextIO) -> None:
        text.render(result, stream, colour=use_colour(stream, args.color), quiet=args.quiet)

    renderers: dict[str, Callable[[AuditResult, TextIO], None]] = {
        "text": render_text,
        "json": json_format.render,
        "sarif": sarif.render,
        "policyreport": reports.render_policyreport,
        "openreports": reports.render_openreports,
        "html": html.render,
    }
    return renderers[args.format]


def _write(args: argparse.Namespace, result: AuditResult) -> int:
    render = _renderer(args)
    if not args.output:
        render(result, sys.stdout)
        sys.stdout.flush()
        return result.exit_code()
    try:
        with open(args.output, "w", encoding="utf-8") as fh:
            render(result, fh)
    except OSError as exc:
        return _fail(f"cannot write {args.output}: {exc.strerror or exc}")
    if args.format != "text" and not args.quiet:  # the report went to a file: say in a line what it holds
        from policies.wording import plural

        counts = result.severity_counts()
        sys.stderr.write(f"gpuguard audit: wrote {args.output}: {plural(counts['error'], 'error')}, "
                         f"{plural(counts['warning'], 'warning')}, {plural(counts['info'], 'info')}\n")
    return result.exit_code()

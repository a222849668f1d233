"""``gpuguard why-pending [POD…] [-n NAMESPACE | -A] [--kubeconfig FILE | --in-cluster | --dump FILE…]
[--prometheus URL] [--idle-window 1h] [--config FILE] [--format text|json|html] [--output FILE]``

Explains why GPU pods are Pending: for each pod the scheduler has tried (``PodScheduled=False``) or a
scheduling gate holds, the reasons in the order of what fixes them: ``gated``, ``static`` (the
engine's findings against the same cluster), ``scheduler`` (its message in plain words), ``gang``
(a pod of a gang: how many of its siblings run and hold what where, and whether another partially
placed gang holds what it needs — a deadlock), ``insufficient``/``fragmentation`` (free GPUs per
node), ``unhealthy-devices``/``device-plugin-down`` (and cordoned or NotReady GPU nodes),
``idle-holders`` (with ``--prometheus``: pods holding GPUs a fit needs whose DCGM utilization stayed
under 1 %) and ``preemptible``.  Workloads that have no pods
yet are reported too, when no pod is named: those Kueue holds (``queue``: the LocalQueue, the
ClusterQueue, the flavor, the quota it waits for, the Workload's condition) and those whose pods a
ResourceQuota refuses (``quota``, from the controller's FailedCreate events).

Input: a live cluster (the kubeconfig's current context, ``--kubeconfig``, or ``--in-cluster``),
listed read-only, or ``--dump`` files (``kubectl get nodes,pods,events,priorityclasses -A -o yaml``
or ``-o json``; ``-`` reads stdin; a directory, its ``*.yaml``, ``*.yml`` and ``*.json`` files).
Pods: every pending GPU pod in the namespace (kubectl's: the
context's, else ``default``), in all namespaces with ``-A``, or the pods named (``NAME`` or
``NAMESPACE/NAME``).

Exit status: 0 the report was written (whatever it says; a slow or unreachable Prometheus is a
note); 2 bad usage, unreadable config or dump, a cluster that cannot be listed, a report that
cannot be written, or a named pod that does not exist (said first; the report for the others is
still written, and none when no pod named exists).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from whypending.gather import Gathered
    from whypending.report import Report

EXIT_OK = 0
EXIT_ERROR = 2
FORMATS = ("text", "json", "html")
PROG = "gpuguard why-pending"


class UsageError(Exception):
    pass


EPILOG = ("exit status: 0 the report was written (a slow or unreachable Prometheus is a note); 2 bad usage, "
          "an unreadable config or dump, a cluster that cannot be listed, a report that cannot be written, "
          "or a named pod that does not exist (said first; the report for the others is still written, none "
          "when no pod named exists)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.add_argument("pods", nargs="*", metavar="POD",
                        help="pods to explain: NAME (in the namespace) or NAMESPACE/NAME; default: every pending "
                        "GPU pod in the namespace")
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("-n", "--namespace", metavar="NAMESPACE",
                       help="the pods' namespace (default: the kubeconfig context's, else default)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="pods of every namespace")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--kubeconfig", metavar="FILE",
                        help="kubeconfig to use (default: $KUBECONFIG or ~/.kube/config)")
    source.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
    source.add_argument("--dump", metavar="FILE", nargs="+", action="extend",
                        help="read `kubectl get nodes,pods,events,priorityclasses -A -o yaml` (or -o json) output "
                        "instead of a cluster: files, directories (their *.yaml, *.yml, *.json), - for stdin "
                        "(put pod names before --dump)")
    parser.add_argument("--prometheus", metavar="URL",
                        help="Prometheus with dcgm-exporter metrics, to name pods that hold GPUs without using them")
    parser.add_argument("--idle-window", metavar="DURATION", default="1h",
                        help="how far back utilization must have stayed near 0 (Prometheus duration; default 1h)")
    parser.add_argument("--config", metavar="FILE", help="gpuguard config (default: .gpuguard.yaml upward from cwd)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument("--output", metavar="FILE", help="write the report to FILE (atomically) instead of stdout")
    from gpuguard.terminal import add_output_arguments

    add_output_arguments(parser, colour=False)  # the text has no colour


def _check_usage(args: argparse.Namespace) -> tuple[str, ...]:
    from gpuguard.prometheus import PrometheusClient, parse_window
    from whypending.selection import parse_names

    try:
        names = parse_names(args.pods)
        parse_window(args.idle_window)
        if args.prometheus is not None:
            PrometheusClient(args.prometheus).close()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.dump is not None and not args.dump:
        raise UsageError("--dump needs at least one file")
    return names


def _gather(args: argparse.Namespace, namespace: str | None) -> Gathered:
    from whypending.gather import from_cluster, from_dumps

    if args.dump:
        return from_dumps(args.dump)
    return from_cluster(args.kubeconfig, args.in_cluster, namespace)


def build_report(args: argparse.Namespace, names: tuple[str, ...]) -> Report:
    """Gather, select, judge and diagnose; raises GatherError or InputError for bad input."""
    from gpuguard.sources.configfile import load_config_file
    from policies.pending.diagnose import diagnose
    from policies.pending.state import ClusterState
    from policies.wording import plural
    from whypending.gather import DEFAULT_NAMESPACE, context_namespace, in_name_order
    from whypending.report import Report
    from whypending.selection import Scope, select
    from whypending.static import engine_facts, static_findings
    from whypending.utilization import measure

    config, _ = load_config_file(args.config)
    if args.all_namespaces:
        namespace = None
    elif args.namespace:
        namespace = args.namespace
    elif args.dump:
        namespace = DEFAULT_NAMESPACE
    else:
        namespace = context_namespace(args.kubeconfig, args.in_cluster)
    scope = Scope(namespace, names)
    gathered = _gather(args, scope.event_namespace())
    state = ClusterState.build(in_name_order(gathered.objects), gpu_names=config.is_gpu)
    chosen = select(state, scope, live=gathered.live)
    facts = engine_facts(state, gathered.objects.nodepools, gathered.source)
    static = static_findings(chosen.pods, config, facts)
    utilization = measure(args.prometheus, args.idle_window) if args.prometheus else None
    use = utilization.use if utilization is not None else None
    window_start = utilization.window_start if utilization is not None else None
    # Workloads without pods are in scope when no pod is named: every namespace with -A, else the one.
    workloads = None if names else (lambda _ns: True) if namespace is None else (lambda ns: ns == namespace)
    diagnosis = diagnose(state, chosen.pods, static=static.findings, use=use, window_start=window_start,
                         workloads=workloads,
                         **({"idle_threshold": utilization.threshold} if utilization is not None else {}))
    notes = [*gathered.notes, *chosen.notes, *static.notes]
    if facts.pools:
        notes.append(f"{plural(len(facts.pools), 'Karpenter NodePool')} can add nodes: the static checks count them, "
                     "the free-GPU analysis covers existing nodes only")
    return Report(diagnosis, state, scope, gathered.source, utilization, notes, chosen.missing)


def _render(report: Report, fmt: str, quiet: bool = False) -> str:
    from whypending import render_html, render_json, render_text

    if fmt == "text":
        return render_text.render(report, quiet=quiet)
    renderers = {"json": render_json.render, "html": render_html.render}
    return renderers[fmt](report)


def run(args: argparse.Namespace) -> int:
    from gpuguard.sources.yamlsafe import InputError
    from whypending.gather import GatherError
    from whypending.output import OutputError, write_atomically

    def fail(message: str) -> int:
        for line in message.splitlines() or [""]:
            sys.stderr.write(f"{PROG}: {line}\n")
        return EXIT_ERROR

    try:
        names = _check_usage(args)
        report = build_report(args, names)
        text = _render(report, args.format, args.quiet)
    except UsageError as exc:
        return fail(str(exc))
    except InputError as exc:
        return fail(exc.text())
    except GatherError as exc:
        return fail(str(exc))
    except Exception as exc:  # a fault of gpuguard's own: said plainly, never a traceback
        return fail(f"internal error ({type(exc).__name__}: {str(exc)[:300]}); please report it")
    for missing in report.missing:  # said first, before any report
        sys.stderr.write(f"{PROG}: {missing}\n")
    sys.stderr.flush()
    if report.missing and not report.diagnosis.pods and len(report.missing) == len(set(names)):
        return EXIT_ERROR  # every pod named is missing: there is nothing to report on
    if args.output:
        try:
            write_atomically(args.output, text)
        except OutputError as exc:
            return fail(str(exc))
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    if (args.output or args.format != "text") and not args.quiet:
        for note in report.notes_only():
            sys.stderr.write(f"{PROG}: note: {note}\n")
    return EXIT_ERROR if report.missing else EXIT_OK

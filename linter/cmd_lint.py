"""``gpuguard lint [PATH…|-]``: check manifests and report findings at file:line:column.

Exit codes: 0 nothing at or above ``--fail-on``; 1 findings at or above it; 2 an input could not
be read or parsed, or bad usage (config and cluster snapshot errors included).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TextIO

from gpuguard.sources.yamlsafe import InputError

if TYPE_CHECKING:
    from gpuguard.sources.inputs import Input
    from gpuguard.sources.reading import Source
    from linter.lint import FileResult
    from linter.report import Report
    from policies.config import Config
    from policies.dra.facts import DraInputs
    from policies.env_sources import EnvSources
    from policies.facts import ClusterFacts
    from policies.images import ImageFacts
    from policies.kserve import KServeView

FORMATS = ("text", "json", "sarif", "github")
LEVELS = ("error", "warning", "info")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files, directories (searched for *.yaml, *.yml, *.json; Helm charts and kustomizations are "
        "rendered) or - for stdin (default: stdin when it is piped, else .)",
    )
    parser.add_argument(
        "--cluster",
        metavar="FILE",
        help="cluster snapshot (`kubectl get nodes,runtimeclasses -o yaml`; with DRA add deviceclasses,"
        "resourceslices,resourceclaims,resourceclaimtemplates and -A), or `sample` for the bundled profile; "
        "without it, rules that need cluster facts are skipped",
    )
    parser.add_argument("--config", metavar="FILE", help="gpuguard config (default: .gpuguard.yaml upward from cwd)")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    parser.add_argument(
        "--fail-on",
        choices=LEVELS,
        default="error",
        help="exit 1 when a finding has this severity or higher (default: error)",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--fix",
        action="store_true",
        help="apply the fixes in place, keeping comments and formatting (stdin: print the fixed YAML)",
    )
    mode.add_argument(
        "--diff",
        action="store_true",
        help="print the fixes as a unified diff and write nothing (the report then goes to stderr)",
    )
    parser.add_argument(
        "--stdin-filename",
        metavar="NAME",
        help="the name reports give stdin (`-`, the default input with this flag); Helm output is "
        "reported at the templates its `# Source:` comments name",
    )
    parser.add_argument(
        "--helm-chart",
        metavar="DIR",
        help="the chart directory Helm rendered into stdin: SARIF and GitHub reports name its templates "
        "DIR/templates/… instead of <chart name>/templates/…",
    )
    parser.add_argument(
        "--enable", action="append", default=[], metavar="RULE",
        help="turn RULE on at its default severity, over the config (repeatable)",
    )
    parser.add_argument(
        "--disable", action="append", default=[], metavar="RULE",
        help="turn RULE off, over the config (repeatable)",
    )
    parser.add_argument(
        "--fail-if-no-objects", action="store_true",
        help="exit 2 when the inputs hold no Kubernetes object (a note on stderr otherwise)",
    )
    parser.add_argument("--sarif", metavar="FILE", help="also write the report as SARIF to FILE (one run, two reports)")
    render = parser.add_argument_group("charts and kustomizations (rendered before they are linted)")
    render.add_argument("--helm", metavar="PATH", help="the helm binary (default: helm on PATH)")
    render.add_argument("--kubectl", metavar="PATH", help="the kubectl binary for kustomize (default: kubectl on PATH)")
    render.add_argument("--helm-values", action="append", default=[], metavar="FILE",
                        help="a values file for every chart (repeatable, as helm template --values)")
    render.add_argument("--helm-set", action="append", default=[], metavar="K=V",
                        help="a value for every chart (repeatable, as helm template --set)")
    render.add_argument("--helm-release", default="release-name", metavar="NAME",
                        help="the release name charts are rendered with (default: release-name)")
    render.add_argument("--namespace", metavar="NS", help="the namespace charts are rendered into")
    from gpuguard.registry.cli import add_arguments as add_registry_arguments
    from gpuguard.terminal import add_output_arguments

    add_registry_arguments(parser, default_on=False)
    add_output_arguments(parser)


def _render(report: Report, args: argparse.Namespace, stream: TextIO) -> None:
    from gpuguard.terminal import use_colour
    from linter.formats import github, json_format, sarif, text

    if args.format == "text":
        text.render(report, stream, colour=use_colour(stream, args.color), quiet=args.quiet)
        return
    renderers = {"json": json_format.render, "sarif": sarif.render, "github": github.render}
    renderers[args.format](report, stream)


def _fix(
    item: Input,
    text: str,
    result: FileResult,
    config: Config,
    facts: ClusterFacts,
    images: ImageFacts | None,
    dra_inputs: DraInputs | None = None,
    kserve: KServeView | None = None,
    env_sources: EnvSources | None = None,
) -> tuple[str | None, FileResult]:
    """(fixed text, its lint result), or (None, original result) when nothing was fixed."""
    from gpuguard.sources.yamlsafe import InputError
    from linter.fixer import FixError, fixed_text
    from linter.lint import lint_text

    try:
        new_text = fixed_text(result, text)
    except (FixError, ValueError, KeyError, TypeError) as exc:
        # jsonpatch raises JsonPatchException / JsonPointerException (ValueError / KeyError subclasses)
        result.errors.append(InputError(item.name, 1, f"cannot apply the fixes: {exc}"))
        return None, result
    if new_text is None:
        return None, result
    after = lint_text(new_text, item.name, config, facts, images, fixes=True, dra_inputs=dra_inputs, kserve=kserve,
                      env_sources=env_sources)
    leftover = after.patches()
    # Input errors the file had already (an unrendered placeholder, a misshapen object elsewhere)
    # are reported either way; only errors the fixes would bring in stop them.
    brought = Counter(e.message for e in after.errors) - Counter(e.message for e in result.errors)
    if leftover or brought:
        rules = sorted({f.finding.rule for f in after.findings if f.finding.fix})
        reason = (f"a second pass still finds fixes ({', '.join(rules)})" if leftover
                  else f"the result does not lint ({next(iter(brought))})")
        result.errors.append(InputError(item.name, 1, f"fix not applied: {reason}"))
        return None, result
    return new_text, after


@dataclass
class _Run:
    """One ``gpuguard lint`` run over its inputs, one file at a time."""

    args: argparse.Namespace
    config: Config
    facts: ClusterFacts
    report: Report
    images: ImageFacts | None = None
    dra_inputs: DraInputs | None = None  # the DRA objects of every input (gpuguard.sources.dra_inputs)
    kserve: KServeView | None = None  # the KServe objects of every input (gpuguard.sources.kserve_inputs)
    env_sources: EnvSources | None = None  # its ConfigMaps and Secrets (gpuguard.sources.env_inputs)
    stdin_fixed: list[str] = field(default_factory=list)
    diff: list[str] = field(default_factory=list)

    def lint(self, item: Input, source: Source) -> None:
        from linter.lint import lint_text

        args = self.args
        fixing = bool(args.fix or args.diff)
        result = lint_text(
            source.text, item.name, self.config, self.facts, self.images,
            fixes=fixing, excerpts=args.format == "text", dra_inputs=self.dra_inputs, kserve=self.kserve,
            env_sources=self.env_sources,
        )
        if fixing:
            result = self._fix(item, source, result)
        result.fixes.clear()
        result.segments.clear()
        self.report.results.append(result)

    def _fix(self, item: Input, source: Source, result: FileResult) -> FileResult:
        import difflib

        from linter.writeback import write_fixed

        new_text, after = _fix(item, source.text, result, self.config, self.facts, self.images, self.dra_inputs,
                               self.kserve, self.env_sources)
        if self.args.diff:
            if new_text is not None:
                old, new = source.text.splitlines(keepends=True), new_text.splitlines(keepends=True)
                self.diff.extend(difflib.unified_diff(old, new, f"a/{item.name}", f"b/{item.name}"))
            return result
        if item.path is None:
            self.stdin_fixed.append(new_text if new_text is not None else source.text)
        elif new_text is not None:
            if item.tool is not None:
                what = "a Helm chart" if item.tool == "helm" else "a kustomization"
                result.errors.append(InputError(item.name, 0, f"cannot write the fixes: {what} is rendered, not "
                                                "edited; change its templates (--diff shows the fixes)"))
                return result
            if source.stamp is None:
                result.errors.append(InputError(item.name, 0, "cannot write the fixes: not a regular file"))
                return result
            try:
                write_fixed(item, source.stamp, new_text)
            except InputError as exc:
                result.errors.append(exc)
                return result
        if new_text is None:
            return result
        self.report.fixed_files.append(item.name)
        return after


def run(args: argparse.Namespace) -> int:
    from gpuguard.registry.cli import RegistryUsageError, effective_settings
    from gpuguard.sources.configfile import load_config_file
    from gpuguard.sources.inputs import collect
    from gpuguard.sources.snapshot import load_cluster_facts
    from linter.report import EXIT_ERROR, Report
    from policies.facts import ClusterFacts
    from policies.types import Severity

    try:
        config, _ = load_config_file(args.config)
        config = _selected(config, args.enable, args.disable)
        facts = load_cluster_facts(args.cluster) if args.cluster else ClusterFacts.empty()
        registry = effective_settings(config.registry, args)
    except InputError as exc:
        sys.stderr.write(f"gpuguard lint: {exc.text()}\n")
        return EXIT_ERROR
    except _UsageError as exc:
        sys.stderr.write(f"gpuguard lint: {exc}\n")
        return EXIT_ERROR
    except RegistryUsageError as exc:
        sys.stderr.write(f"gpuguard lint: {exc}\n")
        return EXIT_ERROR

    from pathlib import Path

    from gpuguard.sources.inputs import STDIN_NAME, Input
    from gpuguard.sources.render import RenderOptions
    from policies.effective_facts import effective_facts
    from policies.engine import cluster_notes

    paths = args.paths or (["-"] if args.stdin_filename or not sys.stdin.isatty() else ["."])
    if args.stdin_filename is not None and "-" not in paths:
        sys.stderr.write("gpuguard lint: --stdin-filename names stdin: add - to the paths\n")
        return EXIT_ERROR
    if args.helm_chart is not None and not Path(args.helm_chart, "Chart.yaml").is_file():
        sys.stderr.write(f"gpuguard lint: --helm-chart {args.helm_chart}: no Chart.yaml in that directory\n")
        return EXIT_ERROR
    options = RenderOptions(
        helm=args.helm, kubectl=args.kubectl, values=tuple(args.helm_values), sets=tuple(args.helm_set),
        release=args.helm_release, namespace=args.namespace,
    )
    inputs, missing = collect(paths, options)
    stdin_name = args.stdin_filename or STDIN_NAME
    inputs = [Input(stdin_name, None) if item.path is None else item for item in inputs]
    report = Report(errors=missing, fail_on=Severity.parse(args.fail_on), cluster=args.cluster)
    report.stdin_name, report.helm_chart = stdin_name, args.helm_chart
    report.rendered_charts = [item.name for item in inputs if item.tool == "helm"]
    seen = effective_facts(facts, config)
    report.extended_resource_toleration = seen.extended_resource_toleration_reason
    report.platform_note = seen.platform_note
    report.scaling_pools = [f"{pool.pool.origin} {pool.name!r}" for pool in seen.pools if pool.pool is not None]
    report.node_problems = cluster_notes(facts, config)
    state = _Run(args, config, facts, report)
    state.dra_inputs, state.kserve, state.env_sources = _run_inputs(inputs)
    stamped = bool(args.fix)
    if registry is not None:
        # Every image is looked up before any object is evaluated, so every text is read first.
        from linter.image_lookups import look_up_images

        sources = [(item, source) for item in inputs if (source := _read(item, stamped, report)) is not None]
        try:
            state.images = look_up_images(((i.name, s.text) for i, s in sources), config, facts, registry)
        except RegistryUsageError as exc:
            sys.stderr.write(f"gpuguard lint: {exc}\n")
            return EXIT_ERROR
        for item, source in sources:
            _guarded(state, item, source)
    else:
        for item in inputs:  # one file in memory at a time
            source = _read(item, stamped, report)
            if source is not None:
                _guarded(state, item, source)

    stdout_taken = bool(args.diff or state.stdin_fixed)
    for chunk in state.diff:
        sys.stdout.write(chunk if chunk.endswith("\n") else chunk + "\n\\ No newline at end of file\n")
    for fixed in state.stdin_fixed:
        sys.stdout.write(fixed)
    sys.stdout.flush()
    no_objects = not report.all_errors and not any(r.objects for r in report.results)
    if no_objects:
        names = ", ".join(paths) if len(paths) <= 3 else f"{len(paths)} paths"
        report.notes.append(f"no Kubernetes objects found in {names}")
        if args.format != "text" and not args.quiet:
            sys.stderr.write(f"gpuguard lint: note: no Kubernetes objects found in {names}\n")
    if args.format in ("json", "sarif") and not args.quiet:
        # The report's shape has no place for them: problems of the nodes themselves go to stderr.
        for problem in report.node_problems:
            sys.stderr.write(f"gpuguard lint: note: cluster: {problem}\n")
    _render(report, args, sys.stderr if stdout_taken else sys.stdout)
    if args.sarif:
        _write_sarif(report, args.sarif)
    if no_objects and args.fail_if_no_objects:
        return EXIT_ERROR
    return report.exit_code()


class _UsageError(ValueError):
    pass


def _selected(config: Config, enable: list[str], disable: list[str]) -> Config:
    """``config`` with the rules --enable and --disable name switched on (at their default
    severity unless the config sets one) or off."""
    import dataclasses

    from policies.config import RuleSettings
    from policies.registry import RULES
    from policies.wording import did_you_mean, suggest

    for rule in [*enable, *disable]:
        if rule not in RULES:
            close = suggest(rule, RULES)
            hint = f"; {did_you_mean(close)}" if close else "; `gpuguard rules` lists them"
            raise _UsageError(f"no rule {rule!r}{hint}")
    both = sorted(set(enable) & set(disable))
    if both:
        raise _UsageError(f"--enable and --disable both name {', '.join(both)}")
    if not enable and not disable:
        return config
    rules = dict(config.rules)
    for rule in enable:
        current = config.settings(rule)
        severity = current.severity if current.severity is not None else RULES[rule].DEFAULT_SEVERITY
        rules[rule] = RuleSettings(severity, current.options, current.explicit and current.severity is not None)
    for rule in disable:
        rules[rule] = RuleSettings(None, config.settings(rule).options, True)
    return dataclasses.replace(config, rules=rules)


def _write_sarif(report: Report, path: str) -> None:
    """The SARIF report to ``path``, written atomically (a temporary file renamed over it)."""
    import io
    import os
    import tempfile

    from linter.formats import sarif

    buffer = io.StringIO()
    sarif.render(report, buffer)
    target = os.path.abspath(path)
    directory = os.path.dirname(target) or "."
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".gpuguard-", suffix=".sarif", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(buffer.getvalue())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _run_inputs(inputs: list[Input]) -> tuple[DraInputs, KServeView, EnvSources]:
    """The DeviceClasses, claims and claim templates of every regular file of the run, for a pod's
    claims to resolve to, its ServingRuntimes and LLMInferenceServiceConfigs, for KServe's
    templates to merge over, and its ConfigMaps and Secrets, which envFrom reads; unreadable files
    are reported later.  Pipes, FIFOs, /dev/stdin and other
    streams can be read only once, so their own objects are added when they are linted, for their
    own pods only."""
    from gpuguard.sources.dra_inputs import DraCollector
    from gpuguard.sources.env_inputs import EnvCollector
    from gpuguard.sources.kserve_inputs import KServeCollector

    collector = DraCollector()
    served = KServeCollector()
    env = EnvCollector()
    for item in inputs:
        if item.path is None:
            continue
        try:
            if not stat.S_ISREG(os.stat(item.path).st_mode):
                continue
        except OSError:
            continue
        try:
            text = item.read()
            collector.add(text, item.name)
            served.add(text, item.name)
            env.add(text, item.name)
        except (InputError, RecursionError):
            continue
    return collector.inputs(), served.view(), env.sources()


def _read(item: Input, stamped: bool, report: Report) -> Source | None:
    try:
        return item.load(stamped)
    except InputError as exc:
        report.errors.append(exc)
        return None


def _guarded(state: _Run, item: Input, source: Source) -> None:
    """Lint (and fix) one input; whatever goes wrong is an input error naming it, and the run goes on."""
    try:
        state.lint(item, source)
    except InputError as exc:
        state.report.errors.append(exc)
    except Exception as exc:  # a fault of gpuguard's own: reported against the input, never a traceback
        state.report.errors.append(InputError(item.name, 0, f"internal error: {type(exc).__name__}: {exc}"))

"""``gpuguard lint [PATH…|-]``: check manifests and report findings at file:line:column.

Exit codes: 0 nothing at or above ``--fail-on``; 1 findings at or above it; 2 an input could not
be read or parsed, or bad usage (config and cluster snapshot errors included).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from gpuguard.sources.inputs import Input
    from linter.lint import FileResult
    from linter.report import Report
    from policies.config import Config
    from policies.facts import ClusterFacts
    from policies.images import ImageFacts

FORMATS = ("text", "json", "sarif", "github")
LEVELS = ("error", "warning", "info")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files, directories (searched for *.yaml, *.yml, *.json) or - for stdin (default: .)",
    )
    parser.add_argument(
        "--cluster",
        metavar="FILE",
        help="cluster snapshot (`kubectl get nodes,runtimeclasses -o yaml`), or `sample` for the bundled "
        "profile; without it, rules that need cluster facts are skipped",
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
    from gpuguard.registry.cli import add_arguments as add_registry_arguments

    add_registry_arguments(parser, default_on=False)


def _render(report: Report, fmt: str, stream: TextIO) -> None:
    from linter.formats import github, json_format, sarif, text

    renderers = {"text": text.render, "json": json_format.render, "sarif": sarif.render, "github": github.render}
    renderers[fmt](report, stream)


def _fix(
    item: Input, result: FileResult, config: Config, facts: ClusterFacts, images: ImageFacts | None
) -> tuple[str | None, FileResult]:
    """(fixed text, its lint result), or (None, original result) when nothing was fixed."""
    from gpuguard.sources.yamlsafe import InputError
    from linter.fixer import FixError, fixed_text
    from linter.lint import lint_text

    try:
        new_text = fixed_text(result)
    except (FixError, ValueError, KeyError, TypeError) as exc:
        # jsonpatch raises JsonPatchException / JsonPointerException (ValueError / KeyError subclasses)
        result.errors.append(InputError(item.name, 1, f"cannot apply the fixes: {exc}"))
        return None, result
    if new_text is None:
        return None, result
    after = lint_text(new_text, item.name, config, facts, images)
    leftover = after.patches()
    if leftover or after.errors:
        rules = sorted({f.finding.rule for f in after.findings if f.finding.fix})
        reason = f"a second pass still finds fixes ({', '.join(rules)})" if leftover else "the result does not lint"
        result.errors.append(InputError(item.name, 1, f"fix not applied: {reason}"))
        return None, result
    return new_text, after


def run(args: argparse.Namespace) -> int:
    import difflib
    from pathlib import Path

    from gpuguard.registry.cli import RegistryUsageError, effective_settings
    from gpuguard.sources.configfile import load_config_file
    from gpuguard.sources.inputs import STDIN_NAME, Input, collect
    from gpuguard.sources.snapshot import load_cluster_facts
    from gpuguard.sources.yamlsafe import InputError
    from linter.lint import lint_text
    from linter.report import EXIT_ERROR, Report
    from policies.facts import ClusterFacts
    from policies.types import Severity

    try:
        config, _ = load_config_file(args.config)
        facts = load_cluster_facts(args.cluster) if args.cluster else ClusterFacts.empty()
        registry = effective_settings(config.registry, args)
    except InputError as exc:
        sys.stderr.write(f"gpuguard lint: {exc.file}:{exc.line}: {exc.message}\n")
        return EXIT_ERROR
    except RegistryUsageError as exc:
        sys.stderr.write(f"gpuguard lint: {exc}\n")
        return EXIT_ERROR

    from policies.effective_facts import effective_facts

    paths = args.paths or (["-"] if args.stdin_filename else ["."])
    if args.stdin_filename is not None and "-" not in paths:
        sys.stderr.write("gpuguard lint: --stdin-filename names stdin: add - to the paths\n")
        return EXIT_ERROR
    if args.helm_chart is not None and not Path(args.helm_chart, "Chart.yaml").is_file():
        sys.stderr.write(f"gpuguard lint: --helm-chart {args.helm_chart}: no Chart.yaml in that directory\n")
        return EXIT_ERROR
    inputs, missing = collect(paths)
    stdin_name = args.stdin_filename or STDIN_NAME
    inputs = [Input(stdin_name, None) if item.path is None else item for item in inputs]
    report = Report(errors=missing, fail_on=Severity.parse(args.fail_on), cluster=args.cluster)
    report.stdin_name, report.helm_chart = stdin_name, args.helm_chart
    seen = effective_facts(facts, config)
    report.extended_resource_toleration = seen.extended_resource_toleration_reason
    report.scaling_pools = [f"{pool.pool.origin} {pool.name!r}" for pool in seen.pools if pool.pool is not None]
    stdin_fixed: list[str] = []
    diff: list[str] = []
    texts: list[tuple[Input, str]] = []
    for item in inputs:
        try:
            texts.append((item, item.read()))
        except InputError as exc:
            report.errors.append(exc)
    images = None
    if registry is not None:  # every image is looked up before any object is evaluated
        from linter.image_lookups import look_up_images

        try:
            images = look_up_images(((i.name, t) for i, t in texts), config, facts, registry)
        except RegistryUsageError as exc:
            sys.stderr.write(f"gpuguard lint: {exc}\n")
            return EXIT_ERROR
    for item, text in texts:
        result = lint_text(text, item.name, config, facts, images)
        if args.fix or args.diff:
            new_text, after = _fix(item, result, config, facts, images)
            if args.diff and new_text is not None:
                name = item.name
                diff.extend(
                    difflib.unified_diff(
                        text.splitlines(keepends=True), new_text.splitlines(keepends=True), f"a/{name}", f"b/{name}"
                    )
                )
            elif args.fix:
                if item.path is None:
                    stdin_fixed.append(new_text if new_text is not None else text)
                elif new_text is not None:
                    item.path.write_text(new_text, encoding="utf-8", newline="")
                if new_text is not None:
                    report.fixed_files.append(item.name)
                    result = after
        report.results.append(result)

    stdout_taken = bool(args.diff or stdin_fixed)
    for chunk in diff:
        sys.stdout.write(chunk if chunk.endswith("\n") else chunk + "\n\\ No newline at end of file\n")
    for fixed in stdin_fixed:
        sys.stdout.write(fixed)
    sys.stdout.flush()
    _render(report, args.format, sys.stderr if stdout_taken else sys.stdout)
    return report.exit_code()

"""The ``gpuguard`` command: subcommands are registered here and implemented in their modules.

Each subcommand module exposes ``add_arguments(parser)`` and ``run(args) -> int``; they are
imported lazily so ``gpuguard lint`` never pays for FastAPI or the Kubernetes client.

Usage lines name the program as it was invoked: ``gpuguard``, or ``kubectl gpuguard`` when kubectl
runs the ``kubectl-gpuguard`` plugin (kubectl execs the plugin with its path as ``argv[0]``:
``syscall.Exec(executablePath, append([]string{executablePath}, cmdArgs...), …)`` in
kubernetes/kubectl pkg/cmd/plugin.go).  A bad flag is reported with the usage of the subcommand it
was given to.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "lint": ("linter.cmd_lint", "lint Kubernetes manifests for GPU problems"),
    "rules": ("linter.cmd_rules", "list the rules, or show one rule's documentation"),
    "explain-image": ("linter.cmd_explain_image", "show an image's CUDA version and which nodes can run it"),
    "audit": ("audit.cmd_audit", "judge workloads that already exist (dumps or a live cluster) and planned changes"),
    "serve": ("webhook.cmd_serve", "run the validating/mutating admission webhook over TLS"),
    "webhook-config": ("webhook.cmd_webhook_config", "print the webhook configurations for a policy config"),
    "certs": ("certs.cmd_certs", "create a CA and serving certificate for the webhook"),
    "why-pending": ("whypending.cmd_why_pending", "explain why GPU pods are Pending while GPUs sit idle"),
    "config": ("gpuguard.cmd_config", "print the config's JSON Schema, or check a config file"),
    "schema": ("gpuguard.schemas", "print the JSON Schema of a --format json report"),
    "completion": ("gpuguard.completion", "print a bash, zsh or fish completion script"),
}


def _version() -> str:
    import importlib.metadata  # ~65 ms: only for --version

    try:
        return importlib.metadata.version("gpuguard")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """argparse's ``version`` action, reading the installed version only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        sys.stdout.write(f"gpuguard {_version()}\n")
        parser.exit()


def program_name(argv0: str | None = None) -> str:
    """``kubectl gpuguard`` when run as the kubectl plugin ``kubectl-gpuguard``, else ``gpuguard``.

    kubectl maps a plugin file name to its command by splitting at dashes and reading underscores
    as dashes (``kubectl-foo_bar`` is ``kubectl foo-bar``: registerPluginCommands in
    kubernetes/kubectl pkg/cmd/plugin/plugin_completion.go)."""
    name = os.path.basename(sys.argv[0] if argv0 is None else argv0)
    if name.startswith("kubectl-") and len(name) > len("kubectl-"):
        return " ".join(["kubectl", *(part.replace("_", "-") for part in name[len("kubectl-"):].split("-"))])
    return "gpuguard"


def build_parser(only: str | None = None, prog: str = "gpuguard") -> argparse.ArgumentParser:
    """The parser; with ``only``, just that subcommand's module is imported (fast start-up)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Will this pod get a working GPU? GPU policy checks for Kubernetes.",
    )
    parser.add_argument("--version", action=_VersionAction, help="show program's version number and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is None or name == only:
            module = importlib.import_module(module_name)
            module.add_arguments(p)
        p.set_defaults(_module=module_name)
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    from gpuguard.installation import problem

    broken = problem()
    if broken is not None:
        sys.stderr.write(f"gpuguard: {broken}\n")
        return 2
    args_list = list(sys.argv[1:] if argv is None else argv)
    chosen = next((a for a in args_list if not a.startswith("-")), None)
    parser = build_parser(chosen if chosen in SUBCOMMANDS else None, program_name())
    try:
        args, unknown = parser.parse_known_args(args_list)
        if unknown:  # argparse would blame the top-level parser; the subcommand's usage helps more
            culprit = _subparsers(parser).get(args.command) or parser
            culprit.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # argparse exits 2 on bad usage, 0 on --help
        return int(exc.code or 0)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    module = importlib.import_module(args._module)
    try:
        return int(module.run(args))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())

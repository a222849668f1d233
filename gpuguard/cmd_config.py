"""``gpuguard config schema|check FILE``: the config's JSON Schema, and whether a file is a valid config.

``schema`` prints the JSON Schema of ``.gpuguard.yaml`` (the config model's,
``gpuguard.sources.configmodel``), for editors (yaml-language-server) and CI.  ``check FILE``
validates a config file as every face reads it: exit 0 with a one-line summary, or 2 with each
problem at its ``file:line:column``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path

from policies.wording import plural

EXIT_INVALID = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser(
        "schema", help="print the JSON Schema of .gpuguard.yaml", description="print the JSON Schema of .gpuguard.yaml"
    )
    check = actions.add_parser(
        "check", help="validate a config file", description="validate a config file: exit 0 if valid, 2 if not"
    )
    check.add_argument("file", metavar="FILE", help="the config file, e.g. .gpuguard.yaml")


def summary(raw: object) -> str:
    """What a valid document sets, in one line."""
    if not isinstance(raw, Mapping) or not raw:
        return "empty: every setting has its default"
    keys = list(raw)
    rules = raw.get("rules")
    text = f"sets {', '.join(map(str, keys))}"
    if isinstance(rules, Mapping) and rules:
        text += f"; {plural(len(rules), 'rule')} configured"
    return text


def run(args: argparse.Namespace) -> int:
    if args.action == "schema":
        from gpuguard.sources.configmodel import schema_text

        sys.stdout.write(schema_text())
        return 0
    from gpuguard.sources.configfile import ConfigFileError, read_config
    from gpuguard.sources.yamlsafe import InputError

    try:
        _, raw = read_config(Path(args.file))
    except ConfigFileError as exc:
        for error in exc.errors:
            sys.stderr.write(f"{error}\n")
        return EXIT_INVALID
    except InputError as exc:
        sys.stderr.write(f"gpuguard config check: {exc}\n")
        return EXIT_INVALID
    sys.stdout.write(f"{args.file}: valid gpuguard config ({summary(raw)})\n")
    return 0

"""``gpuguard webhook-config [--config FILE]``: print the webhook configurations for a policy config.

The output is what ``kubectl apply`` takes (two documents: the Mutating and the Validating
webhook configuration); ``gpuguard certs --inject FILE`` then writes the CA bundle into it.
"""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="gpuguard policy config whose podTemplatePaths, gpuResourceNames and exemptNamespaces the "
        "webhooks follow (default: .gpuguard.yaml upward from cwd)",
    )
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from gpuguard.sources.configfile import load_config_file
    from gpuguard.sources.yamlsafe import InputError
    from webhook.configuration import GenerationError, render

    try:
        config, _ = load_config_file(args.config)
        text = render(config)
    except InputError as exc:
        sys.stderr.write(f"gpuguard webhook-config: {exc.text()}\n")
        return 2
    except GenerationError as exc:
        sys.stderr.write(f"gpuguard webhook-config: {exc}\n")
        return 2
    if args.output:
        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            sys.stderr.write(f"gpuguard webhook-config: cannot write {args.output}: {exc.strerror or exc}\n")
            return 2
    else:
        sys.stdout.write(text)
    return 0

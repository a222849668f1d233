"""JSON Schemas (draft 2020-12) of the ``--format json`` reports, shipped with the package.

``gpuguard schema lint-report|audit-report|why-pending-report`` prints one; the same files are
``gpuguard/schemas/*.json`` in the repository.  Where a report's shape is fixed, objects forbid
properties they do not declare (``additionalProperties: false``), so a report that grows a field
without its schema fails the tests that validate real output against it
(tests/gpuguard/test_schemas.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from importlib import resources
from typing import Any

SCHEMAS = {
    "lint-report": "gpuguard lint --format json",
    "audit-report": "gpuguard audit --format json",
    "why-pending-report": "gpuguard why-pending --format json",
}


def text(name: str) -> str:
    """The schema's JSON text, as shipped."""
    return resources.files("gpuguard.schemas").joinpath(f"{name}.json").read_text(encoding="utf-8")


def load(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(text(name))
    return schema


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=sorted(SCHEMAS), metavar="NAME",
                        help="which report: " + ", ".join(f"{n} ({what})" for n, what in SCHEMAS.items()))


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(text(args.name))
    return 0

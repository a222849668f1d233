"""gpu-exceeds-node-capacity: The pod asks for more of a GPU resource than any single node has allocatable.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-exceeds-node-capacity"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS = "yes"
FIXABLE = False
SUMMARY = "The pod asks for more of a GPU resource than any single node has allocatable."
REMEDIATION = "Lower the per-pod GPU count to fit one node, or split the work across pods (e.g. more workers)."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

"""gpu-memory-limit-missing: A GPU container has no memory limit.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-memory-limit-missing"
DEFAULT_SEVERITY = Severity.WARNING
NEEDS_FACTS = "no"
FIXABLE = False
SUMMARY = "A GPU container has no memory limit."
REMEDIATION = "Set resources.limits.memory on GPU containers."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

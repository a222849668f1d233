"""gpu-request-limit-mismatch: Request and limit differ for a GPU or other extended resource.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-request-limit-mismatch"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS = "no"
FIXABLE = True
SUMMARY = "Request and limit differ for a GPU or other extended resource."
REMEDIATION = "Set the request equal to the limit; for extended resources they must be equal."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

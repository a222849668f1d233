"""gpu-resource-unknown: No node advertises the requested GPU resource.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-resource-unknown"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS = "yes"
FIXABLE = False
SUMMARY = "No node advertises the requested GPU resource."
REMEDIATION = "Use a resource name that a node advertises (see the suggestions), or fix the device plugin / MIG configuration."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

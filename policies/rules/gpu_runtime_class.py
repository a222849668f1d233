"""gpu-runtime-class: runtimeClassName names a missing RuntimeClass, or a required one is absent.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-runtime-class"
DEFAULT_SEVERITY = Severity.WARNING
NEEDS_FACTS = "partly"
FIXABLE = True
SUMMARY = "runtimeClassName names a missing RuntimeClass, or a required one is absent."
REMEDIATION = "Set runtimeClassName to a RuntimeClass the cluster has (e.g. nvidia)."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

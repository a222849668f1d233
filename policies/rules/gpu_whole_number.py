"""gpu-whole-number: A GPU quantity is not a whole non-negative number, or GPUs appear in pod-level spec.resources.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-whole-number"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS = "no"
FIXABLE = False
SUMMARY = "A GPU quantity is not a whole non-negative number, or GPUs appear in pod-level spec.resources."
REMEDIATION = "Request whole GPUs (1, 2, …); for a fraction of a GPU use MIG profiles, time-slicing/MPS replicas or DRA."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

"""gpu-shared-memory: A multi-GPU container has no memory-backed emptyDir at /dev/shm.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-shared-memory"
DEFAULT_SEVERITY = Severity.WARNING
NEEDS_FACTS = "no"
FIXABLE = True
SUMMARY = "A multi-GPU container has no memory-backed emptyDir at /dev/shm."
REMEDIATION = "Mount an emptyDir with medium: Memory at /dev/shm."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

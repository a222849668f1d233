"""gpu-taint-not-tolerated: Every node that offers the resource carries a NoSchedule/NoExecute taint the pod does not tolerate.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-taint-not-tolerated"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS = "yes"
FIXABLE = True
SUMMARY = "Every node that offers the resource carries a NoSchedule/NoExecute taint the pod does not tolerate."
REMEDIATION = "Add tolerations for the GPU nodes' taints."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

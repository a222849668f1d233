"""gpu-node-selector-mismatch: nodeSelector / required node affinity matches none of the nodes that offer the resource.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-node-selector-mismatch"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS = "yes"
FIXABLE = False
SUMMARY = "nodeSelector / required node affinity matches none of the nodes that offer the resource."
REMEDIATION = "Change nodeSelector/affinity to labels the GPU nodes carry."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

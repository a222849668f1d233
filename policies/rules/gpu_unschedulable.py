"""gpu-unschedulable: No node passes all filters together although each alone is satisfiable somewhere.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-unschedulable"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS = "yes"
FIXABLE = False
SUMMARY = "No node passes all filters together although each alone is satisfiable somewhere."
REMEDIATION = "Make one node group satisfy every constraint at once; see the per-group reasons."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

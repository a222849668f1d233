"""gpu-dra-claim-reference: resources.claims and spec.resourceClaims are inconsistent.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-dra-claim-reference"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS = "no"
FIXABLE = False
SUMMARY = "resources.claims and spec.resourceClaims are inconsistent."
REMEDIATION = "Make every container claim name an entry of spec.resourceClaims with exactly one source."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

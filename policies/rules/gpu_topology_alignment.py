"""gpu-topology-alignment: A multi-GPU container cannot get CPU/GPU NUMA alignment.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-topology-alignment"
DEFAULT_SEVERITY = Severity.WARNING
NEEDS_FACTS = "no"
FIXABLE = False
SUMMARY = "A multi-GPU container cannot get CPU/GPU NUMA alignment."
REMEDIATION = "Make the pod Guaranteed QoS with integer CPU requests equal to limits."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

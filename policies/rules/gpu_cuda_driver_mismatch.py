"""gpu-cuda-driver-mismatch: the image's CUDA version needs a newer driver than the candidate nodes run.

TODO: implemented with its knowledge base in policies/data/.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-cuda-driver-mismatch"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS = "yes"
FIXABLE = True
SUMMARY = "An image's CUDA version needs a newer driver than the nodes it can land on run."
REMEDIATION = "Pin the pod to nodes whose driver runs the image, or use an image built for an older CUDA."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

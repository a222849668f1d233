"""gpu-device-access-bypass: GPU access that bypasses the device plugin.

TODO: failing and passing examples.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rule import Option, RuleContext
from policies.types import Severity, Violation

ID = "gpu-device-access-bypass"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS = "no"
FIXABLE = False
SUMMARY = "GPU access that bypasses the device plugin."
REMEDIATION = "Request GPUs through resources.limits and remove NVIDIA_VISIBLE_DEVICES, /dev/nvidia* hostPaths and privileged mode."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    return iter(())

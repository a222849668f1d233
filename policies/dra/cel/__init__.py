"""Kubernetes' CEL for DRA device selectors, on top of cel-python's grammar (``cel.lark``) and lark.

Entry points::

    from policies.dra.cel import compile_selector, prepare_device

    selector = compile_selector('device.attributes["gpu.nvidia.com"].productName.lowerAscii().matches("h100")')
    selector.ok, selector.issue            # would the API server accept it, and if not why
    selector.parity_uncertain              # is gpuguard unsure it reads it as Kubernetes does
    selector.references.attributes         # which attributes/capacities it reads
    device = prepare_device("gpu.nvidia.com", {"productName": {"string": "NVIDIA H100 80GB HBM3"}}, {})
    selector.evaluate(device)              # MatchResult(matched=True, cost=...)

See :mod:`.compiler` for the semantics and their sources.
"""

from policies.dra.cel.checker import Features
from policies.dra.cel.compiler import (
    MAX_COST,
    MAX_LENGTH,
    CelIssue,
    CompiledSelector,
    MatchResult,
    PreparedDevice,
    compile_selector,
    prepare_device,
)
from policies.dra.cel.references import AttributeRef, References

__all__ = [
    "MAX_COST",
    "MAX_LENGTH",
    "AttributeRef",
    "CelIssue",
    "CompiledSelector",
    "Features",
    "MatchResult",
    "PreparedDevice",
    "References",
    "compile_selector",
    "prepare_device",
]

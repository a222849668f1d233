"""gpu-limit-missing: a GPU (any extended resource) is requested without a limit.

The API server rejects it: extended resources cannot be overcommitted, so
``validateResourceRequirements`` demands a limit ("Limit must be set for non overcommitable
resources", kubernetes/kubernetes pkg/apis/core/validation/validation.go).  Pods only default
*requests* from limits, never the reverse, and pod templates get no defaulting at all.

Failing::

    resources:
      requests: {nvidia.com/gpu: 1}

Passing::

    resources:
      limits: {nvidia.com/gpu: 1}      # the request defaults to the limit on Pods

Fix: add ``limits.<resource>`` equal to the request.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.applicability import Applies
from policies.resources import is_extended
from policies.rule import NeedsFacts, Option, RuleContext
from policies.shapes import as_dict, text
from policies.types import RelOp, Severity, Violation

ID = "gpu-limit-missing"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "no"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = None
FIXABLE = True
MUTATION_SAFE = True
SUMMARY = "A GPU (any extended resource) is requested without a limit; the API server rejects it."
REMEDIATION = "Set resources.limits.<resource> equal to the request (extended resources cannot be overcommitted)."
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    for c in ctx.pod.containers:
        requests = c.resource_map("requests")
        limits = c.resources.get("limits")
        limit_map = as_dict(limits)
        missing = {
            name: value
            for name, value in requests.items()
            if isinstance(name, str) and is_extended(name) and name not in limit_map
        }
        if not missing:
            continue
        base = c.resources_path
        for name, value in missing.items():
            # Each finding carries its own op; the engine merges ops that create the same map.
            if isinstance(limits, dict):
                fix = (RelOp("add", (*base, "limits", name), value),)
            else:
                fix = (RelOp("add", (*base, "limits"), {name: value}),)
            yield Violation(
                message=(
                    f"container {c.name!r} requests {name}: {text(value, 40)} without a limit; extended resources "
                    f"cannot be overcommitted, so the API server rejects it: add limits.{name}: {text(value, 40)}"
                ),
                path=(*base, "requests", name),
                fix=fix,
            )

"""gpu-request-limit-mismatch: the request and the limit of a GPU (any extended resource) differ.

Extended resources cannot be overcommitted, so the API server demands that a request equal the
limit: "must be equal to nvidia.com/gpu limit of 2" (``validateResourceRequirements``,
kubernetes/kubernetes pkg/apis/core/validation/validation.go; ``helper.IsOvercommitAllowed`` is
false for every extended resource).  The same check runs on pod templates, so a Deployment or a
PyTorchJob with such a container is rejected at creation, before any Pod exists.

Failing::

    resources:
      requests: {nvidia.com/gpu: 1}
      limits: {nvidia.com/gpu: 2}

Passing::

    resources:
      requests: {nvidia.com/gpu: 2}
      limits: {nvidia.com/gpu: 2}

Fix (``gpuguard lint --fix`` only): set the larger of the two to the smaller, so the fix never
gives the pod more GPUs than either number asked for (requests 4, limits 8 → both 4).  Which number
was meant is a person's call, so the mutating webhook does not apply it (``MUTATION_SAFE`` is
false and ``mutate:`` refuses the rule).  Values that are not valid quantities are left to
``gpu-whole-number``.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.applicability import Applies
from policies.quantity import try_parse
from policies.resources import is_extended
from policies.rule import NeedsFacts, Option, RuleContext
from policies.shapes import text
from policies.types import RelOp, Severity, Violation

ID = "gpu-request-limit-mismatch"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "no"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = None
FIXABLE = True
MUTATION_SAFE = False  # lint --fix offers the smaller value; the webhook never guesses a GPU count
SUMMARY = "The request and the limit of a GPU (any extended resource) differ; the API server rejects it."
REMEDIATION = (
    "Set resources.requests.<resource> and resources.limits.<resource> to the same number (or drop the request: "
    "on Pods it defaults to the limit); extended resources cannot be overcommitted."
)
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    for c in ctx.pod.containers:
        requests = c.resource_map("requests")
        limits = c.resource_map("limits")
        for name, requested in requests.items():
            if not isinstance(name, str) or not is_extended(name) or name not in limits:
                continue
            limit = limits[name]
            req_q, lim_q = try_parse(requested), try_parse(limit)
            if req_q is None or lim_q is None or req_q == lim_q:
                continue
            path = (*c.resources_path, "requests", name)
            smaller, larger_key = (requested, "limits") if req_q < lim_q else (limit, "requests")
            yield Violation(
                message=(
                    f"container {c.name!r}: requests.{name} is {text(requested, 40)} "
                    f"but the limit is {text(limit, 40)}; "
                    f"extended resources cannot be overcommitted: set both to the number of GPUs the "
                    f"container needs (the fix takes the smaller, {smaller})"
                ),
                path=path,
                fix=(RelOp("replace", (*c.resources_path, larger_key, name), smaller),),
            )

"""gpu-whole-number: a GPU (any extended resource) quantity is not a whole non-negative number.

The API server validates every container quantity with ``ValidateResourceQuantityValue``
(kubernetes/kubernetes pkg/apis/core/validation/validation.go): a negative value gets "must be
greater than or equal to 0", and for integer resources (``helper.IsIntegerResourceName`` is true
for every extended resource) a value whose milli-value is not a multiple of 1000 gets "must be an
integer".  So ``nvidia.com/gpu: 0.5``, ``500m`` or ``1.5`` is rejected; a fraction of a GPU comes
from MIG profiles, time-slicing/MPS replicas or DRA, never from a fractional quantity.  A value that
is not a quantity at all fails to decode — except an unrendered placeholder (``${GPUS}``, ``$GPUS``,
``{{ .Values.gpus }}``), which is an input error of its own (policies.placeholders), or an Argo
Workflows parameter substituted when the pod is created.  An empty value (``nvidia.com/gpu:``, YAML
null, as a template that rendered nothing leaves it) is no error to the API server: apimachinery
decodes null as a zero quantity (pkg/api/resource/quantity.go ``UnmarshalJSON``), so the container
silently gets none of the resource; the finding says so.

GPUs in pod-level ``spec.resources`` are rejected too: ``validatePodResourceName`` accepts only
``cpu``, ``memory`` and ``hugepages-*`` there (``IsSupportedPodLevelResource``,
k8s.io/component-helpers resource/helpers.go), giving "Unsupported value".

Failing::

    resources:
      limits: {nvidia.com/gpu: 0.5}

    spec:
      resources:                 # pod level
        limits: {nvidia.com/gpu: 1}

Passing::

    resources:
      limits: {nvidia.com/mig-1g.10gb: 1}
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policies.applicability import Applies
from policies.placeholders import quantity_placeholder_in
from policies.quantity import try_parse
from policies.resources import is_extended
from policies.rule import NeedsFacts, Option, RuleContext
from policies.shapes import text
from policies.types import Severity, Violation

ID = "gpu-whole-number"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "no"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = None
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = (
    "A GPU (any extended resource) quantity is not a whole non-negative number, "
    "or GPUs appear in pod-level spec.resources."
)
REMEDIATION = (
    "Request whole GPUs (1, 2, …) in a container's resources; for a fraction of a GPU use MIG profiles, "
    "time-slicing/MPS replicas or DRA."
)
OPTIONS: tuple[Option, ...] = ()

_WHICH = ("limits", "requests")


def _problem(value: Any) -> str | None:
    """What is wrong with a quantity, phrased to follow "<field> is <value>", or None."""
    q = try_parse(value)
    if q is None:
        return "which is not a valid quantity"
    if q < 0:
        return "but quantities must be greater than or equal to 0"
    if q.denominator != 1:
        return "but extended resources must be whole numbers"
    return None


def _empty(container: str, which: str, name: str, other: Any, path: tuple[Any, ...]) -> Violation:
    """``nvidia.com/gpu:`` with nothing after it (a template that rendered nothing): YAML null, which
    apimachinery decodes as a zero quantity (pkg/api/resource/quantity.go ``UnmarshalJSON``: "null"
    gives the zero Quantity).  Alone, the API server admits the container with 0 of the resource; next
    to a count on the other side (limits and requests of an extended resource must be equal), it
    rejects the pod."""
    head = f"container {container!r}: {which}.{name} is empty (null), which the API server reads as 0"
    if other is not None and try_parse(other) not in (None, 0):
        side = "requests" if which == "limits" else "limits"
        message = f"{head}, unlike its {side} ({text(other, 40)}), so the API server rejects the pod: write the count"
    else:
        message = f"{head}, so the container gets no {name}: write the number it needs, or remove the entry"
    return Violation(message=message, path=path)


def _shown(value: Any) -> str:
    shown = text(value, 40)
    return repr(shown) if isinstance(value, str) and try_parse(value) is None else shown


def check(ctx: RuleContext) -> Iterator[Violation]:
    for c in ctx.pod.containers:
        for which in _WHICH:
            for name, value in c.resource_map(which).items():
                if not isinstance(name, str) or not is_extended(name) or quantity_placeholder_in(value):
                    continue  # an unrendered placeholder is an input error, not a quantity
                if value is None:
                    other = c.resource_map("requests" if which == "limits" else "limits").get(name)
                    yield _empty(c.name, which, name, other, (*c.resources_path, which, name))
                    continue
                problem = _problem(value)
                if problem is None:
                    continue
                advice = (
                    "request whole GPUs (for a fraction of a GPU use MIG profiles, time-slicing/MPS replicas or DRA)"
                    if ctx.is_gpu(name)
                    else f"request a whole number of {name}"
                )
                yield Violation(
                    message=f"container {c.name!r}: {which}.{name} is {_shown(value)}, {problem}: {advice}",
                    path=(*c.resources_path, which, name),
                )
    if ctx.pod.shape == "component":
        return  # the component's own resources are its container's, checked above
    pod_resources = ctx.pod.spec.get("resources")
    if not isinstance(pod_resources, dict):
        return
    for which in _WHICH:
        amounts = pod_resources.get(which)
        if not isinstance(amounts, dict):
            continue
        for name in amounts:
            if isinstance(name, str) and ctx.is_gpu(name):
                yield Violation(
                    message=(
                        f"pod-level resources.{which}.{name}: pod-level resources support only cpu, memory and "
                        f"hugepages, so the API server rejects it: move {name} to the resources.limits of the "
                        f"container that uses the GPU"
                    ),
                    path=("resources", which, name),
                )

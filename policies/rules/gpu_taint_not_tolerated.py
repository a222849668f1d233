"""gpu-taint-not-tolerated: every node offering the GPU resource has a taint the pod does not tolerate.

GPU pools are commonly tainted so that only GPU pods land there: GKE taints them
``nvidia.com/gpu=present:NoSchedule``, EKS/AKS guides use ``nvidia.com/gpu`` or ``sku=gpu``
taints.  The scheduler's TaintToleration filter skips a node with a NoSchedule or NoExecute taint
that no toleration matches (k8s.io/api core/v1 ``Toleration.ToleratesTaint``: same effect or an
empty one, same key or an empty one, ``Exists`` or an equal value).  The
ExtendedResourceToleration admission plugin would add ``{key: <resource>, operator: Exists,
effect: NoSchedule}`` for requested extended resources, but it is off by default in
kube-apiserver and never covers taints keyed otherwise.  RuntimeClass tolerations count.

Which nodes count: those that offer every requested GPU resource and match the pod's
nodeSelector/affinity — narrowed to the ones that also have enough GPUs and are not cordoned, when
any do.  The rule fires when none of them is tolerated (when the selector matches no GPU node,
when no offering node at all is tolerated).  When some are tolerated but fail another filter,
gpu-unschedulable explains it instead.

Fix: only what the ExtendedResourceToleration admission plugin would add — for a taint keyed by
an extended resource the pod requests (``nvidia.com/gpu``), ``{key: <resource>, operator: Exists,
effect: <the taint's effect>}`` (plugin/pkg/admission/extendedresourcetoleration: the pod asked for
that resource, so tolerating the taint that guards it changes nothing the pod gets).  Taints keyed
otherwise (``dedicated=training``, ``sku=gpu``) are how administrators reserve pools for some
workloads: the fix never tolerates them, and when every reachable group needs one, no fix is
offered and the message names the tolerations for a person to judge.  The fix opens the group
needing the fewest tolerations (then the largest group), appends to ``spec.tolerations`` (created
when absent) and never repeats one.  No fix is offered when the selector matches no GPU node,
since which pool the pod is meant for is then unknown.

Failing (GPU nodes tainted ``nvidia.com/gpu=present:NoSchedule``)::

    spec:
      containers:
      - resources: {limits: {nvidia.com/gpu: 1}}

Passing::

    spec:
      tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      containers:
      - resources: {limits: {nvidia.com/gpu: 1}}
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.applicability import Applies
from policies.podresources import pod_requests
from policies.resources import is_extended
from policies.rule import NeedsFacts, Option, RuleContext
from policies.rulekit import with_diagnosis
from policies.scheduling import (
    Diagnosis,
    fix_target,
    opened_by_resource_tolerations,
    tolerations_opening,
)
from policies.types import RelOp, RelPath, Severity, Violation
from policies.wording import noun

ID = "gpu-taint-not-tolerated"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = True
APPLIES: Applies = None
FIXABLE = True
MUTATION_SAFE = True
SUMMARY = "Every node that offers the GPU resource carries a NoSchedule/NoExecute taint the pod does not tolerate."
REMEDIATION = "Add tolerations for the GPU nodes' taints (spec.tolerations)."
OPTIONS: tuple[Option, ...] = ()


def _yaml_flow(tol: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in tol.items()) + "}"


def _fix(spec: Mapping[str, Any], tolerations: list[dict[str, str]]) -> tuple[tuple[RelOp, ...], RelPath]:
    existing = spec.get("tolerations")
    if isinstance(existing, list):
        return tuple(RelOp("add", ("tolerations", "-"), t) for t in tolerations), ("tolerations",)
    if existing is None:
        return (RelOp("add", ("tolerations",), tolerations),), ()
    return (), ("tolerations",)  # malformed: left to the author


@with_diagnosis
def check(ctx: RuleContext, diagnosis: Diagnosis) -> Iterator[Violation]:
    requests = diagnosis.requests
    if not diagnosis.taints_blocked:
        return
    scope = diagnosis.taint_scope
    names = ", ".join(sorted(requests))
    per_group = "; ".join(f"{v.describe()}: {', '.join(str(t) for t in v.untolerated)}" for v in scope)
    which = "every node the pod selects that offers" if diagnosis.selected else "every node that offers"
    message = f"{which} {names} has a taint the pod does not tolerate ({per_group})"
    if not diagnosis.selected:
        # The selector matches no GPU node (gpu-node-selector-mismatch): which pool the pod is
        # meant for is unknown, so no tolerations are guessed.
        yield Violation(message=message + "; add tolerations for the pool the pod is meant for", path=("tolerations",))
        return
    requested = frozenset(pod_requests(ctx.pod, is_extended))
    fixable = opened_by_resource_tolerations(scope, requested)
    if not fixable:
        target = fix_target(scope)
        reserved = sorted({str(taint) for taint in target.untolerated if taint.key not in requested})
        yield Violation(
            message=(
                f"{message}; {', '.join(reserved)} {noun(len(reserved), 'reserves', 'reserve')} the pool for chosen "
                f"workloads, so no toleration is added automatically: if the pod belongs there, add "
                f"{', '.join(_yaml_flow(t) for t in tolerations_opening(target, requested))}"
                + (f" to reach {target.describe()}" if len(scope) > 1 else "")
            ),
            path=("tolerations",) if isinstance(ctx.pod.spec.get("tolerations"), list) else (),
        )
        return
    target = fix_target(fixable)
    tolerations = tolerations_opening(target, requested)
    fix, path = _fix(ctx.pod.spec, tolerations)
    yield Violation(
        message=f"{message}; add tolerations {', '.join(_yaml_flow(t) for t in tolerations)}"
        + (f" to reach {target.describe()}" if len(scope) > 1 else ""),
        path=path,
        fix=fix,
    )

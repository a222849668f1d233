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

Fix: the tolerations that open the group needing the fewest of them (then the largest group)
are appended; ``spec.tolerations`` is created when absent, and nothing already tolerated is
added again.  No fix is offered when the selector matches no GPU node, since which pool the pod
is meant for is then unknown.  A taint keyed by a GPU resource name (``nvidia.com/gpu``), or
without a value, gets ``operator: Exists``
with the taint's effect (the ExtendedResourceToleration convention: the value carries no meaning);
any other taint gets ``operator: Equal`` with its value, so that tolerating
``dedicated=training`` does not also tolerate every other ``dedicated`` pool.

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

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from policies.facts import Taint
from policies.rule import NeedsFacts, Option, RuleContext
from policies.rulekit import with_diagnosis
from policies.scheduling import Diagnosis, GroupVerdict
from policies.types import RelOp, RelPath, Severity, Violation

ID = "gpu-taint-not-tolerated"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = True
FIXABLE = True
SUMMARY = "Every node that offers the GPU resource carries a NoSchedule/NoExecute taint the pod does not tolerate."
REMEDIATION = "Add tolerations for the GPU nodes' taints (spec.tolerations)."
OPTIONS: tuple[Option, ...] = ()


def toleration_for(taint: Taint, is_gpu: Callable[[str], bool]) -> dict[str, str]:
    if is_gpu(taint.key) or not taint.value:
        return {"key": taint.key, "operator": "Exists", "effect": taint.effect}
    return {"key": taint.key, "operator": "Equal", "value": taint.value, "effect": taint.effect}


def _fix_target(scope: list[GroupVerdict]) -> GroupVerdict:
    """The group reachable with the fewest new tolerations (then the one with most nodes)."""
    return min(scope, key=lambda v: (len(v.untolerated), -v.size))


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
    nodes = "every node the pod selects that offers" if diagnosis.selected else "every node that offers"
    message = f"{nodes} {names} has a taint the pod does not tolerate ({per_group})"
    if not diagnosis.selected:
        # The selector matches no GPU node (gpu-node-selector-mismatch): which pool the pod is
        # meant for is unknown, so no tolerations are guessed.
        yield Violation(message=message + "; add tolerations for the pool the pod is meant for", path=("tolerations",))
        return
    target = _fix_target(scope)
    tolerations: list[dict[str, str]] = []
    for taint in target.untolerated:
        tol = toleration_for(taint, ctx.is_gpu)
        if tol not in tolerations:
            tolerations.append(tol)
    fix, path = _fix(ctx.pod.spec, tolerations)
    yield Violation(
        message=f"{message}; add tolerations {', '.join(_yaml_flow(t) for t in tolerations)}"
        + (f" to reach {target.describe()}" if len(scope) > 1 else ""),
        path=path,
        fix=fix,
    )

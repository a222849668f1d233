"""gpu-dra-claim-reference: container ``resources.claims`` and ``spec.resourceClaims`` disagree.

With Dynamic Resource Allocation a container gets a device (a GPU through the
``gpu.nvidia.com`` DeviceClass, say) by naming a pod-level claim in ``resources.claims``; the pod
declares each claim in ``spec.resourceClaims`` with exactly one source.  The API server rejects
(kubernetes/kubernetes pkg/apis/core/validation/validation.go):

* a container claim whose name is not in ``spec.resourceClaims`` (``validateResourceClaimNames``:
  "must be one of the names in pod.spec.resourceClaims");
* a container claim without a name ("Required"), or the same claim (and request) twice in one
  container ("Duplicate");
* a ``spec.resourceClaims`` entry with neither or both of ``resourceClaimName`` and
  ``resourceClaimTemplateName`` ("must specify one of: resourceClaimName,
  resourceClaimTemplateName" / "at most one of ... may be specified"), and duplicate names.

The ``source:`` wrapper of Kubernetes ≤ 1.30 was replaced by the inlined fields in 1.31
(k8s.io/api core/v1 ``PodResourceClaim``), so an old manifest with ``source:`` now has neither.

Entries naming different ``request``\\ s of one claim are distinct.  Components whose pod is built
by an operator (TrainJob's ``resourcesPerNode``) are not checked against ``spec.resourceClaims``,
which the operator supplies.  An Argo Workflows template is checked as the pod the controller
builds: the workflow's ``spec.resourceClaims`` apply to every template that declares none of its
own (policies.argo); where a ``podSpecPatch`` may add claims, a container claim is not taken to be
undeclared.

Failing::

    spec:
      resourceClaims:
      - name: gpu
        resourceClaimTemplateName: single-gpu
      containers:
      - name: app
        resources:
          claims: [{name: gpus}]          # no pod claim called "gpus"

Passing::

    spec:
      resourceClaims:
      - name: gpu
        resourceClaimTemplateName: single-gpu
      containers:
      - name: app
        resources:
          claims: [{name: gpu}]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policies.applicability import Applies, has_dra_claims
from policies.rule import NeedsFacts, Option, RuleContext
from policies.types import RelPath, Severity, Violation

ID = "gpu-dra-claim-reference"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "no"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = has_dra_claims  # judges spec.resourceClaims and resources.claims only
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "Container resources.claims and pod spec.resourceClaims are inconsistent; the API server rejects the pod."
REMEDIATION = (
    "Give every container claim the name of a spec.resourceClaims entry, list each claim once per container, "
    "and give each spec.resourceClaims entry a unique name and exactly one of resourceClaimName or "
    "resourceClaimTemplateName."
)
OPTIONS: tuple[Option, ...] = ()

_SOURCES = ("resourceClaimName", "resourceClaimTemplateName")


def _pod_claims(ctx: RuleContext) -> tuple[set[str], list[Violation]]:
    """The declared claim names, and the problems of ``spec.resourceClaims`` itself."""
    names: set[str] = set()
    problems: list[Violation] = []
    entries = ctx.pod.spec.get("resourceClaims")
    if not isinstance(entries, list):
        return names, problems
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        name = entry.get("name")
        at: RelPath = ("resourceClaims", i)
        if not isinstance(name, str) or not name:
            problems.append(Violation(f"spec.resourceClaims[{i}] has no name; name the claim", at))
        elif name in names:
            problems.append(
                Violation(
                    f"spec.resourceClaims[{i}]: the claim name {name!r} is declared twice; claim names must be "
                    f"unique within the pod: rename or remove one",
                    (*at, "name"),
                )
            )
        else:
            names.add(name)
        label = repr(name) if isinstance(name, str) and name else f"#{i}"
        sources = [key for key in _SOURCES if entry.get(key)]
        if len(sources) == 2:
            problems.append(
                Violation(
                    f"pod claim {label} sets both resourceClaimName and resourceClaimTemplateName; "
                    f"exactly one may be set: keep one",
                    (*at, "resourceClaimTemplateName"),
                )
            )
        elif not sources:
            hint = (
                " (the `source:` wrapper was replaced by these inlined fields in Kubernetes 1.31)"
                if "source" in entry
                else ""
            )
            problems.append(
                Violation(
                    f"pod claim {label} sets neither resourceClaimName nor resourceClaimTemplateName{hint}; "
                    f"set exactly one of them",
                    at,
                )
            )
    return names, problems


def _claim_key(claim: dict[str, Any]) -> tuple[str, str]:
    request = claim.get("request")
    return str(claim.get("name")), request if isinstance(request, str) else ""


def check(ctx: RuleContext) -> Iterator[Violation]:
    checks_pod = ctx.pod.shape != "component"
    declared, problems = _pod_claims(ctx) if checks_pod else (set(), [])
    yield from problems
    known = ", ".join(sorted(declared)) if declared else "none"
    for c in ctx.pod.containers:
        claims = c.resources.get("claims")
        if not isinstance(claims, list):
            continue
        seen: set[tuple[str, str]] = set()
        for i, claim in enumerate(claims):
            if not isinstance(claim, dict):
                continue
            at: RelPath = (*c.resources_path, "claims", i)
            name = claim.get("name")
            if not isinstance(name, str) or not name:
                yield Violation(f"container {c.name!r}: resources.claims[{i}] has no name; name a pod claim", at)
                continue
            key = _claim_key(claim)
            if key in seen:
                what = f"{name!r} (request {key[1]!r})" if key[1] else repr(name)
                yield Violation(
                    f"container {c.name!r}: resources.claims lists claim {what} twice; remove the duplicate", at
                )
            seen.add(key)
            if checks_pod and name not in declared and not ctx.pod.spec_patched:
                yield Violation(
                    f"container {c.name!r}: resources.claims[{i}] names claim {name!r}, which is not in "
                    f"spec.resourceClaims (declared: {known}); add it there or fix the name",
                    (*at, "name"),
                )

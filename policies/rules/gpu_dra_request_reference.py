"""gpu-dra-request-reference: a container asks for a request its claim does not have.

A container may take only some of a claim's devices: ``resources.claims: [{name: <pod claim>,
request: <request>}]``.  The pod is a separate object from the claim, so the API server checks only
that ``request`` is a DNS label (kubernetes pkg/apis/core/validation ``validateResourceClaimNames``),
never that the claim has such a request; the kubelet then hands the container only the devices
allocated for that request name (pkg/kubelet/cm/dra/claiminfo.go ``cdiDevicesAsList``: "When the
request name is non-empty, only devices relevant for that request are returned") — none, so the
container starts without its GPU.  A ``firstAvailable`` request is referenced by its own name, not
``request/subrequest`` (the API server rejects the slash).

Inside a claim, ``constraints[].requests`` and ``config[].requests`` must name its requests (or
``request/subrequest``); the API server rejects other names (pkg/apis/resource/validation
``validateRequestNameRef``: "must be the name of a request in the claim or the name of a request and
a subrequest separated by '/'"), which this rule reports on ResourceClaims and ResourceClaimTemplates.

The claim is looked up in the same input, then in the cluster facts; an unresolved claim is not
judged.

Failing (NVIDIA/k8s-dra-driver-gpu@22407113 demo/specs/quickstart/v1/gpu-test4.yaml, whose template
``mig-devices`` has requests mig-1g-5gb-0, mig-1g-5gb-1, mig-2g-10gb and mig-3g-20gb, with one
container's request mistyped)::

      containers:
      - name: ctr2
        resources:
          claims:
          - name: mig-devices
            request: mig-2g-10gb-0        # no such request in the template

Passing (the demo as published)::

          - name: mig-devices
            request: mig-2g-10gb
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.applicability import Applies, has_dra_claims
from policies.dra.claims import REQUEST_REF
from policies.dra.objects import DNS_LABEL
from policies.dra.podclaims import claim_uses, pod_claims
from policies.dra.subjects import object_subject
from policies.rule import NeedsFacts, ObjectContext, Option, RuleContext
from policies.types import Severity, Violation
from policies.wording import did_you_mean, suggest

ID = "gpu-dra-request-reference"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "partly"
NEEDS_SCHEDULING: bool = False
APPLIES: Applies = has_dra_claims  # judges containers' resources.claims only
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "A container's resources.claims request names no request of its claim; the container gets no device."
REMEDIATION = (
    "Name one of the claim's requests in resources.claims[].request (the parent request for "
    "firstAvailable), or drop `request` to get every device of the claim."
)
OPTIONS: tuple[Option, ...] = ()


def check(ctx: RuleContext) -> Iterator[Violation]:
    claims = {c.name: c for c in pod_claims(ctx.pod, ctx.namespace, ctx.dra)}
    for use in claim_uses(ctx.pod):
        if use.request is None:
            continue
        at = (*use.path, "request")
        who = f"container {use.container.name!r}"
        if "/" in use.request:
            parent = use.request.split("/", 1)[0]
            yield Violation(
                f"{who}: resources.claims[{use.index}].request {use.request!r} names a subrequest; a container "
                f"names the parent request ({parent!r}) and gets whichever subrequest was allocated, and the API "
                "server rejects the slash",
                at,
            )
            continue
        claim = claims.get(use.claim)
        spec = claim.spec if claim is not None else None
        if claim is None or spec is None or not DNS_LABEL.fullmatch(use.request):
            continue
        if spec.request(use.request) is not None:
            continue
        names = [r.name for r in spec.requests]
        close = suggest(use.request, names)
        hint = f"; {did_you_mean(close, quote=True)}" if close else ""
        listed = ", ".join(names) if names else "none"
        yield Violation(
            f"{who}: resources.claims[{use.index}] asks for request {use.request!r} of pod claim {use.claim!r}, "
            f"but {claim.label} has no such request (its requests: {listed}){hint}; the kubelet gives the "
            "container only devices allocated for that request name, so it gets none",
            at,
        )


def check_object(ctx: ObjectContext) -> Iterator[Violation]:
    subject = object_subject(ctx.obj)
    if subject is None:
        return
    names = ", ".join(r.name for r in subject.spec.requests) or "none"
    for problem in subject.spec.problems:
        if problem.message == REQUEST_REF:
            yield Violation(
                f"{problem.message} (the claim's requests: {names}); the API server rejects the claim",
                subject.path(problem.pointer),
                anchor="object",
            )

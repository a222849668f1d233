"""The claims a DRA rule judges, wherever they come from, and where its findings go.

A ResourceClaim or ResourceClaimTemplate is judged as an object (an object rule; findings point
into it), and a pod's claims that resolve to the *cluster's* claims and templates are judged with
the pod (findings point at the pod's ``spec.resourceClaims[i]`` reference): the pod is what the
user is creating, and the template may have been fine when it was made.  Claims found in the same
input are judged as objects only, so each problem is reported once, where it is.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from policies import pointer
from policies.dra.claims import parse_resource_claim, parse_resource_claim_template
from policies.dra.facts import DraView
from policies.dra.objects import ClaimSpec, ExactRequest, ResourceClaim
from policies.dra.podclaims import PodClaim, pod_claims
from policies.dra.reading import is_dra
from policies.podspec import PodTemplate
from policies.types import RelPath

CLAIM_KINDS = ("ResourceClaim", "ResourceClaimTemplate")


@dataclass(frozen=True, slots=True)
class Subject:
    """A claim spec under judgement.

    ``prefix`` starts every message (empty for the object itself); ``anchor``/``base`` place a
    pointer of the claim object: into the object itself, or at the pod's claim reference.
    """

    spec: ClaimSpec
    label: str  # "ResourceClaimTemplate gpu-test1/single-gpu"
    key: str  # "gpu-test1/single-gpu", as the allocator names claims
    namespace: str
    allocated: bool
    prefix: str = ""
    base: RelPath | None = None  # the pod claim reference; None: paths point into the object

    def path(self, claim_pointer: str) -> RelPath:
        if self.base is not None:
            return self.base
        return tuple(pointer.split(claim_pointer))

    @property
    def anchor(self) -> str:
        return "spec" if self.base is not None else "object"

    def say(self, message: str) -> str:
        return self.prefix + message


def object_subject(obj: Mapping[str, Any]) -> Subject | None:
    """A ResourceClaim or ResourceClaimTemplate object as a subject (None for other objects)."""
    if not is_dra(obj) or obj.get("kind") not in CLAIM_KINDS:
        return None
    if obj.get("kind") == "ResourceClaim":
        claim = parse_resource_claim(obj)
        spec, name, namespace = claim.spec, claim.name, claim.namespace
        allocated = claim.allocation is not None
    else:
        template = parse_resource_claim_template(obj)
        spec, name, namespace, allocated = template.spec, template.name, template.namespace, False
    key = f"{namespace + '/' if namespace else ''}{name}"
    return Subject(spec, f"{obj.get('kind')} {key}", key, namespace, allocated)


def pod_subject(claim: PodClaim) -> Subject | None:
    """A pod claim resolved to the cluster's claim or template."""
    spec = claim.spec
    if spec is None or not claim.from_cluster:
        return None
    owner = claim.resolved.spec_owner if claim.resolved is not None else None
    allocated = isinstance(owner, ResourceClaim) and owner.allocation is not None
    prefix = f"pod claim {claim.name!r} uses {claim.label}: "
    namespace = owner.namespace if owner is not None else ""
    return Subject(spec, claim.label, claim.key, namespace, allocated, prefix, claim.path)


def unallocated_pod_subjects(pod: PodTemplate, namespace: str, dra: DraView) -> Iterator[Subject]:
    """The pod's claims that resolve to a cluster claim or template not yet allocated: what a rule
    on the pod judges (an allocated claim has its devices already)."""
    for claim in pod_claims(pod, namespace, dra):
        subject = pod_subject(claim)
        if subject is not None and not subject.allocated:
            yield subject


def alternatives(spec: ClaimSpec) -> Iterator[ExactRequest]:
    """Every ``exactly`` request and ``firstAvailable`` subrequest, in order."""
    for request in spec.requests:
        yield from request.alternatives

"""A pod's DRA claims: its ``spec.resourceClaims`` resolved to claims and templates, and the
containers' ``resources.claims`` that use them.

A pod claim names a ResourceClaim (``resourceClaimName``, shared, in the pod's namespace) or a
ResourceClaimTemplate (``resourceClaimTemplateName``: a claim is generated per pod from it) (k8s.io/api
core/v1 ``PodResourceClaim``).  Resolution looks in the input first, then in the cluster
(:class:`policies.dra.facts.DraView`).  A container refers to a claim by the pod claim's name and
optionally to one of its requests (``ResourceClaim.request``; a ``firstAvailable`` request is named
by its parent request).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from policies.dra.facts import DraView, Resolved
from policies.dra.objects import ClaimSpec, ResourceClaim, ResourceClaimTemplate
from policies.podspec import ContainerRef, PodTemplate
from policies.shapes import as_dict, as_list
from policies.types import RelPath

SOURCES = ("resourceClaimName", "resourceClaimTemplateName")


@dataclass(frozen=True, slots=True)
class PodClaim:
    """One ``spec.resourceClaims`` entry and what it resolves to (``resolved`` None: not found)."""

    index: int
    name: str
    source: str  # resourceClaimName | resourceClaimTemplateName
    target: str
    resolved: Resolved | None

    @property
    def path(self) -> RelPath:
        return ("resourceClaims", self.index, self.source)

    @property
    def spec(self) -> ClaimSpec | None:
        return self.resolved.spec_owner.spec if self.resolved is not None else None

    @property
    def from_cluster(self) -> bool:
        return self.resolved is not None and self.resolved.origin == "cluster"

    @property
    def claim(self) -> ResourceClaim | None:
        owner = self.resolved.spec_owner if self.resolved is not None else None
        return owner if isinstance(owner, ResourceClaim) else None

    @property
    def label(self) -> str:
        """``ResourceClaimTemplate ns/name`` as messages name it."""
        owner = self.resolved.spec_owner if self.resolved is not None else None
        kind = "ResourceClaimTemplate" if self.source == "resourceClaimTemplateName" else "ResourceClaim"
        namespace = owner.namespace if owner is not None else ""
        where = " (in the cluster)" if self.from_cluster else ""
        return f"{kind} {namespace + '/' if namespace else ''}{self.target}{where}"

    @property
    def key(self) -> str:
        """How the allocator names the claim in its messages."""
        owner = self.resolved.spec_owner if self.resolved is not None else None
        if isinstance(owner, ResourceClaimTemplate) or owner is None:
            return f"pod claim {self.name} (from template {self.target})"
        return f"{owner.namespace}/{owner.name}" if owner.namespace else owner.name


def object_namespace(obj: dict[str, Any]) -> str:
    namespace = as_dict(obj.get("metadata")).get("namespace")
    return namespace if isinstance(namespace, str) else ""


def pod_claims(pod: PodTemplate, namespace: str, dra: DraView) -> list[PodClaim]:
    """The pod's claims with exactly one source set, resolved where possible."""
    out: list[PodClaim] = []
    for i, entry in enumerate(as_list(pod.spec.get("resourceClaims"))):
        entry = as_dict(entry)
        name = entry.get("name")
        sources = [(k, entry[k]) for k in SOURCES if isinstance(entry.get(k), str) and entry[k]]
        if not isinstance(name, str) or not name or len(sources) != 1:
            continue  # gpu-dra-claim-reference reports these
        source, target = sources[0]
        if source == "resourceClaimTemplateName":
            resolved = dra.template(namespace, target)
        else:
            resolved = dra.claim(namespace, target)
        out.append(PodClaim(i, name, source, target, resolved))
    return out


@dataclass(frozen=True, slots=True)
class ClaimUse:
    """A container's ``resources.claims[i]``."""

    container: ContainerRef
    index: int
    claim: str
    request: str | None

    @property
    def path(self) -> RelPath:
        return (*self.container.resources_path, "claims", self.index)


def claim_uses(pod: PodTemplate) -> Iterator[ClaimUse]:
    for c in pod.containers:
        for i, item in enumerate(as_list(c.resources.get("claims"))):
            item = as_dict(item)
            name = item.get("name")
            if not isinstance(name, str) or not name:
                continue
            request = item.get("request")
            yield ClaimUse(c, i, name, request if isinstance(request, str) and request else None)

"""gpu-dra-mixed-allocation: the same node hands out its GPUs through both the device plugin and DRA.

A node may serve a GPU through the device plugin (an extended resource such as ``nvidia.com/gpu`` in
its allocatable) or through a DRA driver (ResourceSlices), not both: each advertises every GPU, and
neither knows what the other allocated, so two pods can be given the same GPU.  NVIDIA's chart refuses
to enable its GPU kubelet plugin by default for this reason ("this DRA driver cannot be deployed
alongside the standard GPU device plugin on the same node", NVIDIA/k8s-dra-driver-gpu@22407113
deployments/helm/dra-driver-nvidia-gpu/templates/validation.yaml; NVIDIA/gpu-operator#1541 rejects
enabling both), and KEP-5004 states "One node in a cluster cannot have both extended resource backed
by DRA, and same named extended resource backed by device plugin at the same time"
(kubernetes/enhancements keps/sig-scheduling/5004-dra-extended-resource).

gpuguard finds such nodes in the cluster facts (``policies.dra.capacity``): a device-plugin resource
of a vendor whose DRA driver publishes devices on the node (``nvidia.com/gpu``, ``nvidia.com/mig-*`` and
``nvidia.com/gpu.shared`` next to ``gpu.nvidia.com`` devices), or a DeviceClass whose
``extendedResourceName`` the node also advertises while it reaches the class's devices.

The problem is the node's, whatever runs on it, so it is said once for the cluster (``check_cluster``):
a warning on each such Node in ``gpuguard audit``, a note in ``gpuguard lint --cluster``.  Fix the
nodes (disable the device plugin there, e.g. with the GPU Operator's
``nvidia.com/gpu.deploy.device-plugin=false`` node label).  A pod that may get its GPU on such a node
(through the resource or a claim) hears only what that means for it, at the request: an info naming
the request and the mixed nodes it may land on, not one more warning per workload about the same
nodes.  A DeviceClass in the input whose ``extendedResourceName`` such nodes advertise is a warning of
its own: the class makes the combination.

Failing (NVIDIA/k8s-dra-driver-gpu@22407113 demo/specs/extended-resources/gpu-full.yaml, whose
prerequisites say "NVIDIA device plugin for Kubernetes is not installed or disabled", on a node
that still runs the device plugin and the DRA driver)::

    containers:
    - name: cuda-container
      image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0
      resources:
        limits:
          nvidia.com/gpu: 1

Passing: the same pod where each GPU node runs only one of them.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.applicability import Applies, Profile
from policies.dra.facts import DraView
from policies.dra.matching import cached_match
from policies.dra.podclaims import PodClaim, pod_claims
from policies.dra.reading import is_dra
from policies.dra.slices import parse_device_class
from policies.facts import ClusterFacts, NodeFacts
from policies.rule import NeedsFacts, NodeProblem, ObjectContext, Option, RuleContext
from policies.scheduling import constraints_for, request_sites
from policies.types import RelPath, Severity, Violation
from policies.wording import noun, plural

ID = "gpu-dra-mixed-allocation"
DEFAULT_SEVERITY = Severity.WARNING
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = True


def _applies(profile: Profile) -> bool:
    """``check`` reports nodes with ``dra_conflicts`` or the pod's claims (spec.resourceClaims)."""
    return profile.snapshot.dra_conflicts or profile.template.dra_claims


APPLIES: Applies = _applies
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "A node the pod may use serves the same GPUs through both the device plugin and DRA (double allocation)."
REMEDIATION = (
    "Run either the device plugin or the DRA driver on each GPU node (e.g. label DRA nodes "
    "nvidia.com/gpu.deploy.device-plugin=false for the GPU Operator), or keep the pod off the mixed nodes."
)
OPTIONS: tuple[Option, ...] = ()
MAX_LISTED = 3


def _names(nodes: list[NodeFacts]) -> str:
    shown = ", ".join(n.name for n in nodes[:MAX_LISTED])
    return shown + (f" and {len(nodes) - MAX_LISTED} more" if len(nodes) > MAX_LISTED else "")


def check(ctx: RuleContext) -> Iterator[Violation]:
    nodes = [n for n in ctx.facts.nodes if n.dra_conflicts]
    if not nodes:
        return
    cons = constraints_for(ctx.pod, ctx.facts)
    usable = [n for n in nodes if not n.unschedulable and cons.selector_ok(n) and not cons.untolerated(n)]
    requested = ctx.gpu_requests()
    reported: set[str] = set()
    for resource in sorted(requested):
        hit = [n for n in usable if any(r == resource for r, _ in n.dra_conflicts)]
        sites = request_sites(ctx.pod, resource)
        if not hit or not sites:
            continue
        what = next(w for r, w in hit[0].dra_conflicts if r == resource)
        reported.add(resource)
        yield Violation(
            f"the pod asks for {resource} and may land on {noun(len(hit), 'node')} {_names(hit)}, where "
            f"{what} also serves it through DRA{_share(len(hit), _landing(ctx))}: the pod may get a GPU another pod "
            "already has (a problem of the nodes, said once for the cluster)",
            sites[0][1],
            severity=Severity.INFO,
        )
    claims = [c for c in pod_claims(ctx.pod, ctx.namespace, ctx.dra) if c.spec is not None]
    view = ctx.dra
    inventory = view.inventory
    if not claims or inventory is None or view.cluster is None:
        return
    cache = view.cluster.match_cache
    alternatives = [(claim, alt) for claim in claims for r in (claim.spec.requests if claim.spec else ())
                    for alt in r.alternatives]

    def serves_claims(node: NodeFacts) -> PodClaim | None:
        for candidate in inventory.reach(node).candidates:
            for claim, alt in alternatives:
                device_class = view.device_class(alt.device_class_name)
                if device_class is None:
                    continue
                if (cached_match(device_class.selectors, candidate.id, candidate.device, cache) is True
                        and cached_match(alt.selectors, candidate.id, candidate.device, cache) is True):
                    return claim
        return None

    hits = [(n, c) for n in usable if any(r not in reported for r, _ in n.dra_conflicts)
            if (c := serves_claims(n)) is not None]
    if not hits:
        return
    hit = [n for n, _ in hits]
    resource, what = hit[0].dra_conflicts[0]
    at: RelPath = hits[0][1].path
    yield Violation(
        f"pod claim {hits[0][1].name!r} may get its devices on {noun(len(hit), 'node')} {_names(hit)}, where the "
        f"device plugin also advertises them as {resource} ({what} publishes them): a GPU "
        "the claim gets may be in use by a device-plugin pod (a problem of the nodes, said once for the cluster)",
        at,
        severity=Severity.INFO,
    )


def _landing(ctx: RuleContext) -> int:
    """How many nodes the pod can land on (offering and fitting its GPUs, selected, tolerated)."""
    return sum(v.size for v in ctx.verdicts() if v.passes and v.group.representative.pool is None)


def _share(hit: int, landing: int) -> str:
    """Whether the pod can avoid the mixed nodes: what is specific to it."""
    if hit >= landing:
        return f", and {noun(hit, 'it is', 'they are')} every node it may land on"
    return f" ({hit} of the {plural(landing, 'node')} it may land on)"


def check_cluster(facts: ClusterFacts) -> Iterator[NodeProblem]:
    """Each node that serves a resource both ways, once per resource."""
    for node in facts.nodes:
        for resource, what in node.dra_conflicts:
            yield NodeProblem(
                node.name,
                f"{resource} is advertised through the device plugin while {what} serves the same GPUs through "
                "DRA: both hand out every GPU, so two pods can be given the same one",
                ("status", "allocatable", resource),
                key=f"{resource} {what}",
            )


def _class_conflicts(facts: ClusterFacts, view: DraView, obj: dict[str, object]) -> Iterator[Violation]:
    device_class = parse_device_class(obj)
    resource = device_class.extended_resource_name
    inventory = view.inventory
    if not resource or inventory is None or view.cluster is None:
        return
    cache = view.cluster.match_cache
    hit = []
    for node in facts.nodes:
        if node.allocatable.get(resource, 0) <= 0 or resource in dict(node.dra_served):
            continue
        if any(cached_match(device_class.selectors, c.id, c.device, cache) is True
               for c in inventory.reach(node).candidates):
            hit.append(node)
    if hit:
        yield Violation(
            f"{noun(len(hit), 'node')} {_names(hit)} {noun(len(hit), 'advertises', 'advertise')} {resource} "
            f"through the device plugin and {noun(len(hit), 'reaches', 'reach')} devices of DeviceClass "
            f"{device_class.name}: a node must not serve one extended resource both ways (KEP-5004); the device "
            "plugin serves it there, and the same GPUs can also be allocated through claims of this class",
            ("spec", "extendedResourceName"),
            anchor="object",
        )


def check_object(ctx: ObjectContext) -> Iterator[Violation]:
    if is_dra(ctx.obj) and ctx.obj.get("kind") == "DeviceClass":
        yield from _class_conflicts(ctx.facts, ctx.dra, ctx.obj)

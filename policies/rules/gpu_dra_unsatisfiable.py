"""gpu-dra-unsatisfiable: no node can allocate the claim's devices, so the pod stays Pending.

The scheduler allocates a pod's claims on one node at a time: every request needs ``count`` devices
(or all matching ones) that match its DeviceClass and selectors, are not allocated to another claim,
are reachable from the node and whose NoSchedule/NoExecute device taints it tolerates, and that
satisfy the claim's ``matchAttribute`` constraints; otherwise the pod waits with ``cannot allocate
all claims``, which does not say why (kubernetes#125826).  gpuguard replays the scheduler's
allocator (``policies.dra.allocator``, after k8s.io/dynamic-resource-allocation
structured/internal/stable) against the cluster's ResourceSlices, DeviceClasses and allocated
claims, node by node, and says which step leaves no device: the class, a selector (naming it), the
devices in use, their taints, or the constraints.

On a ResourceClaim or ResourceClaimTemplate it asks whether *any* node could allocate it.  On a pod
it asks whether a node the pod can land on — its nodeSelector, required node affinity, tolerations
and RuntimeClass, and not cordoned — can allocate all its claims together (with the devices a
DRA-served extended resource such as ``nvidia.com/gpu`` takes there); a claim already allocated pins
the pod to the nodes that reach its devices.  A claim from the same input that no node can allocate
is reported on that claim, not again on the pod.

An error when the search is exhaustive; a warning, saying "possibly", when gpuguard cannot be sure:
selectors it cannot evaluate, the search budget, partitionable or shared devices, or node pools that
scale up (their devices are not known in advance).  It needs the cluster's ResourceSlices.

Failing (NVIDIA/k8s-dra-driver-gpu@22407113 tests/bats/specs/gpu-cel-nomatch.yaml, which NVIDIA's
suite expects to stay Pending)::

    apiVersion: resource.k8s.io/v1
    kind: ResourceClaimTemplate
    metadata: {name: rct-cel-nomatch}
    spec:
      spec:
        devices:
          requests:
          - name: gpu
            exactly:
              deviceClassName: gpu.nvidia.com
              selectors:
              - cel:
                  expression: 'device.attributes["gpu.nvidia.com"].productName == "NONEXISTENT-GPU-XYZ"'

Passing (demo/specs/quickstart/v1/gpu-test1.yaml, on a cluster with a free GPU)::

          requests:
          - name: gpu
            exactly:
              deviceClassName: gpu.nvidia.com
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from policies import pointer
from policies.applicability import Applies, has_dra_claims
from policies.digest import digest
from policies.dra.allocator import ClaimToAllocate, Verdict
from policies.dra.cel import compile_selector
from policies.dra.claims import parse_claim_spec
from policies.dra.facts import DraView
from policies.dra.feasibility import Feasibility, explain, feasibility
from policies.dra.inventory import Inventory
from policies.dra.objects import DeviceID
from policies.dra.podclaims import PodClaim, pod_claims
from policies.dra.subjects import Subject, alternatives, object_subject
from policies.facts import ClusterFacts, NodeFacts
from policies.memo import DraVerdictKey
from policies.podresources import container_requests
from policies.podspec import runnable_containers
from policies.rule import NeedsFacts, ObjectContext, Option, RuleContext
from policies.scheduling import constraints_for
from policies.types import RelPath, Severity, Violation
from policies.wording import noun

ID = "gpu-dra-unsatisfiable"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = True
APPLIES: Applies = has_dra_claims  # judges the pod's claims (spec.resourceClaims) only
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "No node can allocate the DRA claim's devices (class, selectors, free devices, taints, constraints)."
REMEDIATION = (
    "Relax what the claim asks for (count, selectors, constraints), tolerate the device taints, free devices "
    "in use, or let the pod run on the nodes that have the devices."
)
OPTIONS: tuple[Option, ...] = ()
EXTENDED = "extended resources (served by DRA)"  # the claim the scheduler makes for them (KEP-5004)


def _ready(view: DraView, specs: Sequence[ClaimToAllocate]) -> Inventory | None:
    """The inventory, when every class the claims name is known (a missing one is gpu-dra-device-class's)
    and every selector compiles."""
    inventory = view.inventory
    if inventory is None:
        return None
    for claim in specs:
        for alt in alternatives(claim.spec):
            if alt.device_class_name not in inventory.classes:
                return None
            if any(not compile_selector(s.expression).ok for s in alt.selectors):
                return None  # gpu-dra-selector's: the API server rejects the claim
    return inventory


def _claims_key(view: DraView, claims: Sequence[ClaimToAllocate]) -> bytes:
    local = view.inputs.key if view.input_classes else b""
    return digest(repr([(c.key, c.spec) for c in claims]), local.hex()) or repr(claims).encode()


def _feasible(
    facts: ClusterFacts, view: DraView, claims: Sequence[ClaimToAllocate], inventory: Inventory,
    nodes: Sequence[NodeFacts], constraints: bytes,
) -> Feasibility:
    key = DraVerdictKey(_claims_key(view, claims), constraints)
    return facts.memoised(key, lambda: feasibility(claims, inventory, nodes))


def _possibly(facts: ClusterFacts, result: Feasibility) -> tuple[bool, list[str]]:
    notes = list(result.notes)
    if facts.pools:
        notes.append("node pools that scale up may bring devices gpuguard cannot see in advance")
    if result.fits is None:
        notes.insert(0, "some selectors could not be evaluated")
    return result.fits is None or not result.exact or bool(facts.pools), notes


def _verdict_text(possibly: bool, notes: list[str]) -> tuple[str, Severity]:
    if not possibly:
        return "", Severity.ERROR
    why = "; ".join(dict.fromkeys(notes)) or "the search was not exhaustive"
    return f" — possibly: gpuguard cannot be sure ({why}), so this is a warning", Severity.WARNING


def _object_finding(subject: Subject, facts: ClusterFacts, view: DraView) -> Iterator[Violation]:
    claims = [ClaimToAllocate(subject.key, subject.spec)]
    inventory = _ready(view, claims)
    if inventory is None or subject.spec.problems:
        return
    result = _feasible(facts, view, claims, inventory, facts.nodes, b"")
    if result.fits is True or not facts.nodes:
        return
    explanation = explain(claims, result, inventory)
    possibly, notes = _possibly(facts, result)
    suffix, severity = _verdict_text(possibly, notes)
    path: RelPath = tuple(pointer.split(explanation.pointer)) if explanation.pointer else ()
    yield Violation(
        f"no node can allocate {subject.label}: {explanation.text}; a pod using it stays Pending{suffix}",
        path,
        anchor="object",
        severity=severity,
    )


def check_object(ctx: ObjectContext) -> Iterator[Violation]:
    subject = object_subject(ctx.obj)
    if subject is None or subject.allocated:
        return
    yield from _object_finding(subject, ctx.facts, ctx.dra)


# --- pods ----------------------------------------------------------------------------------------


def _extended_claim(ctx: RuleContext, node: NodeFacts) -> ClaimToAllocate | None:
    """The claim the scheduler makes on ``node`` for the pod's DRA-served extended resources (KEP-5004:
    one request per container and resource, for the class serving it)."""
    served = dict(node.dra_served)
    requests = []
    for ci, c in enumerate(runnable_containers(ctx.pod)):
        for ri, (name, quantity) in enumerate(sorted(container_requests(c, lambda n: n in served).items())):
            if quantity.denominator != 1 or quantity <= 0:
                continue
            requests.append(
                {"name": f"container-{ci}-request-{ri}", "exactly": {"deviceClassName": served[name],
                                                                      "count": int(quantity)}}
            )
    if not requests:
        return None
    spec = parse_claim_spec({"devices": {"requests": requests}}, "/spec")
    return ClaimToAllocate(EXTENDED, spec)


def _pinned(claim: PodClaim, node: NodeFacts, inventory: Inventory) -> bool:
    """An allocated claim: the node must reach every device it holds."""
    owner = claim.claim
    ids: set[DeviceID] = {r.id for r in owner.allocation or ()} if owner is not None else set()
    reachable = {c.id for c in inventory.reach(node).candidates}
    return ids <= reachable


def _placement_reasons(ctx: RuleContext, node: NodeFacts) -> list[str]:
    cons = constraints_for(ctx.pod, ctx.facts)
    reasons = []
    if node.unschedulable:
        reasons.append("cordoned")
    if not cons.selector_ok(node):
        reasons.append("its labels do not match the pod's nodeSelector/required node affinity")
    untolerated = cons.untolerated(node)
    if untolerated:
        reasons.append("untolerated taint " + ", ".join(str(t) for t in untolerated))
    return reasons


def check(ctx: RuleContext) -> Iterator[Violation]:
    claims = pod_claims(ctx.pod, ctx.namespace, ctx.dra)
    resolved = [c for c in claims if c.spec is not None and not c.spec.problems]
    if not resolved or not ctx.facts.nodes:
        return
    view = ctx.dra
    to_allocate = [ClaimToAllocate(c.key, c.spec) for c in resolved if c.spec is not None and
                   (c.claim is None or c.claim.allocation is None)]
    pinned = [c for c in resolved if c.claim is not None and c.claim.allocation is not None]
    inventory = _ready(view, to_allocate)
    if inventory is None:
        return
    # A claim from the input that fits nowhere is reported on that claim.
    for claim in resolved:
        if claim.from_cluster or claim.spec is None or (claim.claim is not None and claim.claim.allocation):
            continue
        alone = [ClaimToAllocate(claim.key, claim.spec)]
        if _feasible(ctx.facts, view, alone, inventory, ctx.facts.nodes, b"").fits is False:
            return
    cons = constraints_for(ctx.pod, ctx.facts)
    candidates = [
        n for n in ctx.facts.nodes
        if not n.unschedulable and cons.selector_ok(n) and not cons.untolerated(n)
        and all(_pinned(p, n, inventory) for p in pinned)
    ]
    if pinned and not candidates:
        holding = [n for n in ctx.facts.nodes if all(_pinned(p, n, inventory) for p in pinned)]
        if holding:
            names = ", ".join(repr(p.name) for p in pinned)
            reasons = _placement_reasons(ctx, holding[0]) or ["it is not one the pod can use"]
            yield Violation(
                f"pod {noun(len(pinned), 'claim')} {names} {noun(len(pinned), 'is', 'are')} already allocated on node "
                f"{holding[0].name}, where the pod must run to "
                f"share them, but it cannot land there ({'; '.join(reasons)}); the pod stays Pending",
                pinned[0].path,
            )
        return
    result = _pod_feasibility(ctx, view, to_allocate, inventory, candidates)
    if result.fits is not False and result.fits is not None:
        return
    if result.fits is None and not candidates:
        return
    yield from _pod_finding(ctx, claims, to_allocate, inventory, candidates, result)


def _pod_feasibility(
    ctx: RuleContext, view: DraView, claims: list[ClaimToAllocate], inventory: Inventory,
    candidates: list[NodeFacts],
) -> Feasibility:
    extras = {n.name: extra for n in candidates if n.dra_served and (extra := _extended_claim(ctx, n)) is not None}
    names = digest([n.name for n in candidates]) or b""
    if not extras:
        return _feasible(ctx.facts, view, claims, inventory, candidates, names)
    # Per node: the claims plus what the pod's DRA-served extended resources take there.
    fits: bool | None = False
    exact = True
    failures: list[tuple[NodeFacts, Verdict]] = []
    notes: list[str] = []
    examined = without = 0
    for node in candidates:
        extra = extras.get(node.name)
        result = feasibility([*claims, extra] if extra else claims, inventory, [node])
        if result.fits is True:
            return result
        examined += result.examined
        without += result.without_devices
        failures.extend(result.failures)
        notes.extend(result.notes)
        exact = exact and result.exact
        if result.fits is None:
            fits = None
    return Feasibility(fits, exact, examined, without, None, tuple(failures[:64]), tuple(dict.fromkeys(notes)))


def _pod_finding(
    ctx: RuleContext,
    claims: list[PodClaim],
    to_allocate: list[ClaimToAllocate],
    inventory: Inventory,
    candidates: list[NodeFacts],
    result: Feasibility,
) -> Iterator[Violation]:
    view = ctx.dra
    anywhere = _feasible(ctx.facts, view, to_allocate, inventory, ctx.facts.nodes, b"")
    possibly, notes = _possibly(ctx.facts, result)
    names = ", ".join(f"{c.name!r}" for c in claims)
    requested = ctx.gpu_requests()
    served = sorted({r for n in candidates for r, _ in n.dra_served if r in requested})
    if served:
        names += f"; with the {', '.join(served)} that DRA serves there"
    candidate_names = {n.name for n in candidates}
    if anywhere.fits is True and anywhere.fitting_node is not None and anywhere.fitting_node not in candidate_names:
        fitting = next(n for n in ctx.facts.nodes if n.name == anywhere.fitting_node)
        reasons = _placement_reasons(ctx, fitting) or ["an allocated claim pins the pod elsewhere"]
        text = (
            f"node {fitting.name} could allocate the pod's claims ({names}), but the pod cannot land there "
            f"({'; '.join(reasons)}), and no node it can land on has the devices"
        )
        path: RelPath = ("resourceClaims",)
    else:
        explanation = explain(to_allocate, result, inventory)
        text = f"no node the pod can land on can allocate its claims ({names}) together: {explanation.text}"
        culprit = next((c for c in claims if c.key == explanation.claim_key), None)
        path = culprit.path if culprit is not None else ("resourceClaims",)
        if not candidates:
            text = f"no node the pod can land on reaches DRA devices for its claims ({names})"
    suffix, severity = _verdict_text(possibly, notes)
    yield Violation(f"{text}; the pod stays Pending{suffix}", path, severity=severity)


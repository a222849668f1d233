"""Can claims be allocated on some node?  The allocator (``policies.dra.allocator``) over the nodes, and
why not when they cannot.

``feasibility(claims, inventory, nodes)`` runs the scheduler's allocator node by node and stops at the
first node that fits.  Nodes that reach no device are counted, not searched.  The answer is exact only
when every node's verdict was; a "possibly" comes from the allocator's own limits, from more nodes
than ``NODE_LIMIT`` reaching devices, or from selectors gpuguard cannot evaluate.

``explain`` turns the failing nodes' per-request diagnoses into the reason a person can act on, in
the order the allocator narrows devices down: the class matches nothing, the request's selectors
match nothing (naming the first selector that alone matches nothing), too few are free, their taints
are not tolerated, or each request fits alone but not together (constraints, or devices shared
between requests).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from policies.dra.allocator import ClaimToAllocate, RequestDiagnosis, Verdict, allocate, untolerated_taints
from policies.dra.cel import compile_selector
from policies.dra.inventory import Inventory
from policies.dra.objects import ExactRequest
from policies.facts import NodeFacts
from policies.wording import noun, plural

NODE_LIMIT = 2000  # nodes with devices searched for one question
KEPT_OUTCOMES = 64  # failing verdicts kept for the explanation


@dataclass(frozen=True, slots=True)
class Feasibility:
    """``fits``: True on some node, False on none, None when gpuguard cannot tell."""

    fits: bool | None
    exact: bool
    examined: int = 0
    without_devices: int = 0
    fitting_node: str | None = None
    failures: tuple[tuple[NodeFacts, Verdict], ...] = ()
    notes: tuple[str, ...] = ()


def feasibility(
    claims: Sequence[ClaimToAllocate], inventory: Inventory, nodes: Iterable[NodeFacts]
) -> Feasibility:
    if not any(claim.spec.requests for claim in claims):
        return Feasibility(True, True)
    examined = without = 0
    failures: list[tuple[NodeFacts, Verdict]] = []
    notes: set[str] = set()
    undecided = False
    exact = True
    for node in nodes:
        reach = inventory.reach(node)
        if not reach.candidates and not reach.pools:
            without += 1
            continue
        if examined >= NODE_LIMIT:
            notes.add(f"only the first {NODE_LIMIT} nodes with devices were searched")
            exact = False
            break
        verdict = allocate(claims, inventory, node)
        examined += 1
        if verdict.fits is True:
            return Feasibility(True, verdict.exact, examined, without, node.name, notes=tuple(verdict.notes))
        if verdict.fits is None:
            undecided = True
        exact = exact and verdict.exact
        notes.update(verdict.notes)
        if len(failures) < KEPT_OUTCOMES:
            failures.append((node, verdict))
    fits = None if undecided else False
    return Feasibility(fits, exact and not undecided, examined, without, None, tuple(failures), tuple(sorted(notes)))


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why claims fit nowhere: the text, and where in the claim it points (a pointer, or None)."""

    text: str
    claim_key: str | None = None
    pointer: str | None = None
    notes: tuple[str, ...] = field(default=())


def _selector_culprit(
    alt: ExactRequest, failures: Sequence[tuple[NodeFacts, Verdict]], inventory: Inventory
) -> tuple[int, str] | None:
    """The first selector of ``alt`` that alone matches none of the class's devices on these nodes."""
    device_class = inventory.classes.get(alt.device_class_name)
    if device_class is None or not alt.selectors:
        return None
    class_selectors = [compile_selector(s.expression) for s in device_class.selectors]
    own = [compile_selector(s.expression) for s in alt.selectors]
    matched = [False] * len(own)
    seen = set()
    for node, _ in failures:
        for candidate in inventory.reach(node).candidates:
            if candidate.id in seen:
                continue
            seen.add(candidate.id)
            prepared = candidate.device.prepared
            if not all(c.evaluate(prepared).matched is True for c in class_selectors):
                continue
            for i, compiled in enumerate(own):
                if not matched[i] and compiled.evaluate(prepared).matched is not False:
                    matched[i] = True
    for i, hit in enumerate(matched):
        if not hit:
            return i, alt.selectors[i].pointer
    return None


def _untolerated(
    alt: ExactRequest, failures: Sequence[tuple[NodeFacts, Verdict]], inventory: Inventory
) -> list[str]:
    """The device taints that keep matching devices from ``alt`` (key=value:effect), at most three."""
    device_class = inventory.classes.get(alt.device_class_name)
    selectors = [*(device_class.selectors if device_class else ()), *alt.selectors]
    compiled = [compile_selector(s.expression) for s in selectors]
    found: dict[str, None] = {}
    for node, _ in failures:
        for candidate in inventory.reach(node).candidates:
            if not candidate.device.taints:
                continue
            if all(c.evaluate(candidate.device.prepared).matched is True for c in compiled):
                for taint in untolerated_taints(candidate.device, alt.tolerations):
                    value = f"={taint.value}" if taint.value else ""
                    found[f"{taint.key}{value}:{taint.effect}"] = None
    return list(found)[:3]


def _need(diagnosis: RequestDiagnosis) -> str:
    return "all matching devices" if diagnosis.needed is None else plural(diagnosis.needed, "device")


def _enough(diagnosis: RequestDiagnosis, value: int) -> bool:
    return value >= (diagnosis.needed if diagnosis.needed is not None else 1)


def explain(
    claims: Sequence[ClaimToAllocate], result: Feasibility, inventory: Inventory
) -> Explanation:
    found = _explain(claims, result, inventory)
    errors = [(node, v.error) for node, v in result.failures if v.error]
    runtime = [(node, e) for node, e in errors if "CEL runtime error" in e]
    if runtime and "CEL runtime error" not in found.text:
        node, error = runtime[0]
        more = f" (and on {plural(len(runtime) - 1, 'more node')})" if len(runtime) > 1 else ""
        text = f"{found.text}; on node {node.name}{more} the allocator stops with an error: {error}"
        return Explanation(text, found.claim_key, found.pointer, found.notes)
    return found


def _explain(
    claims: Sequence[ClaimToAllocate], result: Feasibility, inventory: Inventory
) -> Explanation:
    failures = result.failures
    nodes = result.examined
    if not failures:
        if result.without_devices:
            return Explanation(f"none of the {plural(result.without_devices, 'node')} reaches any DRA device"
                               if result.without_devices > 1 else "the node reaches no DRA device")
        return Explanation("no node is left to allocate the devices on")
    errors = [v.error for _, v in failures if v.error]
    if len(errors) == len(failures):
        return Explanation(f"the scheduler's allocator fails: {errors[0]}")
    by_request: dict[tuple[str, str], list[RequestDiagnosis]] = {}
    for _, verdict in failures:
        for d in verdict.requests:
            by_request.setdefault((d.claim, d.request), []).append(d)
    where = f"on the {plural(nodes, 'node')} with DRA devices" if nodes != 1 else "on the node with DRA devices"
    for claim in claims:
        for request in claim.spec.requests:
            if not request.alternatives or any(
                _enough(d, d.tolerated)
                for alt in request.alternatives
                for d in by_request.get((claim.key, alt.qualified_name), [])
            ):
                continue  # some alternative of the request fits alone somewhere
            alt = request.alternatives[0]
            rows = by_request.get((claim.key, alt.qualified_name), [])
            if not rows:
                continue
            who = f"request {alt.qualified_name}"
            if len(claims) > 1:
                who = f"claim {claim.key}, {who}"
            head = f"{who} needs {_need(rows[0])}"
            matched = sum(d.class_matched for d in rows)
            selected = sum(d.selected for d in rows)
            errors = [e for d in rows for e in d.errors]
            if not selected and errors:
                return Explanation(
                    f"{head}: the scheduler's allocator fails on its selectors: {errors[0]}",
                    claim.key,
                    alt.pointer + "/selectors",
                )
            if not matched:
                return Explanation(
                    f"{head}: no device {where} matches class {alt.device_class_name}",
                    claim.key,
                    alt.pointer + "/deviceClassName",
                )
            if not selected:
                culprit = _selector_culprit(alt, failures, inventory)
                if culprit is not None:
                    expression = " ".join(alt.selectors[culprit[0]].expression.split())
                    shown = expression if len(expression) <= 160 else expression[:159] + "…"
                    return Explanation(
                        f"{head}: {where}, {plural(matched, 'device')} {noun(matched, 'matches', 'match')} class "
                        f"{alt.device_class_name}, and selector "
                        f"#{culprit[0]} ({shown}) matches none of them",
                        claim.key,
                        culprit[1],
                    )
                return Explanation(
                    f"{head}: {where}, {plural(matched, 'device')} {noun(matched, 'matches', 'match')} class "
                    f"{alt.device_class_name}, but none matches "
                    "all the request's selectors together",
                    claim.key,
                    alt.pointer + "/selectors",
                )
            best_free = max(d.free for d in rows)
            if not any(_enough(d, d.free) for d in rows):
                return Explanation(
                    f"{head}: {where}, {plural(selected, 'device')} {noun(selected, 'matches', 'match')} its class and "
                    f"selectors, but at most {best_free} "
                    "on one node are not allocated to other claims",
                    claim.key,
                    alt.pointer,
                )
            best = max(d.tolerated for d in rows)
            taints = ", ".join(_untolerated(alt, failures, inventory)) or "NoSchedule/NoExecute device taints"
            return Explanation(
                f"{head}: enough matching free devices exist, but they carry device taints the request does not "
                f"tolerate ({taints}): at most {best} on one node are usable",
                claim.key,
                alt.pointer + "/tolerations",
            )
    constrained = [c for c in claims if c.spec.constraints]
    if constrained:
        first = constrained[0]
        return Explanation(
            f"every request can be met alone {where}, but not together: the constraints of claim {first.key} "
            "(matchAttribute) or requests competing for the same devices rule out every combination",
            first.key,
            first.spec.constraints[0].pointer,
        )
    return Explanation(
        f"every request can be met alone {where}, but not all together (the requests compete for the same devices)"
    )

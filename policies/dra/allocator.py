"""Can a node satisfy a pod's claims?  The scheduler's DRA allocator, replayed statically.

Follows k8s.io/dynamic-resource-allocation structured/internal/stable/allocator_stable.go
@ 3d036712 (``Allocate``, ``validateDeviceRequest``, ``allocateOne``, ``isSelectable``,
``selectorsMatch``, ``allocateDevice``, ``matchAttributeConstraint``) and
resourceclaim/devicetoleration.go (``ToleratesTaint``):

- A request names a DeviceClass; a missing class fails the claim (``request <r>: device class
  <c> does not exist``, the scheduler's PreFilter message).
- A device qualifies when all class selectors and then all request selectors are true, it is
  not in use (admin-access requests may share devices, but not within one claim) and every
  ``NoSchedule``/``NoExecute`` taint is tolerated; other effects are ignored.  A CEL runtime
  error aborts allocation on the node (``selector #i on device …: CEL runtime error: …``).
- ``ExactCount`` needs ``count`` distinct devices; ``All`` takes every matching reachable device,
  fails if any reachable pool is incomplete or invalid, and needs at least one.
- ``firstAvailable`` subrequests are tried in order; at most 32 devices per claim.
- ``matchAttribute``: every device of the listed requests has the attribute, with the same
  type and value.
- The search is the scheduler's: devices in order, backtracking across requests and claims,
  first solution wins.  It is exhaustive within ``step_budget`` steps (exact); beyond that the
  verdict is labelled inexact ("possibly").

What is not modelled makes a verdict inexact rather than wrong: selectors gpuguard cannot
evaluate (the search is run with them counted as non-matching and as matching), devices that
consume shared counters (partitionable devices), multi-allocatable devices already shared,
``distinctAttribute`` and capacity requests (DRAConsumableCapacity).  Pool order is a Go map
iteration in the scheduler; gpuguard sorts pools by driver and name, so whether a runtime
error is hit before a solution is only exact with a single pool.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from policies.budget import check as check_deadline
from policies.dra import signature
from policies.dra.cel import MAX_COST, compile_selector
from policies.dra.inventory import Candidate, Inventory, Reach
from policies.dra.objects import (
    MAX_ALLOCATED_DEVICES,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceConstraint,
    DeviceID,
    DeviceTaint,
    ExactRequest,
    Selector,
    Toleration,
)
from policies.facts import NodeFacts
from policies.wording import plural

MAX_SEARCH_DEPTH = 400  # recursion frames the exact search may use


def tolerates(toleration: Toleration, taint: DeviceTaint) -> bool:
    """resourceclaim.ToleratesTaint."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def untolerated_taints(device: Device, tolerations: Sequence[Toleration]) -> list[DeviceTaint]:
    """``taintPreventsAllocation``: only NoSchedule and NoExecute taints count."""
    return [
        taint
        for taint in device.taints
        if taint.effect in ("NoSchedule", "NoExecute") and not any(tolerates(t, taint) for t in tolerations)
    ]


@dataclass(frozen=True, slots=True)
class ClaimToAllocate:
    """One claim of the pod: ``key`` names it in messages (``namespace/name`` or the pod's claim)."""

    key: str
    spec: ClaimSpec


@dataclass(frozen=True, slots=True)
class RequestDiagnosis:
    """How the node's devices narrow down for one request (or subrequest)."""

    claim: str
    request: str  # request or request/subrequest
    device_class: str
    needed: int | None  # None for allocationMode All
    reachable: int  # devices in usable pools the node reaches
    class_matched: int
    selected: int  # class and request selectors true
    unknown: int  # selectors gpuguard could not evaluate
    free: int  # selected and not allocated to another claim
    tolerated: int  # free and every NoSchedule/NoExecute taint tolerated
    errors: tuple[str, ...] = ()

    def describe(self) -> str:
        need = "all matching devices" if self.needed is None else plural(self.needed, "device")
        parts = [f"{self.reachable} reachable", f"{self.class_matched} match class {self.device_class}"]
        parts.append(f"{self.selected} also match the request's selectors")
        if self.unknown:
            parts.append(f"{self.unknown} undecided")
        parts.append(f"{self.free} free")
        parts.append(f"{self.tolerated} with tolerated taints")
        return f"claim {self.claim}, request {self.request} needs {need}: " + ", ".join(parts)


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer for one node.

    ``fits``: True (the claims can be allocated), False (they cannot), None (gpuguard cannot
    tell).  ``exact`` is False when the answer is a "possibly" (see ``notes``).  ``error`` is
    the scheduler's error when allocation would fail with one rather than quietly.
    """

    fits: bool | None
    exact: bool
    error: str | None = None
    requests: tuple[RequestDiagnosis, ...] = ()
    assignment: tuple[tuple[str, str, DeviceID], ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        if self.fits is True:
            return "fits" if self.exact else "possibly fits"
        if self.fits is False:
            return "does not fit" if self.exact else "possibly does not fit"
        return "unknown"


class _Stop(Exception):
    """The scheduler would abort allocation on this node with an error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Budget(Exception):
    pass


@dataclass(slots=True)
class _Alternative:
    claim_index: int
    claim: ClaimToAllocate
    request: ExactRequest
    device_class: DeviceClass
    num_devices: int
    all_devices: list[Candidate] = field(default_factory=list)


class _Selection:
    """Cached ``isSelectable`` answers: True, False or None (undecided)."""

    def __init__(self, inventory: Inventory, cel_budget: int) -> None:
        self.inventory = inventory
        self.cache: dict[tuple[int, DeviceID], bool | None] = {}
        self.class_cache: dict[tuple[str, DeviceID], bool | None] = {}
        self.budget = cel_budget
        self.undecided_reasons: set[str] = set()

    def _selectors(self, selectors: Sequence[Selector], candidate: Candidate, owner: str) -> bool | None:
        verdict: bool | None = True
        for i, selector in enumerate(selectors):
            compiled = compile_selector(selector.expression)
            if compiled.issue is not None:
                raise _Stop(f"{owner}: selector #{i}: CEL compile error: {compiled.issue.detail}")
            if self.budget <= 0:
                self.undecided_reasons.add("the CEL evaluation budget was exhausted")
                verdict = None
                continue
            result = signature.evaluate(compiled, candidate.device, min(MAX_COST, self.budget))
            self.budget -= result.cost
            if result.error is not None:
                raise _Stop(f"{owner}: selector #{i} on device {candidate.id}: CEL runtime error: {result.error}")
            if result.matched is None:
                self.undecided_reasons.add(result.unsupported or "a selector gpuguard cannot evaluate")
                verdict = None
            elif result.matched is False:
                return False
        return verdict

    def class_match(self, alt: _Alternative, candidate: Candidate) -> bool | None:
        key = (alt.device_class.name, candidate.id)
        if key not in self.class_cache:
            self.class_cache[key] = self._selectors(
                alt.device_class.selectors, candidate, f"class {alt.device_class.name}"
            )
        return self.class_cache[key]

    def selectable(self, alt: _Alternative, key: int, candidate: Candidate) -> bool | None:
        cache_key = (key, candidate.id)
        if cache_key in self.cache:
            return self.cache[cache_key]
        verdict: bool | None = False
        klass = self.class_match(alt, candidate)
        if klass is not False:
            own = self._selectors(alt.request.selectors, candidate, f"claim {alt.claim.key}")
            verdict = False if own is False else (None if klass is None or own is None else True)
        self.cache[cache_key] = verdict
        return verdict


class _Search:
    def __init__(
        self,
        claims: Sequence[ClaimToAllocate],
        inventory: Inventory,
        reach: Reach,
        selection: _Selection,
        alternatives: dict[tuple[int, int], list[_Alternative]],
        lenient: bool,
        step_budget: int,
    ) -> None:
        self.claims = claims
        self.inventory = inventory
        self.reach = reach
        self.selection = selection
        self.alternatives = alternatives
        self.lenient = lenient  # undecided selectors count as matching
        self.steps = step_budget
        self.in_use: dict[DeviceID, set[int]] = {}
        self.results: list[list[tuple[str, DeviceID]]] = [[] for _ in claims]
        self.constraint_state: list[list[_MatchAttribute]] = [
            [_MatchAttribute(c, inventory) for c in claim.spec.constraints] for claim in claims
        ]
        self.inexact: set[str] = set()

    def run(self) -> bool:
        return self._claim(0)

    def _claim(self, claim_index: int) -> bool:
        if claim_index >= len(self.claims):
            return True
        return self._request(claim_index, 0)

    def _request(self, claim_index: int, request_index: int) -> bool:
        spec = self.claims[claim_index].spec
        if request_index >= len(spec.requests):
            return self._claim(claim_index + 1)
        alternatives = self.alternatives.get((claim_index, request_index))
        if not alternatives:  # a request the API server would reject: nothing to allocate
            return self._request(claim_index, request_index + 1)
        for alt in alternatives:
            if alt.request.allocation_mode == "All" and not alt.all_devices:
                continue
            remaining = alt.num_devices
            if len(self.results[claim_index]) + remaining > MAX_ALLOCATED_DEVICES:
                continue
            if self._device(alt, claim_index, request_index, 0):
                return True
        return False

    def _device(self, alt: _Alternative, claim_index: int, request_index: int, device_index: int) -> bool:
        self.steps -= 1
        if self.steps < 0:
            raise _Budget
        if not self.steps % 1024:
            check_deadline()
        if device_index >= alt.num_devices:
            return self._request(claim_index, request_index + 1)
        if alt.request.allocation_mode == "All":
            candidate = alt.all_devices[device_index]
            undo = self._allocate(alt, claim_index, candidate, must=True)
            if undo is None:
                return False
            if self._device(alt, claim_index, request_index, device_index + 1):
                return True
            undo()
            return False
        key = id(alt)
        for candidate in self.reach.candidates:
            if not self._available(alt, claim_index, candidate):
                continue
            selectable = self.selection.selectable(alt, key, candidate)
            if selectable is False or (selectable is None and not self.lenient):
                continue
            undo = self._allocate(alt, claim_index, candidate, must=False)
            if undo is None:
                continue
            if self._device(alt, claim_index, request_index, device_index + 1):
                return True
            undo()
        return False

    def _available(self, alt: _Alternative, claim_index: int, candidate: Candidate) -> bool:
        users = self.in_use.get(candidate.id, set())
        if alt.request.admin_access:
            return claim_index not in users
        if candidate.device.allow_multiple_allocations:
            return not users
        return not users and candidate.id not in self.inventory.allocated and candidate.id not in self.inventory.shared

    def _allocate(
        self, alt: _Alternative, claim_index: int, candidate: Candidate, must: bool
    ) -> Callable[[], None] | None:
        if not self._available(alt, claim_index, candidate):
            return None
        if untolerated_taints(candidate.device, alt.request.tolerations):
            return None
        added: list[_MatchAttribute] = []
        for constraint in self.constraint_state[claim_index]:
            if not constraint.add(alt.request, candidate):
                for done in added:
                    done.remove(alt.request)
                if must:
                    raise _Stop(
                        f"claim {alt.claim.key}, request {alt.request.qualified_name}: cannot add device "
                        f"{candidate.id} because a claim constraint would not be satisfied"
                    )
                return None
            added.append(constraint)
        if candidate.device.consumes_counters:
            self.inexact.add("shared counters of partitionable devices are not checked")
        if candidate.device.allow_multiple_allocations and (
            candidate.id in self.inventory.allocated or candidate.id in self.inventory.shared
        ):
            self.inexact.add("the remaining capacity of shared devices is not checked")
        self.in_use.setdefault(candidate.id, set()).add(claim_index)
        self.results[claim_index].append((alt.request.qualified_name, candidate.id))

        def undo() -> None:
            for done in added:
                done.remove(alt.request)
            self.in_use[candidate.id].discard(claim_index)
            self.results[claim_index].pop()

        return undo


class _MatchAttribute:
    """``matchAttributeConstraint`` (``distinctAttribute`` is approximated the same way)."""

    def __init__(self, constraint: DeviceConstraint, inventory: Inventory) -> None:
        self.constraint = constraint
        self.names = set(constraint.requests)
        self.values: list[tuple[str, object]] = []

    def applies(self, request: ExactRequest) -> bool:
        if not self.names:
            return True
        if request.parent is None:
            return request.name in self.names
        return request.parent in self.names or request.qualified_name in self.names

    def add(self, request: ExactRequest, candidate: Candidate) -> bool:
        if not self.applies(request):
            return True
        attribute = self.constraint.match_attribute or self.constraint.distinct_attribute
        if attribute is None:
            return True
        raw = candidate.device.attribute(attribute, candidate.id.driver)
        if raw is None:
            return False
        kind = next((k for k in ("string", "int", "bool", "version") if raw.get(k) is not None), None)
        if kind is None:
            return False
        value = (kind, raw[kind])
        if self.constraint.match_attribute is not None:
            if self.values and self.values[0] != value:
                return False
        elif value in self.values:
            return False
        self.values.append(value)
        return True

    def remove(self, request: ExactRequest) -> None:
        if self.applies(request) and self.values:
            self.values.pop()


def _prepare(
    claims: Sequence[ClaimToAllocate], inventory: Inventory, reach: Reach, selection: _Selection
) -> tuple[dict[tuple[int, int], list[_Alternative]], list[str]]:
    """``validateDeviceRequest`` for every request, as ``Allocate`` does before searching."""
    alternatives: dict[tuple[int, int], list[_Alternative]] = {}
    notes: list[str] = []
    for ci, claim in enumerate(claims):
        minimum = 0
        for ri, request in enumerate(claim.spec.requests):
            alts: list[_Alternative] = []
            for exact in request.alternatives:
                device_class = inventory.classes.get(exact.device_class_name)
                if device_class is None:
                    missing = exact.device_class_name
                    raise _Stop(f"request {exact.qualified_name}: device class {missing} does not exist")
                alt = _Alternative(ci, claim, exact, device_class, exact.count)
                if exact.allocation_mode == "All":
                    for pool in reach.pools:
                        if not pool.complete:
                            raise _Stop(
                                f"claim {claim.key}, request {exact.qualified_name}: asks for all devices, "
                                f"but resource pool {pool.id} is currently being updated"
                            )
                        if pool.invalid_reason is not None:
                            raise _Stop(
                                f"claim {claim.key}, request {exact.qualified_name}: asks for all devices, "
                                f"but resource pool {pool.id} is currently invalid"
                            )
                    for candidate in reach.candidates:
                        verdict = selection.selectable(alt, id(alt), candidate)
                        if verdict is None:
                            notes.append("allocationMode All with selectors gpuguard cannot evaluate")
                        if verdict is not False:
                            alt.all_devices.append(candidate)
                    alt.num_devices = len(alt.all_devices)
                alts.append(alt)
            if not alts:
                continue
            alternatives[(ci, ri)] = alts
            minimum += min(a.num_devices for a in alts)
        if minimum > MAX_ALLOCATED_DEVICES:
            raise _Stop(
                f"claim {claim.key}: number of requested devices {minimum} exceeds the claim limit of "
                f"{MAX_ALLOCATED_DEVICES}"
            )
        if any(c.distinct_attribute is not None for c in claim.spec.constraints):
            notes.append("distinctAttribute constraints are approximated")
        if any(a.request.capacity_requests for alts in alternatives.values() for a in alts):
            notes.append("capacity requests (DRAConsumableCapacity) are not checked")
    return alternatives, notes


def _diagnose(
    claims: Sequence[ClaimToAllocate],
    inventory: Inventory,
    reach: Reach,
    selection: _Selection,
    alternatives: dict[tuple[int, int], list[_Alternative]],
) -> tuple[RequestDiagnosis, ...]:
    out: list[RequestDiagnosis] = []
    for (ci, _), alts in sorted(alternatives.items(), key=lambda kv: kv[0]):
        for alt in alts:
            counts = [0, 0, 0, 0, 0]  # class, selected, unknown, free, tolerated
            errors: list[str] = []
            for candidate in reach.candidates:
                try:
                    klass = selection.class_match(alt, candidate)
                    verdict = selection.selectable(alt, id(alt), candidate) if klass is not False else False
                except _Stop as stop:
                    errors.append(stop.message)
                    continue
                counts[0] += klass is not False
                if verdict is None:
                    counts[2] += 1
                if verdict is not True:
                    continue
                counts[1] += 1
                if candidate.id in inventory.allocated and not alt.request.admin_access:
                    continue
                counts[3] += 1
                if not untolerated_taints(candidate.device, alt.request.tolerations):
                    counts[4] += 1
            needed = None if alt.request.allocation_mode == "All" else alt.request.count
            out.append(
                RequestDiagnosis(
                    claims[ci].key,
                    alt.request.qualified_name,
                    alt.device_class.name,
                    needed,
                    len(reach.candidates),
                    counts[0],
                    counts[1],
                    counts[2],
                    counts[3],
                    counts[4],
                    tuple(dict.fromkeys(errors))[:3],
                )
            )
    return tuple(out)


def allocate(
    claims: Sequence[ClaimToAllocate],
    inventory: Inventory,
    node: NodeFacts | None,
    *,
    step_budget: int = 20_000,
    cel_budget: int = 20 * MAX_COST,
) -> Verdict:
    """Can ``claims`` all be allocated together from the devices ``node`` reaches?

    ``node=None`` asks about network-attached devices (``allNodes`` slices) only.  Never
    raises; bounded by ``step_budget`` search steps and ``cel_budget`` CEL cost units.
    """
    reach = inventory.reach(node)
    selection = _Selection(inventory, cel_budget)
    try:
        alternatives, notes = _prepare(claims, inventory, reach, selection)
    except _Stop as stop:
        return Verdict(False, True, stop.message, notes=())
    diagnoses = _diagnose(claims, inventory, reach, selection, alternatives)
    depth = sum(max(a.num_devices for a in alts) + 2 for alts in alternatives.values()) + len(claims)
    if depth > MAX_SEARCH_DEPTH:
        return Verdict(None, False, None, diagnoses, notes=(*notes, "too many devices requested to search"))
    multiple_pools = len({c.pool.id for c in reach.candidates}) > 1
    strict = _Search(claims, inventory, reach, selection, alternatives, False, step_budget)
    found, error = _run(strict)
    gaps = [*notes, *sorted(strict.inexact)]
    if error is not None:
        if multiple_pools:
            gaps.append("the scheduler visits pools in random order; this error may not be the first it hits")
        return Verdict(False, not gaps, error, diagnoses, (), tuple(gaps))
    undecided = sorted(selection.undecided_reasons)
    if found is True:
        return Verdict(True, not gaps, None, diagnoses, _assignment(claims, strict), tuple(gaps))
    if undecided:  # try again with every undecided device counted as matching
        lenient = _Search(claims, inventory, reach, selection, alternatives, True, step_budget)
        lenient_found, lenient_error = _run(lenient)
        if lenient_error is None and lenient_found is not False:
            return Verdict(None, False, None, diagnoses, (), tuple([*gaps, *undecided]))
        gaps.extend(sorted(lenient.inexact))
    if found is None:
        gaps.append(f"the search stopped after {step_budget} steps without a solution")
    return Verdict(False, not gaps, None, diagnoses, (), tuple(dict.fromkeys(gaps)))


def _run(search: _Search) -> tuple[bool | None, str | None]:
    try:
        return search.run(), None
    except _Stop as stop:
        return False, stop.message
    except _Budget:
        return None, None


def _assignment(claims: Sequence[ClaimToAllocate], search: _Search) -> tuple[tuple[str, str, DeviceID], ...]:
    rows = enumerate(search.results)
    return tuple((claims[ci].key, request, device) for ci, results in rows for request, device in results)

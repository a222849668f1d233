"""ResourceClaims and ResourceClaimTemplates as :mod:`.objects` views.

Validation mirrors kubernetes pkg/apis/resource/validation/validation.go
(``validateDeviceClaim``, ``validateDeviceRequest``, ``validateExactDeviceRequest``,
``validateDeviceConstraint``, ``validateRequestNameRef``) with its messages; list limits
use apimachinery's ``field.TooMany`` text ("must have at most 32 items").  CEL selectors are
not compiled here: :func:`policies.dra.cel.compile_selector` does that for the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.dra.objects import (
    MAX_CONSTRAINTS,
    MAX_FIRST_AVAILABLE,
    MAX_REQUESTS,
    MAX_SELECTORS,
    MAX_TOLERATIONS,
    AllocatedDevice,
    ClaimSpec,
    DeviceConstraint,
    DeviceID,
    DeviceRequest,
    ExactRequest,
    Problem,
    ResourceClaim,
    ResourceClaimTemplate,
    Selector,
    Toleration,
    dns_label_ok,
    dns_subdomain_ok,
    fully_qualified_name_problem,
)
from policies.pointer import join
from policies.shapes import as_dict, as_list

BOTH = "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
DNS_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
EFFECTS = 'Unsupported value: supported values: "NoExecute", "NoSchedule", "None"'
REQUEST_REF = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
_EXACT_FIELDS = ("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity")


def _too_many(pointer: str, found: int, limit: int, problems: list[Problem]) -> None:
    if found > limit:
        problems.append(Problem(pointer, f"Too many: {found}: must have at most {limit} items"))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_tolerations(raw: Any, pointer: str, problems: list[Problem]) -> tuple[Toleration, ...]:
    items = as_list(raw)
    _too_many(pointer, len(items), MAX_TOLERATIONS, problems)
    out: list[Toleration] = []
    for i, item in enumerate(items):
        tol = as_dict(item)
        here = join(pointer, [i])
        operator = str(tol.get("operator") or "Equal")
        value = str(tol.get("value") or "")
        effect = str(tol.get("effect") or "")
        if operator not in ("Equal", "Exists"):
            problems.append(Problem(join(here, ["operator"]), 'Unsupported value: supported values: "Equal", "Exists"'))
        if operator == "Exists" and value:
            problems.append(Problem(join(here, ["value"]), "must be empty for operator `Exists`"))
        if effect not in ("", "NoSchedule", "NoExecute", "None"):
            problems.append(Problem(join(here, ["effect"]), EFFECTS))
        seconds = _int(tol.get("tolerationSeconds"))
        out.append(Toleration(str(tol.get("key") or ""), operator, value, effect, seconds))
    return tuple(out)


def parse_selectors(raw: Any, pointer: str, problems: list[Problem]) -> tuple[Selector, ...]:
    items = as_list(raw)
    _too_many(pointer, len(items), MAX_SELECTORS, problems)
    out: list[Selector] = []
    for i, item in enumerate(items):
        cel = as_dict(item).get("cel")
        here = join(pointer, [i])
        if not isinstance(cel, Mapping):
            problems.append(Problem(join(here, ["cel"]), "Required value"))
            continue
        expression = cel.get("expression")
        if not isinstance(expression, str) or not expression:
            problems.append(Problem(join(here, ["cel", "expression"]), "Required value"))
            continue
        out.append(Selector(expression, join(here, ["cel", "expression"])))
    return tuple(out)


def _exact(
    raw: Mapping[str, Any], name: str, pointer: str, parent: str | None, problems: list[Problem]
) -> ExactRequest:
    class_name = raw.get("deviceClassName")
    if not isinstance(class_name, str) or not class_name:
        problems.append(Problem(join(pointer, ["deviceClassName"]), "Required value"))
        class_name = ""
    elif not dns_subdomain_ok(class_name):
        problems.append(Problem(join(pointer, ["deviceClassName"]), "must be a valid DNS subdomain name"))
    mode = raw.get("allocationMode") or "ExactCount"
    count_raw = raw.get("count")
    count = _int(count_raw)
    if mode not in ("ExactCount", "All"):
        problems.append(
            Problem(join(pointer, ["allocationMode"]), 'Unsupported value: supported values: "All", "ExactCount"')
        )
    if mode == "All" and count_raw is not None:
        problems.append(Problem(join(pointer, ["count"]), "must not be specified when allocationMode is 'All'"))
    if mode == "ExactCount" and count_raw is not None and (count is None or count <= 0):
        problems.append(Problem(join(pointer, ["count"]), "must be greater than zero"))
    return ExactRequest(
        name=name,
        device_class_name=class_name,
        selectors=parse_selectors(raw.get("selectors"), join(pointer, ["selectors"]), problems),
        allocation_mode=str(mode),
        count=count if count is not None and count > 0 else 1,
        admin_access=raw.get("adminAccess") is True,
        tolerations=parse_tolerations(raw.get("tolerations"), join(pointer, ["tolerations"]), problems),
        pointer=pointer,
        parent=parent,
        capacity_requests=as_dict(as_dict(raw.get("capacity")).get("requests")),
    )


def _request(raw: Mapping[str, Any], pointer: str, flat: bool, problems: list[Problem]) -> DeviceRequest:
    name = str(raw.get("name") or "")
    if not name:
        problems.append(Problem(join(pointer, ["name"]), "Required value"))
    elif not dns_label_ok(name):
        problems.append(Problem(join(pointer, ["name"]), DNS_LABEL_MESSAGE))
    exactly_raw = raw.get("exactly")
    if flat and any(k in raw for k in _EXACT_FIELDS):  # v1beta1: the request itself is the exact request
        exactly_raw = {k: raw[k] for k in _EXACT_FIELDS if k in raw}
    first_raw = as_list(raw.get("firstAvailable"))
    exactly = None
    if isinstance(exactly_raw, Mapping) and first_raw:
        problems.append(Problem(pointer, BOTH))
    elif not isinstance(exactly_raw, Mapping) and not first_raw:
        problems.append(Problem(pointer, "exactly one of `exactly` or `firstAvailable` is required"))
    if isinstance(exactly_raw, Mapping):
        exactly = _exact(exactly_raw, name, pointer if flat else join(pointer, ["exactly"]), None, problems)
    subs: list[ExactRequest] = []
    first_pointer = join(pointer, ["firstAvailable"])
    _too_many(first_pointer, len(first_raw), MAX_FIRST_AVAILABLE, problems)
    seen: set[str] = set()
    for i, item in enumerate(first_raw):
        sub = as_dict(item)
        here = join(first_pointer, [i])
        sub_name = str(sub.get("name") or "")
        if not sub_name:
            problems.append(Problem(join(here, ["name"]), "Required value"))
        elif sub_name in seen:
            problems.append(Problem(join(here, ["name"]), f'Duplicate value: "{sub_name}"'))
        seen.add(sub_name)
        subs.append(_exact(sub, sub_name, here, name, problems))
    return DeviceRequest(name, exactly, tuple(subs), pointer)


def parse_claim_spec(spec: Any, pointer: str, api_version: str = "resource.k8s.io/v1") -> ClaimSpec:
    """A ``ResourceClaimSpec`` at ``pointer``; v1beta1 flat requests are read as ``exactly``."""
    problems: list[Problem] = []
    flat = api_version.endswith(("/v1beta1", "/v1alpha3"))
    devices = as_dict(as_dict(spec).get("devices"))
    devices_pointer = join(pointer, ["devices"])
    raw_requests = as_list(devices.get("requests"))
    _too_many(join(devices_pointer, ["requests"]), len(raw_requests), MAX_REQUESTS, problems)
    requests: list[DeviceRequest] = []
    names: set[str] = set()
    for i, item in enumerate(raw_requests):
        here = join(devices_pointer, ["requests", i])
        request = _request(as_dict(item), here, flat, problems)
        if request.name and request.name in names:
            problems.append(Problem(join(here, ["name"]), f'Duplicate value: "{request.name}"'))
        names.add(request.name)
        requests.append(request)
    spec_view = ClaimSpec(tuple(requests), (), pointer)
    valid_refs = spec_view.request_names
    raw_constraints = as_list(devices.get("constraints"))
    _too_many(join(devices_pointer, ["constraints"]), len(raw_constraints), MAX_CONSTRAINTS, problems)
    constraints: list[DeviceConstraint] = []
    for i, item in enumerate(raw_constraints):
        raw = as_dict(item)
        here = join(devices_pointer, ["constraints", i])
        refs = tuple(str(r) for r in as_list(raw.get("requests")))
        for j, ref in enumerate(refs):
            if ref.count("/") > 1 or ref not in valid_refs:
                problems.append(Problem(join(here, ["requests", j]), REQUEST_REF))
        match, distinct = raw.get("matchAttribute"), raw.get("distinctAttribute")
        if match is None and distinct is None:
            problems.append(Problem(join(here, ["matchAttribute"]), "Required value"))
        for key, value in (("matchAttribute", match), ("distinctAttribute", distinct)):
            if value is not None:
                reason = fully_qualified_name_problem(str(value))
                if reason:
                    problems.append(Problem(join(here, [key]), reason))
        match_name = None if match is None else str(match)
        constraints.append(DeviceConstraint(refs, match_name, None if distinct is None else str(distinct), here))
    for i, item in enumerate(as_list(devices.get("config"))):
        here = join(devices_pointer, ["config", i])
        for j, ref in enumerate(as_list(as_dict(item).get("requests"))):
            if str(ref).count("/") > 1 or str(ref) not in valid_refs:
                problems.append(Problem(join(here, ["requests", j]), REQUEST_REF))
    return ClaimSpec(tuple(requests), tuple(constraints), pointer, tuple(problems))


def _meta(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = as_dict(obj.get("metadata"))
    return str(meta.get("name") or ""), str(meta.get("namespace") or "")


def parse_resource_claim(obj: Mapping[str, Any]) -> ResourceClaim:
    name, namespace = _meta(obj)
    spec = parse_claim_spec(obj.get("spec"), "/spec", str(obj.get("apiVersion") or ""))
    status = as_dict(obj.get("status"))
    allocation_raw = status.get("allocation")
    allocation: tuple[AllocatedDevice, ...] | None = None
    if isinstance(allocation_raw, Mapping):
        results = []
        for item in as_list(as_dict(allocation_raw.get("devices")).get("results")):
            r = as_dict(item)
            device_id = DeviceID(str(r.get("driver") or ""), str(r.get("pool") or ""), str(r.get("device") or ""))
            share = r.get("shareID")
            results.append(AllocatedDevice(str(r.get("request") or ""), device_id, r.get("adminAccess") is True,
                                           None if share is None else str(share)))
        allocation = tuple(results)
    reserved = len(as_list(status.get("reservedFor")))
    return ResourceClaim(name, namespace, spec, allocation, reserved, spec.problems)


def parse_resource_claim_template(obj: Mapping[str, Any]) -> ResourceClaimTemplate:
    name, namespace = _meta(obj)
    inner = as_dict(obj.get("spec")).get("spec")
    spec = parse_claim_spec(inner, "/spec/spec", str(obj.get("apiVersion") or ""))
    return ResourceClaimTemplate(name, namespace, spec, spec.problems)

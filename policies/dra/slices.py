"""DeviceClasses and ResourceSlices as :mod:`.objects` views.

ResourceSlice checks mirror pkg/apis/resource/validation/validation.go (``validateResourceSliceSpec``
and the device checks); a device whose attributes the scheduler cannot convert keeps the
reason in ``prepared.error`` (compile.go ``getAttributeValue``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.dra.claims import parse_selectors
from policies.dra.objects import (
    MAX_CONFIG,
    Device,
    DeviceClass,
    DeviceTaint,
    PoolRef,
    Problem,
    ResourceSlice,
    attribute_kind,
    dns_label_ok,
    qualified_name_ok,
)
from policies.pointer import join
from policies.shapes import as_dict, as_list

MAX_DEVICES = 128  # resourceapi.ResourceSliceMaxDevices
MAX_ATTRIBUTES_AND_CAPACITIES = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
NODE_ACCESS = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"


def _name(obj: Mapping[str, Any]) -> str:
    return str(as_dict(obj.get("metadata")).get("name") or "")


def parse_device_class(obj: Mapping[str, Any]) -> DeviceClass:
    problems: list[Problem] = []
    spec = as_dict(obj.get("spec"))
    selectors = parse_selectors(spec.get("selectors"), "/spec/selectors", problems)
    config = as_list(spec.get("config"))
    if len(config) > MAX_CONFIG:
        problems.append(Problem("/spec/config", f"Too many: {len(config)}: must have at most {MAX_CONFIG} items"))
    extended = spec.get("extendedResourceName")
    meta = as_dict(obj.get("metadata"))
    created = meta.get("creationTimestamp")
    return DeviceClass(
        _name(obj),
        selectors,
        None if extended is None else str(extended),
        None if created is None else str(created),
        tuple(problems),
    )


def _taints(raw: Any) -> tuple[DeviceTaint, ...]:
    out = []
    for item in as_list(raw):
        taint = as_dict(item)
        key, value, effect = (str(taint.get(k) or "") for k in ("key", "value", "effect"))
        out.append(DeviceTaint(key, value, effect))
    return tuple(out)


def _device(raw: Mapping[str, Any], driver: str, pointer: str, problems: list[Problem]) -> Device:
    body = as_dict(raw.get("basic")) if isinstance(raw.get("basic"), Mapping) else raw  # v1beta1 wraps fields
    name = str(raw.get("name") or "")
    if not dns_label_ok(name):
        problems.append(Problem(join(pointer, ["name"]), "must be a DNS label"))
    attributes = {str(k): as_dict(v) for k, v in as_dict(body.get("attributes")).items()}
    capacity = dict(as_dict(body.get("capacity")))
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        problems.append(Problem(pointer, "the total number of attributes and capacities must not exceed 32"))
    for key, value in attributes.items():
        reason = qualified_name_ok(key)
        if reason:
            problems.append(Problem(join(pointer, ["attributes", key]), reason))
        if attribute_kind(value) is None:
            problems.append(Problem(join(pointer, ["attributes", key]), "exactly one value must be specified"))
    multiple = body.get("allowMultipleAllocations") is True
    return Device(
        name=name,
        driver=driver,
        attributes=attributes,
        capacity=capacity,
        taints=_taints(body.get("taints")),
        allow_multiple_allocations=multiple,
        node_name=None if body.get("nodeName") is None else str(body.get("nodeName")),
        node_selector=as_dict(body.get("nodeSelector")) if isinstance(body.get("nodeSelector"), Mapping) else None,
        all_nodes=body.get("allNodes") is True,
        binding_conditions=tuple(str(c) for c in as_list(body.get("bindingConditions"))),
        consumes_counters=bool(as_list(body.get("consumesCounters"))),
    )


def parse_resource_slice(obj: Mapping[str, Any]) -> ResourceSlice:
    problems: list[Problem] = []
    spec = as_dict(obj.get("spec"))
    driver = str(spec.get("driver") or "")
    pool = as_dict(spec.get("pool"))
    generation = pool.get("generation")
    count = pool.get("resourceSliceCount")
    if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
        problems.append(Problem("/spec/pool/resourceSliceCount", "must be greater than zero"))
        count = 0
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        problems.append(Problem("/spec/pool/generation", "must be greater than or equal to 0"))
        generation = 0
    node_name = spec.get("nodeName")
    node_selector = spec.get("nodeSelector")
    all_nodes = spec.get("allNodes")
    per_device = spec.get("perDeviceNodeSelection")
    access = [node_name not in (None, ""), node_selector is not None, all_nodes is not None, per_device is not None]
    if sum(access) != 1:
        problems.append(Problem("/spec", NODE_ACCESS))
    if isinstance(node_selector, Mapping) and len(as_list(node_selector.get("nodeSelectorTerms"))) != 1:
        problems.append(Problem("/spec/nodeSelector", "must have exactly one node selector term"))
    for key, value in (("allNodes", all_nodes), ("perDeviceNodeSelection", per_device)):
        if value is not None and value is not True:
            problems.append(Problem(f"/spec/{key}", "must be either unset or set to true"))
    raw_devices = as_list(spec.get("devices"))
    if raw_devices and as_list(spec.get("sharedCounters")):
        problems.append(Problem("/spec", "only one of `sharedCounters` or `devices` is allowed"))
    if len(raw_devices) > MAX_DEVICES:
        message = f"Too many: {len(raw_devices)}: must have at most {MAX_DEVICES} items"
        problems.append(Problem("/spec/devices", message))
    devices = tuple(
        _device(as_dict(item), driver, join("/spec/devices", [i]), problems) for i, item in enumerate(raw_devices)
    )
    return ResourceSlice(
        name=_name(obj),
        driver=driver,
        pool=PoolRef(str(pool.get("name") or ""), generation, count),
        node_name=str(node_name) if node_name not in (None, "") else None,
        node_selector=node_selector if isinstance(node_selector, Mapping) else None,
        all_nodes=all_nodes is True,
        per_device_node_selection=per_device is True,
        devices=devices,
        shared_counters=bool(as_list(spec.get("sharedCounters"))),
        problems=tuple(problems),
    )

"""What the devices of a DeviceClass publish: attribute names and value kinds, capacity names.

From the cluster's ResourceSlices when they hold devices of the class's drivers (authoritative),
else from what a known driver publishes (``KNOWN_DRIVERS``: sourced below; a selector judged by it
gets warnings, never errors, since the driver version running is unknown).  The drivers of a class
are those of the cluster's devices its selectors select, or the ``device.driver == '…'`` literals
of its selectors.

The API server never checks that an attribute exists (kubernetes#125826); a name no device
publishes is a CEL runtime error on every device the class selects (``no such key``), or, behind
``has()``, a selector that never matches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from policies.dra.cel import compile_selector
from policies.dra.facts import DraView
from policies.dra.matching import cached_match
from policies.dra.objects import DeviceClass, DeviceID, attribute_kind

Source = Literal["slices", "driver"]

NVIDIA_GPU = "gpu.nvidia.com"
_STD = "resource.kubernetes.io/"  # k8s.io/dynamic-resource-allocation deviceattribute.StandardDeviceAttributePrefix

# NVIDIA/k8s-dra-driver-gpu@22407113785e78c7763b4637689a201eb39c6199 (v0.5.0-dev):
# cmd/gpu-kubelet-plugin/deviceinfo.go GpuInfo.Attributes() (full GPUs) and VfioDeviceInfo.GetDevice(),
# mig.go CommonAttributesMig() (+ uuid); the PCI attributes come from the standard deviceattribute helpers.
_NVIDIA_ATTRIBUTES: dict[str, str] = {
    "type": "string",
    "uuid": "string",
    "productName": "string",
    "brand": "string",
    "architecture": "string",
    "cudaComputeCapability": "version",
    "driverVersion": "version",
    "cudaDriverVersion": "version",
    "addressingMode": "string",
    "parentUUID": "string",  # MIG
    "profile": "string",  # MIG
    "deviceID": "string",  # VFIO
    "vendorID": "string",  # VFIO
    "numa": "int",  # VFIO
    "iommuFDEnabled": "bool",  # VFIO
}
_NVIDIA_STANDARD = {_STD + "pciBusID": "string", _STD + "pcieRoot": "string"}


@dataclass(frozen=True, slots=True)
class Removed:
    kind: str
    release: str
    instead: str | None
    source: str


# Attribute history, from the same file at the release tags v25.3.2 (7020737a), v25.8.0 (2ef1f2ad) and
# v25.12.0 (0882da87): index and minor (full GPUs) and index/parentIndex (MIG) were published up to
# v25.3.2 (issue #563, PR #624); pcieBusID became the standard resource.kubernetes.io/pciBusID in
# v25.12.0 (issue #802, PR #800) (repository now kubernetes-sigs/dra-driver-nvidia-gpu).
_ISSUE_563 = "kubernetes-sigs/dra-driver-nvidia-gpu#563, PR #624"
NVIDIA_REMOVED: dict[str, Removed] = {
    "index": Removed("int", "v25.8.0", "uuid (or the device name)", _ISSUE_563),
    "minor": Removed("int", "v25.8.0", "uuid (or the device name)", _ISSUE_563),
    "parentIndex": Removed("int", "v25.8.0", "parentUUID", _ISSUE_563),
    "pcieBusID": Removed(
        "string", "v25.12.0", _STD + "pciBusID", "kubernetes-sigs/dra-driver-nvidia-gpu#802, PR #800"
    ),
}

KNOWN_DRIVERS: dict[str, dict[str, str]] = {
    NVIDIA_GPU: {**{f"{NVIDIA_GPU}/{k}": v for k, v in _NVIDIA_ATTRIBUTES.items()}, **_NVIDIA_STANDARD},
}


def removed_attribute(qualified: str) -> tuple[str, Removed] | None:
    """(driver, what replaced it) for an attribute a known driver stopped publishing."""
    domain, _, name = qualified.partition("/")
    if domain == NVIDIA_GPU and name in NVIDIA_REMOVED:
        return NVIDIA_GPU, NVIDIA_REMOVED[name]
    return None


@dataclass(frozen=True, slots=True)
class Published:
    drivers: tuple[str, ...]
    attributes: Mapping[str, frozenset[str]]  # qualified name → value kinds
    capacities: frozenset[str] | None  # None: not known (driver tables list attributes only)
    source: Source
    device_class: str | None = None  # set when these are the attributes of the class's own devices
    # Set when the drivers were inferred from the domains a selector reads (the class's devices are
    # unknown): only reads in these domains are judged.
    domains: frozenset[str] | None = None

    def judges(self, domain: str | None) -> bool:
        return domain is not None and (self.domains is None or domain in self.domains)

    def describe(self) -> str:
        who = ", ".join(self.drivers)
        if self.device_class is not None:
            return f"no device of class {self.device_class} in the cluster's ResourceSlices publishes"
        if self.source == "slices":
            return f"no device of driver {who} in the cluster's ResourceSlices publishes"
        return f"driver {who} does not publish (judged by what NVIDIA's GPU driver publishes since v25.12.0)"


def selector_drivers(expressions: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for expression in expressions:
        found.update(compile_selector(expression).references.driver_literals)
    return found


def known_driver_domains(expressions: Iterable[str]) -> set[str]:
    """Known drivers whose own domain the selectors read (``device.attributes["gpu.nvidia.com"]``)."""
    found: set[str] = set()
    for expression in expressions:
        for ref in compile_selector(expression).references.attributes:
            if ref.domain in KNOWN_DRIVERS:
                found.add(ref.domain)
    return found


def class_drivers(device_class: DeviceClass, view: DraView) -> tuple[str, ...]:
    """The drivers whose devices the class selects in the cluster, else those its selectors name."""
    drivers: set[str] = set()
    inventory = view.inventory
    if inventory is not None and view.cluster is not None:
        key = tuple(s.expression for s in device_class.selectors)
        known = view.cluster.class_drivers.get(key)
        if known is not None:
            return known
        cache = view.cluster.match_cache
        for pool, _, device in inventory.devices():
            if pool.id.driver in drivers:
                continue
            device_id = DeviceID(pool.id.driver, pool.id.name, device.name)
            if cached_match(device_class.selectors, device_id, device, cache) is True:
                drivers.add(pool.id.driver)
        if drivers:
            view.cluster.class_drivers[key] = tuple(sorted(drivers))
    if not drivers:
        drivers = selector_drivers(s.expression for s in device_class.selectors)
    return tuple(sorted(drivers))


def class_published(device_class: DeviceClass, view: DraView) -> Published | None:
    """What the devices the class selects in the cluster publish; when it selects none there (or the
    cluster's devices are unknown), what its drivers publish by a known driver's list."""
    inventory = view.inventory
    if inventory is not None and view.cluster is not None:
        key = (False, ("class", *(s.expression for s in device_class.selectors)))
        memo = view.cluster.published
        if key not in memo:
            memo[key] = _of_class_devices(device_class, view)
        found = memo[key]
        if found is not None:
            return found
    return _table(tuple(sorted(selector_drivers(s.expression for s in device_class.selectors))), None)


def _of_class_devices(device_class: DeviceClass, view: DraView) -> Published | None:
    assert view.inventory is not None and view.cluster is not None
    cache = view.cluster.match_cache
    attributes: dict[str, set[str]] = {}
    capacities: set[str] = set()
    drivers: set[str] = set()
    shapes: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    for pool, _, device in view.inventory.devices():
        device_id = DeviceID(pool.id.driver, pool.id.name, device.name)
        if cached_match(device_class.selectors, device_id, device, cache) is not True:
            continue
        driver = pool.id.driver
        shape = (tuple(f"{driver}|{n}|{'|'.join(r)}" for n, r in device.attributes.items()), tuple(device.capacity))
        if shape in shapes:
            continue
        shapes.add(shape)
        drivers.add(driver)
        for name, raw in device.attributes.items():
            kind = attribute_kind(raw)
            attributes.setdefault(name if "/" in name else f"{driver}/{name}", set()).update([kind] if kind else [])
        capacities.update(n if "/" in n else f"{driver}/{n}" for n in device.capacity)
    if not drivers:
        return None
    table = {k: frozenset(v) for k, v in attributes.items()}
    return Published(tuple(sorted(drivers)), table, frozenset(capacities), "slices", device_class=device_class.name)


def _table(drivers: tuple[str, ...], domains: frozenset[str] | None) -> Published | None:
    if not drivers or not all(d in KNOWN_DRIVERS for d in drivers):
        return None
    known: dict[str, frozenset[str]] = {}
    for driver in drivers:
        known.update({k: frozenset([v]) for k, v in KNOWN_DRIVERS[driver].items()})
    return Published(drivers, known, None, "driver", domains=domains)


def published(drivers: Iterable[str], view: DraView, inferred: bool = False) -> Published | None:
    """What ``drivers`` publish, from the cluster's slices if they have such devices, else a known table.

    ``inferred``: the drivers are the domains the selectors read, not the class's; only those are judged.
    """
    drivers = tuple(sorted(set(drivers)))
    if view.cluster is not None and view.inventory is not None:
        memo = view.cluster.published
        key = (inferred, drivers)
        if key not in memo:
            memo[key] = _published(drivers, view, inferred)
        return memo[key]
    return _published(drivers, view, inferred)


def _published(drivers: tuple[str, ...], view: DraView, inferred: bool) -> Published | None:
    domains = frozenset(drivers) if inferred else None
    if not drivers:
        return None
    inventory = view.inventory
    if inventory is not None:
        attributes: dict[str, set[str]] = {}
        capacities: set[str] = set()
        seen = False
        for driver in drivers:
            for name, kinds in inventory.published_attributes(driver).items():
                attributes.setdefault(name, set()).update(kinds)
                seen = True
            capacities.update(inventory.published_capacities(driver))
        if seen:
            table = {k: frozenset(v) for k, v in attributes.items()}
            return Published(drivers, table, frozenset(capacities), "slices", domains=domains)
    return _table(drivers, domains)

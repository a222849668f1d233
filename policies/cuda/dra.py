"""The CUDA check for GPUs a pod gets through DRA: the driver comes from the devices, not node labels.

A container gets DRA GPUs through ``resources.claims`` (its pod claim's requests, or the one it
names), or through an extended resource a DeviceClass serves (``extendedResourceName``) on nodes
without the device plugin.  For claims, the devices it can get on a node are those the node reaches
that match the request's DeviceClass and selectors (``assess``); for a served extended resource,
the node's devices of the serving class stand in for the GPU Feature Discovery labels such a node
lacks (``dra_driver_labels``), so it is judged like any other node.  NVIDIA's driver publishes on each of them
(NVIDIA/k8s-dra-driver-gpu@22407113 cmd/gpu-kubelet-plugin/deviceinfo.go, mig.go):

* ``driverVersion`` — the NVML driver version, normalised as semver (570.124.06 → 570.124.6);
* ``cudaDriverVersion`` — the newest CUDA the driver supports (NVML ``nvmlSystemGetCudaDriverVersion``);
* ``cudaComputeCapability``, ``productName`` (the NVML name: GPU Feature Discovery's product label
  with spaces for dashes) and ``brand`` (go-nvlib ``GetBrandAsString``: Tesla, Quadro, NVS, Grid,
  GeForce, Titan, Nvidia, …).

They classify a device exactly as the node rule classifies a node (``policies.cuda.verdict``): native,
minor-version compatibility, forward compatibility (data-center GPUs) or incompatible, and the NVIDIA
runtime's ``NVIDIA_REQUIRE_*`` check is evaluated with the device's values (libnvidia-container
knows the brands Quadro, Tesla, NVS, GRID, GeForce and TITAN; every other NVML brand is "Unknown").
With only ``cudaDriverVersion`` a device is native when it is at least the image's CUDA and
minor-version compatible when the major versions match (CUDA 11 and later).

The fix is a selector for the claim (a separate object, so it is proposed, not patched): devices whose
``driverVersion`` is at least the floor that keeps only devices that run the image — compiled with
gpuguard's CEL (``policies.dra.cel``) and checked against the devices before it is proposed.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.cuda.compat import Mode, Requirement, may_forward, requirement
from policies.cuda.knowledge import knowledge
from policies.cuda.need import Need, container_need
from policies.cuda.require import Check, Start, check
from policies.cuda.require import Device as RuntimeDevice
from policies.cuda.resolve import ImageRule
from policies.cuda.verdict import LABEL_COMPUTE
from policies.cuda.versions import Version, format_version, major_minor, parse_version
from policies.dra.cel import compile_selector
from policies.dra.facts import DraView
from policies.dra.inventory import Candidate
from policies.dra.matching import cached_match
from policies.dra.objects import Device, ExactRequest
from policies.dra.podclaims import PodClaim, claim_uses, pod_claims
from policies.facts import LABEL_CUDA_FULL, LABEL_DRIVER_FULL, LABEL_PRODUCT, ClusterFacts, NodeFacts
from policies.images import ImageFacts, node_arch
from policies.memo import EligibleNodesKey, constraints_key
from policies.podspec import ContainerRef, PodTemplate
from policies.scheduling import NodeConstraints, constraints_for

# libnvidia-container src/driver.c maps NVML brands to these names (policies.cuda.require); go-nvlib
# names the same NVML enum values Quadro, Tesla, NVS, Grid, GeForce, Titan (vendor/github.com/NVIDIA/
# go-nvlib/pkg/nvlib/device/device.go in the NVIDIA DRA driver).
_RUNTIME_BRANDS = {"quadro": "Quadro", "tesla": "Tesla", "nvs": "NVS", "grid": "GRID", "geforce": "GeForce",
                   "titan": "TITAN"}
MAX_LISTED = 3


@dataclass(frozen=True, slots=True)
class DeviceDriver:
    """What a DRA GPU says about its driver; the key devices are grouped by."""

    driver: Version | None
    cuda: Version | None
    arch: str | None
    brand: str | None
    product_name: str | None

    @property
    def product_label(self) -> str | None:
        return self.product_name.replace(" ", "-") if self.product_name else None

    def describe(self) -> str:
        parts = [self.product_name or "unknown product"]
        if self.driver:
            parts.append(f"driverVersion {format_version(self.driver)}")
        if self.cuda:
            parts.append(f"cudaDriverVersion {format_version(major_minor(self.cuda))}")
        return ", ".join(parts)


def _attribute(device: Device, driver: str, name: str) -> Any:
    raw = device.attribute(f"{driver}/{name}", driver) or {}
    return raw.get("version") if raw.get("version") is not None else raw.get("string")


def device_driver(candidate: Candidate) -> DeviceDriver | None:
    """What the device says about its driver (read once per device; its views are immutable)."""
    known = candidate.device.__dict__.get("_device_driver", False)
    if known is False:
        known = candidate.device.__dict__["_device_driver"] = _device_driver(candidate)
    return known  # type: ignore[no-any-return]


_ATTRIBUTES = ("driverVersion", "cudaDriverVersion", "cudaComputeCapability", "brand", "productName")


def _device_driver(candidate: Candidate) -> DeviceDriver | None:
    device, driver = candidate.device, candidate.id.driver
    raw = tuple(_attribute(device, driver, name) for name in _ATTRIBUTES)
    return _parsed(*(v if isinstance(v, str) else None for v in raw))


@functools.lru_cache(maxsize=1024)
def _parsed(
    driver: str | None, cuda_text: str | None, capability_text: str | None, brand: str | None, product: str | None
) -> DeviceDriver | None:
    version, cuda = parse_version(driver), parse_version(cuda_text)
    if version is None and cuda is None:
        return None
    capability = parse_version(capability_text)
    arch = f"{capability[0]}.{capability[1] if len(capability) > 1 else 0}" if capability else None
    runtime_brand = _RUNTIME_BRANDS.get(brand.lower(), "Unknown") if brand is not None else None
    return DeviceDriver(version, cuda, arch, runtime_brand, product)


def device_mode(req: Requirement, need: Need, dd: DeviceDriver) -> tuple[Mode, Check | None]:
    """``policies.cuda.verdict.node_mode`` with the device's attributes in place of node labels."""
    runtime = None
    if need.requirements is not None:
        probe = RuntimeDevice(
            cuda=format_version(major_minor(dd.cuda)) if dd.cuda else None,
            driver=format_version(dd.driver) if dd.driver else None,
            arch=dd.arch,
            brand=dd.brand,
        )
        runtime = check(need.requirements, probe)
        if runtime.start is Start.REFUSED:
            return Mode.INCOMPATIBLE, runtime
    if dd.driver is not None:
        if dd.driver >= req.native_min:
            return Mode.NATIVE, runtime
        if req.mvc_floor is not None and dd.driver >= req.mvc_floor:
            return Mode.MINOR, runtime
        if knowledge().is_datacenter(dd.product_label) and (
            need.informative or may_forward(req, dd.driver)
        ):
            return Mode.FORWARD, runtime
        return Mode.INCOMPATIBLE, runtime
    assert dd.cuda is not None
    if major_minor(dd.cuda) >= major_minor(req.cuda):
        return Mode.NATIVE, runtime
    if req.mvc_floor is not None and dd.cuda[0] == req.cuda[0]:
        return Mode.MINOR, runtime
    return Mode.INCOMPATIBLE, runtime


@dataclass(frozen=True, slots=True)
class Row:
    """Devices with one driver that the container can get, on some nodes, and how they run it."""

    device: DeviceDriver
    nodes: tuple[str, ...]
    mode: Mode
    candidates: tuple[Candidate, ...]

    def describe(self) -> str:
        names = ", ".join(self.nodes[:MAX_LISTED])
        more = f" and {len(self.nodes) - MAX_LISTED} more" if len(self.nodes) > MAX_LISTED else ""
        return f"{names}{more} ({self.device.describe()})"


@dataclass(frozen=True, slots=True)
class Source:
    """Where the container's DRA GPUs come from: a pod claim's request(s)."""

    what: str  # "pod claim 'gpu'" or "pod claim 'gpu' request 'mig-1g-5gb-0'"
    alternatives: tuple[ExactRequest, ...]
    claim: PodClaim | None = None


@dataclass(frozen=True, slots=True)
class DraAssessment:
    container: ContainerRef
    image: str
    req: Requirement
    need: Need
    sources: tuple[Source, ...]
    rows: tuple[Row, ...]
    fix_selector: str | None


def _sources(pod: PodTemplate, c: ContainerRef, claims: Mapping[str, PodClaim]) -> list[Source]:
    out: list[Source] = []
    for use in claim_uses(pod):
        if use.container is not c:
            continue
        claim = claims.get(use.claim)
        spec = claim.spec if claim is not None else None
        if claim is None or spec is None:
            continue
        requests = [r for r in spec.requests if use.request is None or r.name == use.request]
        alts = tuple(a for r in requests for a in r.alternatives)
        if alts:
            what = f"pod claim {use.claim!r}" + (f" request {use.request!r}" if use.request else "")
            out.append(Source(what, alts, claim))
    return out


def _matches(alt: ExactRequest, view: DraView, candidate: Candidate) -> bool:
    device_class = view.device_class(alt.device_class_name)
    if device_class is None or view.cluster is None:
        return False
    cache = view.cluster.match_cache
    return (
        cached_match(device_class.selectors, candidate.id, candidate.device, cache) is True
        and cached_match(alt.selectors, candidate.id, candidate.device, cache) is True
    )


def _devices(
    sources: Sequence[Source], view: DraView, nodes: Iterable[NodeFacts]
) -> dict[DeviceDriver, tuple[list[str], list[Candidate]]]:
    inventory = view.inventory
    found: dict[DeviceDriver, tuple[list[str], list[Candidate]]] = {}
    if inventory is None:
        return found
    for node in nodes:
        for candidate in inventory.reach(node).candidates:
            if not any(_matches(alt, view, candidate) for s in sources for alt in s.alternatives):
                continue
            dd = device_driver(candidate)
            if dd is None:
                continue
            names, members = found.setdefault(dd, ([], []))
            if not names or names[-1] != node.name:  # nodes are visited one after the other
                names.append(node.name)
            members.append(candidate)
    return found


def dra_driver_labels(node: NodeFacts, resources: Iterable[str], view: DraView) -> dict[str, str] | None:
    """GPU Feature Discovery-style driver labels for a node whose GPU resource DRA serves and that carries
    none: from the first device of the serving class it reaches (one driver runs all GPUs of a node)."""
    if node.driver_version is not None or not node.dra_served or view.inventory is None:
        return None
    served = dict(node.dra_served)
    for resource in resources:
        name = served.get(resource)
        if name is None:
            continue
        alt = ExactRequest(resource, name, (), "ExactCount", 1, False, (), "")
        for candidate in view.inventory.reach(node).candidates:
            if not _matches(alt, view, candidate):
                continue
            dd = device_driver(candidate)
            if dd is None or dd.driver is None:
                continue
            labels = {LABEL_DRIVER_FULL: format_version(dd.driver)}
            if dd.cuda:
                labels[LABEL_CUDA_FULL] = format_version(major_minor(dd.cuda))
            if dd.product_label:
                labels[LABEL_PRODUCT] = dd.product_label
            if dd.arch:
                labels.update(zip(LABEL_COMPUTE, dd.arch.split("."), strict=True))
            return labels
    return None


def _fix_selector(rows: Sequence[Row], req: Requirement) -> str | None:
    """A driverVersion floor that keeps exactly the rows that run the image, compiled and checked."""
    runs = [r for r in rows if r.mode.runs]
    if not runs or len(runs) == len(rows):
        return None
    natives = [r for r in rows if r.mode is Mode.NATIVE]
    floor = req.native_min if natives else req.mvc_floor
    if floor is None or any(r.device.driver is None for r in rows):
        return None
    kept = [r for r in rows if r.device.driver is not None and r.device.driver >= floor]
    if not kept or any(not r.mode.runs for r in kept):
        return None
    driver = rows[0].candidates[0].id.driver
    version = ".".join(str(p) for p in (*floor, 0, 0)[:3])
    expression = f'device.attributes["{driver}"].driverVersion.compareTo(semver("{version}")) >= 0'
    compiled = compile_selector(expression)
    if not compiled.ok or not compiled.evaluable:
        return None
    for row in rows:
        for candidate in row.candidates[:1]:
            result = compiled.evaluate(candidate.device.prepared)
            if result.matched is not (row in kept):
                return None
    return expression


def assess(
    pod: PodTemplate,
    namespace: str,
    facts: ClusterFacts,
    view: DraView,
    images: ImageFacts,
    containers: Iterable[ContainerRef],
    rules: Sequence[ImageRule],
    annotations: Mapping[str, Any],
) -> list[DraAssessment]:
    """One assessment per container whose DRA GPUs do not all run its image natively."""
    if view.inventory is None:
        return []
    claims = {c.name: c for c in pod_claims(pod, namespace, view)}
    cons = constraints_for(pod, facts)
    key = EligibleNodesKey(constraints_key(pod, {}, facts.tolerates_extended_resources))
    nodes = facts.memoised(key, lambda: _eligible_nodes(facts, cons))
    out: list[DraAssessment] = []
    for c in containers:
        image = c.container.get("image")
        if not isinstance(image, str):
            continue
        sources = _sources(pod, c, claims)
        found = _devices(sources, view, nodes) if sources else {}
        if not found:
            continue
        assessment = _assess(c, image, found, tuple(sources), images, rules, annotations, nodes)
        if assessment is not None:
            out.append(assessment)
    return out


def _eligible_nodes(facts: ClusterFacts, cons: NodeConstraints) -> list[NodeFacts]:
    """The schedulable nodes the pod selects and tolerates, in node order; judged once per node group
    (its members share taints and cordon, and the labels a selector reads unless it reads per-node ones).

    When it tolerates none of them, the ones it selects: the nodes it is meant for, as for the node rule
    (``policies.scheduling.meant_for``); gpu-dra-unsatisfiable names the taints in the same run."""
    tolerated: set[int] = set()
    selected: set[int] = set()
    for group in facts.groups:
        rep = group.representative
        if rep.pool is not None or rep.unschedulable:
            continue
        if cons.per_node_in(group):
            members = {id(m) for m in group.members if cons.selector_ok(m)}
        else:
            members = {id(m) for m in group.members} if cons.selector_ok(rep) else set()
        selected |= members
        if not cons.untolerated(rep):
            tolerated |= members
    ok = tolerated or selected
    return [n for n in facts.nodes if id(n) in ok]


def _assess(
    c: ContainerRef,
    image: str,
    found: Mapping[DeviceDriver, tuple[list[str], list[Candidate]]],
    sources: tuple[Source, ...],
    images: ImageFacts,
    rules: Sequence[ImageRule],
    annotations: Mapping[str, Any],
    nodes: Sequence[NodeFacts],
) -> DraAssessment | None:
    by_name = {n.name: n for n in nodes}
    rows: list[Row] = []
    req_seen: Requirement | None = None
    need_seen: Need | None = None
    for dd, (names, members) in found.items():
        arch = node_arch(by_name[names[0]].labels)
        need = container_need(image, c.container, c.name, annotations, rules, images.lookup(image, arch), arch)
        req = requirement(need.resolution) if need.resolution is not None else None
        if req is None:
            continue
        mode, _ = device_mode(req, need, dd)
        rows.append(Row(dd, tuple(sorted(names)), mode, tuple(members)))
        if req_seen is None or req.native_min > req_seen.native_min:
            req_seen, need_seen = req, need
    if req_seen is None or need_seen is None or all(r.mode is Mode.NATIVE for r in rows):
        return None
    rows.sort(key=lambda r: (list(Mode).index(r.mode), r.nodes))
    return DraAssessment(c, image, req_seen, need_seen, sources, tuple(rows), _fix_selector(rows, req_seen))

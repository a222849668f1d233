"""Typed, validated views of the ``resource.k8s.io`` objects the DRA checks read.

Shapes follow k8s.io/api resource/v1 types.go (Kubernetes 1.36): DeviceClass,
ResourceSlice, ResourceClaim and ResourceClaimTemplate.  v1beta2 has the same shape; v1beta1
requests are flat (no ``exactly``) and its slices wrap device fields in ``basic``; both are
read into the same views (see :mod:`.claims` and :mod:`.slices`).

Every view keeps the JSON pointers of what it came from, and a tuple of :class:`Problem`
for what the API server would reject, with its messages where they are known
(pkg/apis/resource/validation/validation.go).  Views never raise on malformed input.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policies import patterns
from policies.dra.cel import PreparedDevice, prepare_device

GROUP = "resource.k8s.io"
# The claim kinds gpuguard judges as workloads (kind, plural resource), and the API versions that serve
# them with the shapes it reads (k8s.io/api resource/{v1,v1beta2,v1beta1}, Kubernetes 1.32+).
CLAIM_RESOURCES = (("ResourceClaim", "resourceclaims"), ("ResourceClaimTemplate", "resourceclaimtemplates"))
SERVED_VERSIONS = ("v1", "v1beta2", "v1beta1")
DNS_LABEL = patterns.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = patterns.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
C_IDENTIFIER = patterns.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# resource/v1 limits (k8s.io/api resource/v1 types.go)
MAX_REQUESTS = 32  # DeviceRequestsMaxSize = AllocationResultsMaxSize
MAX_ALLOCATED_DEVICES = 32  # AllocationResultsMaxSize
MAX_SELECTORS = 32  # DeviceSelectorsMaxSize
MAX_FIRST_AVAILABLE = 8  # FirstAvailableDeviceRequestMaxSize
MAX_CONSTRAINTS = 32  # DeviceConstraintsMaxSize
MAX_CONFIG = 32  # DeviceConfigMaxSize
MAX_TOLERATIONS = 16  # DeviceTolerationsMaxLength


@dataclass(frozen=True, slots=True)
class Problem:
    """Something the API server rejects: where (RFC 6901 pointer) and its message."""

    pointer: str
    message: str


def dns_label_ok(name: str) -> bool:
    return len(name) <= 63 and DNS_LABEL.fullmatch(name) is not None


def dns_subdomain_ok(name: str) -> bool:
    return len(name) <= 253 and DNS_SUBDOMAIN.fullmatch(name) is not None


@functools.lru_cache(maxsize=4096)
def qualified_name_ok(name: str) -> str | None:
    """A ResourceSlice attribute or capacity name; None when valid, else the reason."""
    domain, slash, ident = name.rpartition("/")
    if slash and "/" in domain:
        return "must not contain more than one slash"
    if slash and (len(domain) > 63 or not dns_subdomain_ok(domain)):
        return "the domain must be a DNS subdomain of at most 63 characters"
    if len(ident) > 32 or not C_IDENTIFIER.fullmatch(ident):
        return "the name must be a C identifier of at most 32 characters"
    return None


def fully_qualified_name_problem(name: str) -> str | None:
    """``matchAttribute``/``distinctAttribute``: a domain is required."""
    if "/" not in name:
        return "a fully qualified name must be a domain and a name separated by a slash"
    return qualified_name_ok(name)


@dataclass(frozen=True, slots=True)
class Toleration:
    """A device toleration (resource/v1 ``DeviceToleration``)."""

    key: str
    operator: str  # Equal (the default) or Exists
    value: str
    effect: str  # "" (all), NoSchedule, NoExecute or None
    toleration_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str  # NoSchedule, NoExecute, None (others are ignored by the allocator)


@dataclass(frozen=True, slots=True)
class Selector:
    expression: str
    pointer: str  # of the ``expression`` field


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """A request's ``exactly`` part, or one ``firstAvailable`` subrequest.

    ``name`` is the request name for ``exactly`` and the subrequest name for a subrequest;
    ``parent`` names the enclosing request of a subrequest.
    """

    name: str
    device_class_name: str
    selectors: tuple[Selector, ...]
    allocation_mode: str  # ExactCount or All
    count: int
    admin_access: bool
    tolerations: tuple[Toleration, ...]
    pointer: str
    parent: str | None = None
    capacity_requests: Mapping[str, Any] = field(default_factory=dict)

    @property
    def qualified_name(self) -> str:
        """``request`` or ``request/subrequest``, as constraints and results name it."""
        return f"{self.parent}/{self.name}" if self.parent else self.name


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: ExactRequest | None
    first_available: tuple[ExactRequest, ...]
    pointer: str

    @property
    def alternatives(self) -> tuple[ExactRequest, ...]:
        """What the scheduler tries, in order: ``exactly`` alone, or each subrequest."""
        if self.exactly is not None:
            return (self.exactly,)
        return self.first_available


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...]  # empty: every request
    match_attribute: str | None
    distinct_attribute: str | None
    pointer: str


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    """``ResourceClaimSpec``: what a claim asks for."""

    requests: tuple[DeviceRequest, ...]
    constraints: tuple[DeviceConstraint, ...]
    pointer: str  # of the spec (``/spec`` for a claim, ``/spec/spec`` for a template)
    problems: tuple[Problem, ...] = ()

    def request(self, name: str) -> DeviceRequest | None:
        return next((r for r in self.requests if r.name == name), None)

    @property
    def request_names(self) -> frozenset[str]:
        names = {r.name for r in self.requests}
        names.update(f"{r.name}/{s.name}" for r in self.requests for s in r.first_available)
        return frozenset(names)


@dataclass(frozen=True, slots=True)
class DeviceID:
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One ``status.allocation.devices.results`` entry."""

    request: str
    id: DeviceID
    admin_access: bool
    share_id: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    name: str
    namespace: str
    spec: ClaimSpec
    allocation: tuple[AllocatedDevice, ...] | None  # None: not allocated
    reserved_for: int
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    name: str
    namespace: str
    spec: ClaimSpec
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[Selector, ...]
    extended_resource_name: str | None
    creation_timestamp: str | None
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class Device:
    """One device of a ResourceSlice.

    ``attributes`` keep the published names (``productName``, ``resource.kubernetes.io/pciBusID``)
    and raw values ({"string": ...}); ``prepared`` is the CEL ``device`` variable, built on first use.
    """

    name: str
    driver: str
    attributes: Mapping[str, Mapping[str, Any]]
    capacity: Mapping[str, Any]
    taints: tuple[DeviceTaint, ...]
    allow_multiple_allocations: bool
    node_name: str | None = None  # per-device node selection
    node_selector: Mapping[str, Any] | None = None
    all_nodes: bool = False
    binding_conditions: tuple[str, ...] = ()
    consumes_counters: bool = False

    @functools.cached_property
    def prepared(self) -> PreparedDevice:
        return prepare_device(self.driver, self.attributes, self.capacity, self.allow_multiple_allocations)

    def attribute(self, qualified: str, driver: str) -> Mapping[str, Any] | None:
        """allocator ``lookupAttribute``: the full name, or the bare name in the driver's domain."""
        if qualified in self.attributes:
            return self.attributes[qualified]
        domain, _, ident = qualified.partition("/")
        if domain != driver:
            return None
        return self.attributes.get(ident)


@dataclass(frozen=True, slots=True)
class PoolRef:
    name: str
    generation: int
    resource_slice_count: int


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: PoolRef
    node_name: str | None
    node_selector: Mapping[str, Any] | None
    all_nodes: bool
    per_device_node_selection: bool
    devices: tuple[Device, ...]
    shared_counters: bool
    problems: tuple[Problem, ...] = ()


def attribute_kind(raw: Mapping[str, Any]) -> str | None:
    """``int``, ``bool``, ``string``, ``version`` or a list form, as the value is published."""
    for kind in ("ints", "bools", "strings", "versions", "int", "bool", "string", "version"):
        if raw.get(kind) is not None:
            return kind
    return None

"""Dynamic Resource Allocation, modelled for static checks: no I/O, plain objects in, answers out.

Building blocks for the rules ``gpu-dra-device-class``, ``gpu-dra-selector``,
``gpu-dra-unsatisfiable``, ``gpu-dra-request-reference``, ``gpu-dra-mixed-allocation`` and the
DRA side of ``gpu-cuda-driver-mismatch``:

``policies.dra.cel``
    Kubernetes' CEL environment for device selectors.  ``compile_selector(expr)`` answers what
    the API server would say (``.issue``: too long, syntax, type, result type, too complex),
    whether gpuguard is sure (``.parity_uncertain``, ``.uncertain_reasons``), what the selector
    reads (``.references``: attribute/capacity names, comparisons, driver literals) and
    evaluates it on a device (``.evaluate(prepare_device(...))`` → ``MatchResult``).

``policies.dra.reading.read_objects(objects)``
    DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates as typed views
    (:mod:`.objects`), each with the API server's validation ``problems``.  Claim specs alone:
    ``policies.dra.claims.parse_claim_spec(spec, pointer, api_version)``.

``policies.dra.inventory.Inventory.build(classes, slices, claims)``
    Complete pools only (newest generation, all ``resourceSliceCount`` slices present), devices
    each node reaches (``.reach(node)``), devices in use, what each driver publishes
    (``.published_attributes(driver)``) and the class serving an extended resource
    (``.class_for_extended_resource("nvidia.com/gpu")``).

``policies.dra.allocator.allocate(claims, inventory, node)``
    The scheduler's allocator replayed for one node (or network-attached devices with
    ``node=None``): a :class:`~policies.dra.allocator.Verdict` with ``fits`` (True/False/None),
    ``exact`` (False means "possibly"), the scheduler's ``error`` when it would fail with one,
    per-request ``requests`` diagnoses (how many devices match the class, the selectors, are
    free and tolerated) and an example ``assignment``.
"""

from policies.dra.allocator import ClaimToAllocate, RequestDiagnosis, Verdict, allocate
from policies.dra.inventory import Inventory, Pool, PoolID
from policies.dra.reading import DraObjects, read_objects

__all__ = [
    "ClaimToAllocate",
    "DraObjects",
    "Inventory",
    "Pool",
    "PoolID",
    "RequestDiagnosis",
    "Verdict",
    "allocate",
    "read_objects",
]

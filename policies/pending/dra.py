"""GPU resources Dynamic Resource Allocation serves, as the pending-pod analysis needs them.

The analysis counts GPUs from the device plugin's allocatable and the pods bound to a node.  DRA
devices are counted by neither: a DeviceClass's ``extendedResourceName`` (KEP-5004) lets a plain
``nvidia.com/gpu`` limit be met from ResourceSlices on nodes without device-plugin allocatable, and a
node whose GPUs a DRA driver publishes has no device plugin at all, by design (NVIDIA's chart refuses
both on one node; see policies.dra.capacity).  So:

* a resource DRA serves anywhere is not judged by free device-plugin GPUs (``served``): the
  analysis says so rather than calling the pod unschedulable;
* a node that reaches DRA devices of a driver publishing a resource (or a class serving it) is not
  reported as having its device plugin down for that resource (``NodeAllocation.dra_gpus``).
"""

from __future__ import annotations

from policies.dra.capacity import plugin_resource, with_dra_capacity
from policies.facts import ClusterFacts
from policies.pending.allocation import ClusterAllocation


def mark_dra_gpus(facts: ClusterFacts, allocation: ClusterAllocation) -> dict[str, tuple[str, ...]]:
    """Set ``dra_gpus`` on the allocation's nodes; return resource -> the DeviceClasses serving it
    through ``extendedResourceName`` on at least one node."""
    dra = facts.dra
    if dra is None or not dra.has_devices:
        return {}
    served: dict[str, set[str]] = {}
    for node in with_dra_capacity(facts).nodes:
        for resource, device_class in node.dra_served:
            served.setdefault(resource, set()).add(device_class)
        alloc = allocation.nodes.get(node.name)
        if alloc is None:
            continue
        drivers = {c.id.driver for c in dra.inventory.reach(node).candidates}
        alloc.dra_gpus = frozenset(
            r for r in alloc.gpus
            if any(r == s for s, _ in node.dra_served) or any(plugin_resource(d, r) for d in drivers)
        )
    return {r: tuple(sorted(c)) for r, c in sorted(served.items())}

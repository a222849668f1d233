"""Extended resources served through DRA, as node capacity (DRAExtendedResource, KEP-5004).

A DeviceClass with ``extendedResourceName: nvidia.com/gpu`` lets a plain ``nvidia.com/gpu: 1`` limit
be met from ResourceSlices: the scheduler creates a claim with one request per container and
resource, for that class, on nodes whose allocatable does *not* already carry the resource from a
device plugin (kubernetes/enhancements keps/sig-scheduling/5004-dra-extended-resource README,
"Filter": "If a pod has an extended resource backed by DRA, and the node does *not* have device
plugin to provide the capacity for the resource, then the dynamicresource plugin needs to try to
allocate the resource").  ``deviceclass.resource.kubernetes.io/<class>`` names every class
implicitly.  Several classes with one name: the newest wins (``Inventory.class_for_extended_resource``).

So that the facts rules (gpu-resource-unknown, gpu-exceeds-node-capacity, gpu-unschedulable…) stay
right in DRA clusters, such a node's allocatable gets the number of the class's devices it reaches
(all of them, in use or not, as a device plugin's allocatable counts all its devices), and
``NodeFacts.dra_served`` records it.  The field is only ever set when the API server accepted it,
which it does only with the feature gate on (gated fields are dropped on create).

``NodeFacts.dra_conflicts`` records a resource the device plugin advertises while DRA serves the same
devices on the node: a class naming it in ``extendedResourceName`` whose devices the node reaches
(KEP-5004: "One node in a cluster cannot have both extended resource backed by DRA, and same named
extended resource backed by device plugin at the same time"), or a vendor's DRA driver publishing
the GPUs its device plugin advertises (``DEVICE_PLUGIN_RESOURCES``).
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from policies.dra.facts import DraFacts
from policies.dra.inventory import IMPLICIT_EXTENDED_PREFIX, Inventory
from policies.dra.matching import cached_match
from policies.dra.objects import DeviceClass
from policies.facts import ClusterFacts, NodeFacts
from policies.memo import DraCapacityKey

# DRA drivers and the device-plugin resources that advertise the same devices.  NVIDIA's chart refuses
# to enable the GPU kubelet plugin by default because it "cannot be deployed alongside the standard
# GPU device plugin on the same node" (NVIDIA/k8s-dra-driver-gpu@22407113
# deployments/helm/dra-driver-nvidia-gpu/templates/validation.yaml); the device plugin's names are
# nvidia.com/gpu, nvidia.com/gpu.shared (renameByDefault) and nvidia.com/mig-<profile> (mixed strategy)
# (NVIDIA/k8s-device-plugin README).
DEVICE_PLUGIN_RESOURCES: dict[str, tuple[str, ...]] = {
    "gpu.nvidia.com": ("nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-"),
}

_MARK = "_dra_capacity"


def plugin_resource(driver: str, resource: str) -> bool:
    """Whether ``resource`` is a device-plugin name for the devices DRA ``driver`` publishes."""
    names = DEVICE_PLUGIN_RESOURCES.get(driver, ())
    return any(resource == n or (n.endswith("-") and resource.startswith(n)) for n in names)


def served_classes(inventory: Inventory) -> dict[str, DeviceClass]:
    """Extended resource name → the DeviceClass serving it (explicit names and the implicit ones)."""
    out: dict[str, DeviceClass] = {}
    for name in sorted({c.extended_resource_name for c in inventory.classes.values() if c.extended_resource_name}):
        chosen = inventory.class_for_extended_resource(name)
        if chosen is not None:
            out[name] = chosen
    for device_class in inventory.classes.values():
        out.setdefault(IMPLICIT_EXTENDED_PREFIX + device_class.name, device_class)
    return out


def _node_dra(node: NodeFacts, dra: DraFacts, served: dict[str, DeviceClass]) -> NodeFacts:
    inventory = dra.inventory
    candidates = inventory.reach(node).candidates
    if not candidates:
        return node
    cache = dra.match_cache
    allocatable = dict(node.allocatable)
    dra_served: list[tuple[str, str]] = []
    conflicts: list[tuple[str, str]] = []
    for resource, device_class in served.items():
        count = sum(
            1 for c in candidates if cached_match(device_class.selectors, c.id, c.device, cache) is True
        )
        if not count:
            continue
        if node.allocatable.get(resource, Fraction(0)) > 0:
            conflicts.append((resource, f"DeviceClass {device_class.name} (extendedResourceName)"))
            continue
        allocatable[resource] = Fraction(count)
        dra_served.append((resource, device_class.name))
    drivers = sorted({c.id.driver for c in candidates})
    for resource, quantity in sorted(node.allocatable.items()):
        if quantity <= 0 or any(r == resource for r, _ in conflicts):
            continue
        for driver in drivers:
            if plugin_resource(driver, resource):
                conflicts.append((resource, f"DRA driver {driver}"))
                break
    if not dra_served and not conflicts:
        return node
    return dataclasses.replace(
        node, allocatable=allocatable, dra_served=tuple(dra_served), dra_conflicts=tuple(conflicts)
    )


def serving(dra: DraFacts | None) -> dict[str, DeviceClass] | None:
    """The classes serving extended resources, or None when DRA serves no device (nothing to add)."""
    if dra is None or not dra.has_devices:
        return None
    return served_classes(dra.inventory)


def node_capacity(node: NodeFacts, dra: DraFacts, served: dict[str, DeviceClass]) -> NodeFacts:
    """``node`` with what DRA serves on it (as :func:`with_dra_capacity` adds it to every node);
    for facts kept node by node (live facts), which then :func:`mark_applied`."""
    return _node_dra(node, dra, served)


def mark_applied(facts: ClusterFacts) -> None:
    """Say that ``facts``' nodes already hold what DRA serves (each went through :func:`node_capacity`)."""
    object.__setattr__(facts, _MARK, True)


def with_dra_capacity(facts: ClusterFacts) -> ClusterFacts:
    """``facts`` with DRA-served extended resources in the nodes' allocatable (memoised per snapshot)."""
    dra = facts.dra
    if dra is None or not dra.has_devices or getattr(facts, _MARK, False):
        return facts

    def build() -> ClusterFacts:
        served = served_classes(dra.inventory)
        nodes = tuple(_node_dra(n, dra, served) for n in facts.nodes)
        if all(new is old for new, old in zip(nodes, facts.nodes, strict=True)):
            object.__setattr__(facts, _MARK, True)
            return facts
        augmented = ClusterFacts(
            nodes=nodes,
            runtime_classes=facts.runtime_classes,
            source=facts.source,
            pools=facts.pools,
            extended_resource_toleration=facts.extended_resource_toleration,
            dra=dra,
            quotas=facts.quotas,
            queues=facts.queues,
            kserve=facts.kserve,
        )
        object.__setattr__(augmented, _MARK, True)
        return augmented

    return facts.memoised(DraCapacityKey(), build, pinned=True)

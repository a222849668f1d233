"""Device-plugin health and availability of GPU nodes, read from Node objects (pending-gpus.md §4).

* The kubelet reports ``capacity = healthy + unhealthy`` and ``allocatable = healthy`` devices per
  plugin resource (pkg/kubelet/cm/devicemanager/manager.go ``GetCapacity`` [K-dm]); so
  capacity > allocatable means devices marked Unhealthy (the NVIDIA plugin does that on critical
  XID errors [N-health]).
* When the plugin disconnects, all its devices turn unhealthy (allocatable 0).  After
  ``endpointStopGracePeriod`` (5 min, [K-dmt]) the resource is removed and capacity is written as an
  explicit 0, "to indicate that the resource is managed by device plugin and had been registered
  before" [K-ns].  An absent key means the plugin never registered.
* GPU Feature Discovery's ``<resource>.count`` label comes from NVML enumeration, not from the
  plugin, so it keeps saying GPUs exist while the plugin is down [N-gfd].  Its full-GPU labels
  always use ``nvidia.com/gpu`` (internal/lm/resource.go ``fullGPUResourceName``), counting
  MIG-enabled GPUs too under the ``mixed`` MIG strategy (internal/lm/mig-strategy.go
  ``newGPULabelers``), where those GPUs are advertised as ``nvidia.com/mig-*`` instead; with
  sharing, the plugin may advertise ``nvidia.com/gpu.shared`` (api/config/v1/consts.go
  ``DefaultSharedResourceNameSuffix``).  Both cases are not a plugin outage.
* Nor is a node whose GPUs a DRA driver publishes (``NodeAllocation.dra_gpus``): DRA and the device
  plugin do not serve the same GPUs on one node (policies/pending/dra.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.pending.allocation import GpuCount, NodeAllocation
from policies.pending.objects import NodeInfo

UNHEALTHY = "unhealthy-devices"
PLUGIN_DOWN = "device-plugin-down"
CORDONED = "cordoned"
NOT_READY = "not-ready"

FULL_GPU = "nvidia.com/gpu"
SHARED_SUFFIX = ".shared"


@dataclass(frozen=True, slots=True)
class HealthIssue:
    node: str
    kind: str  # UNHEALTHY | PLUGIN_DOWN | CORDONED | NOT_READY
    message: str
    resource: str = ""
    gpus: int = 0  # GPUs the issue takes out of service (0 when unknown)


def _advertised_elsewhere(node: NodeInfo, resource: str) -> bool:
    if resource != FULL_GPU:
        return False
    if (node.allocatable.get(FULL_GPU + SHARED_SUFFIX) or 0) > 0:
        return True
    if node.mig_strategy == "mixed":
        return any(r.startswith("nvidia.com/mig-") and (q or 0) > 0 for r, q in node.allocatable.items())
    return False


def _resource_issue(node: NodeInfo, resource: str, count: GpuCount) -> HealthIssue | None:
    label = count.gfd_count
    labelled = label is not None and label > 0
    cap, alloc = count.capacity, count.allocatable
    if alloc is not None and alloc > 0:
        if cap is not None and cap > alloc:
            n = cap - alloc
            return HealthIssue(node.name, UNHEALTHY,
                               f"{n} of {cap} {resource} marked unhealthy by the device plugin "
                               f"(capacity {cap}, allocatable {alloc}); a critical XID error is the usual cause, "
                               "and the plugin only clears it when it restarts", resource, n)
        return None
    if _advertised_elsewhere(node, resource):
        return None
    # allocatable is 0 or absent
    if cap is not None and cap > 0:
        return HealthIssue(node.name, PLUGIN_DOWN,
                           f"{resource}: capacity {cap} but allocatable 0: the device plugin disconnected "
                           "(within the last 5 minutes) or marked every device unhealthy", resource, cap)
    if not labelled:
        return None
    if cap == 0 or alloc == 0:
        return HealthIssue(node.name, PLUGIN_DOWN,
                           f"GPU Feature Discovery counts {label} {resource} but capacity and allocatable are 0: "
                           "the device plugin has been gone for more than 5 minutes", resource, label or 0)
    return HealthIssue(node.name, PLUGIN_DOWN,
                       f"GPU Feature Discovery counts {label} {resource} but the node does not advertise "
                       f"{resource} at all: the device plugin never registered (DaemonSet not scheduled "
                       "or crashing, driver missing)", resource, label or 0)


def node_issues(alloc: NodeAllocation) -> list[HealthIssue]:
    """Every health or availability issue of one GPU node."""
    node = alloc.node
    issues: list[HealthIssue] = []
    for resource in sorted(alloc.gpus):
        issue = _resource_issue(node, resource, alloc.gpus[resource])
        if issue is not None and not (issue.kind == PLUGIN_DOWN and resource in alloc.dra_gpus):
            issues.append(issue)
    held = sum(c.usable for c in alloc.gpus.values())
    if node.cordoned:
        issues.append(HealthIssue(node.name, CORDONED,
                                  "cordoned (spec.unschedulable): no new pods are placed here", gpus=held))
    if node.not_ready:
        why = f" ({node.ready_reason})" if node.ready_reason else ""
        issues.append(HealthIssue(node.name, NOT_READY, f"Ready condition is {node.ready}{why}", gpus=held))
    return issues


def cluster_issues(nodes: list[NodeAllocation]) -> list[HealthIssue]:
    return [issue for alloc in nodes for issue in node_issues(alloc)]

"""The rule catalogue: an explicit, ordered mapping of rule id to rule module."""

from __future__ import annotations

from policies.rule import ClusterRuleModule, ObjectRuleModule, RuleModule, WorkloadRuleModule
from policies.rules import (
    gpu_check_failed,
    gpu_cuda_driver_mismatch,
    gpu_device_access_bypass,
    gpu_dra_claim_reference,
    gpu_dra_device_class,
    gpu_dra_mixed_allocation,
    gpu_dra_request_reference,
    gpu_dra_selector,
    gpu_dra_unsatisfiable,
    gpu_exceeds_node_capacity,
    gpu_gang_unschedulable,
    gpu_kind_unknown,
    gpu_limit_missing,
    gpu_memory_limit_missing,
    gpu_node_selector_mismatch,
    gpu_queue_unadmittable,
    gpu_quota_exceeded,
    gpu_request_limit_mismatch,
    gpu_resource_unknown,
    gpu_runtime_class,
    gpu_shared_memory,
    gpu_taint_not_tolerated,
    gpu_topology_alignment,
    gpu_unschedulable,
    gpu_whole_number,
)

RULES: dict[str, RuleModule] = {
    gpu_limit_missing.ID: gpu_limit_missing,
    gpu_request_limit_mismatch.ID: gpu_request_limit_mismatch,
    gpu_whole_number.ID: gpu_whole_number,
    gpu_resource_unknown.ID: gpu_resource_unknown,
    gpu_exceeds_node_capacity.ID: gpu_exceeds_node_capacity,
    gpu_taint_not_tolerated.ID: gpu_taint_not_tolerated,
    gpu_node_selector_mismatch.ID: gpu_node_selector_mismatch,
    gpu_unschedulable.ID: gpu_unschedulable,
    gpu_runtime_class.ID: gpu_runtime_class,
    gpu_topology_alignment.ID: gpu_topology_alignment,
    gpu_shared_memory.ID: gpu_shared_memory,
    gpu_device_access_bypass.ID: gpu_device_access_bypass,
    gpu_memory_limit_missing.ID: gpu_memory_limit_missing,
    gpu_dra_claim_reference.ID: gpu_dra_claim_reference,
    gpu_dra_request_reference.ID: gpu_dra_request_reference,
    gpu_dra_device_class.ID: gpu_dra_device_class,
    gpu_dra_selector.ID: gpu_dra_selector,
    gpu_dra_unsatisfiable.ID: gpu_dra_unsatisfiable,
    gpu_dra_mixed_allocation.ID: gpu_dra_mixed_allocation,
    gpu_cuda_driver_mismatch.ID: gpu_cuda_driver_mismatch,
    gpu_gang_unschedulable.ID: gpu_gang_unschedulable,
    gpu_quota_exceeded.ID: gpu_quota_exceeded,
    gpu_queue_unadmittable.ID: gpu_queue_unadmittable,
    gpu_check_failed.ID: gpu_check_failed,
    gpu_kind_unknown.ID: gpu_kind_unknown,
}

# Rules that judge whole objects of kinds without a known pod template (also listed in RULES).
OBJECT_RULES: dict[str, ObjectRuleModule] = {
    gpu_kind_unknown.ID: gpu_kind_unknown,
    gpu_dra_request_reference.ID: gpu_dra_request_reference,
    gpu_dra_device_class.ID: gpu_dra_device_class,
    gpu_dra_selector.ID: gpu_dra_selector,
    gpu_dra_unsatisfiable.ID: gpu_dra_unsatisfiable,
    gpu_dra_mixed_allocation.ID: gpu_dra_mixed_allocation,
}

# Rules that judge whole workloads (a gang, its namespace's quotas, its queue), once per object with
# GPU pod templates (also listed in RULES).  The webhook never denies an UPDATE for them: what they
# judge is decided when the object is created.
WORKLOAD_RULES: dict[str, WorkloadRuleModule] = {
    gpu_gang_unschedulable.ID: gpu_gang_unschedulable,
    gpu_quota_exceeded.ID: gpu_quota_exceeded,
    gpu_queue_unadmittable.ID: gpu_queue_unadmittable,
}

# Rules that also judge the nodes themselves, once per snapshot (policies.engine.cluster_findings; also
# listed in RULES): a problem of the cluster is said once, not once per workload that may meet it.
CLUSTER_RULES: dict[str, ClusterRuleModule] = {
    gpu_dra_mixed_allocation.ID: gpu_dra_mixed_allocation,
}

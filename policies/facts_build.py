"""Cluster facts from Kubernetes objects: the one place that knows every kind of fact a snapshot holds.

``policies.facts`` defines the facts and reads Nodes and RuntimeClasses; the other kinds are read by
their own modules (Karpenter NodePools, DRA objects, ResourceQuotas, Kueue, KServe), each of which
builds on ``policies.facts``.  Assembling them here, above all of them, keeps ``policies.facts`` free of
imports back up (the layers in pyproject.toml's import-linter contracts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from policies.dra.facts import dra_facts_from_objects
from policies.facts import (
    ClusterFacts,
    NodeFacts,
    RuntimeClassFacts,
    flatten,
    node_from_object,
    runtime_class_from_object,
)
from policies.karpenter import is_nodepool, nodepool_from_object
from policies.kserve import kserve_objects
from policies.queue_facts import queue_facts_from_objects
from policies.quota_facts import quota_facts_from_objects


def facts_from_objects(objects: Iterable[Mapping[str, Any]], source: str = "snapshot") -> ClusterFacts:
    """Build from Node, RuntimeClass, Karpenter NodePool and ``resource.k8s.io`` objects (DeviceClasses,
    ResourceSlices, ResourceClaims, ResourceClaimTemplates), ResourceQuotas, Kueue objects and KServe's
    ServingRuntimes, ClusterServingRuntimes and LLMInferenceServiceConfigs; ``List`` objects are flattened."""
    objects = list(flatten(objects))
    nodes: list[NodeFacts] = []
    pools: list[NodeFacts] = []
    classes: dict[str, RuntimeClassFacts] = {}
    for obj in objects:
        kind = obj.get("kind")
        if kind == "Node":
            node = node_from_object(obj)
            if node is not None:
                nodes.append(node)
        elif kind == "RuntimeClass":
            rc = runtime_class_from_object(obj)
            if rc is not None:
                classes[rc.name] = rc
        elif is_nodepool(obj):
            pool = nodepool_from_object(obj)
            if pool is not None:
                pools.append(pool)
    dra = dra_facts_from_objects(objects)
    served = kserve_objects(objects)
    return ClusterFacts(nodes=tuple(nodes), runtime_classes=classes, source=source, pools=tuple(pools), dra=dra,
                        quotas=quota_facts_from_objects(objects), queues=queue_facts_from_objects(objects),
                        kserve=None if served.empty else served)

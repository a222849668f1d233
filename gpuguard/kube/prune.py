"""Decode API objects keeping only the fields the pending-pod analysis reads.

A 50,000-pod cluster lists hundreds of megabytes of JSON, most of it env, volumes and container
statuses.  msgspec decodes into TypedDicts that name only the fields kept, skipping the rest
without building Python objects for them; the result is still a plain dict in API shape.  Pods not
yet bound to a node (the pending ones, which the engine's static rules judge in full), Karpenter
NodePools (capacity that can appear, in the engine's facts), ``resource.k8s.io`` objects (DRA
devices and claims, in the engine's facts) and the objects that explain workloads without pods
(ResourceQuotas, Kueue's objects, Jobs, ReplicaSets) are kept whole.  An item whose kept
fields have unexpected types is decoded whole instead, so nothing is lost to validation: the engine
reads malformed objects defensively.
"""

from __future__ import annotations

from typing import Any, TypedDict

import msgspec


class _Meta(TypedDict, total=False):
    name: Any
    namespace: Any
    uid: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    labels: Any
    ownerReferences: Any


class _Container(TypedDict, total=False):
    name: Any
    image: Any
    resources: Any
    restartPolicy: Any


class _Spec(TypedDict, total=False):
    # Pod
    containers: list[_Container]
    initContainers: list[_Container]
    nodeName: Any
    priority: Any
    priorityClassName: Any
    preemptionPolicy: Any
    schedulingGates: Any
    nodeSelector: Any
    affinity: Any
    tolerations: Any
    runtimeClassName: Any
    overhead: Any
    resources: Any
    # Node
    unschedulable: Any
    taints: Any


class _Status(TypedDict, total=False):
    phase: Any
    conditions: Any
    nominatedNodeName: Any
    startTime: Any
    capacity: Any
    allocatable: Any


class PrunedObject(TypedDict, total=False):
    apiVersion: Any
    kind: Any
    metadata: _Meta
    spec: _Spec
    status: _Status
    # Event (core/v1 and events.k8s.io/v1)
    involvedObject: Any
    regarding: Any
    reason: Any
    message: Any
    note: Any
    type: Any
    count: Any
    deprecatedCount: Any
    series: Any
    eventTime: Any
    firstTimestamp: Any
    lastTimestamp: Any
    deprecatedLastTimestamp: Any
    # PriorityClass
    value: Any
    globalDefault: Any
    preemptionPolicy: Any
    # RuntimeClass
    handler: Any
    scheduling: Any


class _Page(msgspec.Struct):
    """A List (``kubectl … -o json``) or an API list page."""

    apiVersion: Any = None
    kind: Any = None
    metadata: dict[str, Any] = {}
    items: list[msgspec.Raw] | None = None


# Few objects, read in full: NodePools, DRA objects, and what explains workloads without pods (quotas,
# Kueue's objects, Jobs with their templates).
_KEPT_WHOLE = frozenset({"NodePool", "DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate",
                         "ResourceQuota", "Workload", "LocalQueue", "ClusterQueue", "ResourceFlavor", "Cohort", "Job",
                         "ReplicaSet", "ReplicationController"})
_PRUNED: msgspec.json.Decoder[Any] = msgspec.json.Decoder(PrunedObject)
_WHOLE = msgspec.json.Decoder()
PAGE = msgspec.json.Decoder(_Page)
ARRAY = msgspec.json.Decoder(list[msgspec.Raw])  # a top-level JSON array of objects (``jq .items``)


def decode_item(raw: bytes | msgspec.Raw, kind: str | None = None) -> Any:
    """One object: pruned, or whole when it is an unbound Pod or does not fit the pruned shape.

    ``kind`` is set on list items from the API server, which carry no TypeMeta.
    """
    try:
        obj = _PRUNED.decode(raw)
    except msgspec.ValidationError:
        obj = _WHOLE.decode(raw)
    if not isinstance(obj, dict):
        return obj
    if kind and not obj.get("kind"):
        obj["kind"] = kind
    # Karpenter NodePools are few and the engine reads their whole template; DRA objects in full
    spec = obj.get("spec")
    if obj.get("kind") in _KEPT_WHOLE or (
            obj.get("kind") == "Pod" and not (isinstance(spec, dict) and spec.get("nodeName"))):
        whole = _WHOLE.decode(raw)
        if isinstance(whole, dict):
            whole.setdefault("kind", obj["kind"])
            return whole
    return obj

"""Cluster facts from a snapshot file (`kubectl get nodes,runtimeclasses -o yaml` or JSON).

Karpenter clusters add their NodePools (`kubectl get nodes,runtimeclasses,nodepools.karpenter.sh
-o yaml`): capacity that can appear, so a snapshot may hold no GPU node at all.  ``sample`` names
the cluster profile bundled with gpuguard (the same file as examples/cluster.yaml).  JSON snapshots
(``-o json``) take a fast path (``snapshot_json``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from gpuguard.sources.snapshot_json import is_json, load_json_objects
from gpuguard.sources.yamlsafe import InputError, load_all_plain, read_text
from policies.facts import ClusterFacts, flatten
from policies.karpenter import NODEPOOL_API_VERSION, is_nodepool

SAMPLE = "sample"


def sample_text() -> str:
    return resources.files("gpuguard.sources").joinpath("sample-cluster.yaml").read_text(encoding="utf-8")


def load_cluster_facts(path: str) -> ClusterFacts:
    """Load a snapshot; raise InputError (file, line, message) on anything unusable."""
    if path == SAMPLE:
        name = "sample-cluster.yaml (bundled)"
        docs = [d for d in load_all_plain(sample_text(), name) if d is not None]
    elif is_json(Path(path)):
        name = path
        docs = [d for d in load_json_objects(Path(path), name) if d is not None]
    else:
        name = path
        docs = [d for d in load_all_plain(read_text(Path(path)), name) if d is not None]
    if not docs:
        raise InputError(name, 1, "empty cluster snapshot")
    bad = [d for d in docs if not isinstance(d, dict)]
    if bad:
        raise InputError(
            name, 1, "cluster snapshot must hold Kubernetes objects (a List or Node/RuntimeClass documents)"
        )
    for obj in flatten(docs):
        if is_nodepool(obj) and obj.get("apiVersion") != NODEPOOL_API_VERSION:
            pool = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
            raise InputError(
                name, 1, f"NodePool {pool!r} is {obj.get('apiVersion')}; gpuguard reads {NODEPOOL_API_VERSION} "
                "NodePools (Karpenter 1.0 and later): take the snapshot with `kubectl get nodepools.v1.karpenter.sh`",
            )
    facts = ClusterFacts.from_objects(docs, source=name)
    if not facts.nodes and not facts.pools:
        raise InputError(
            name, 1, "cluster snapshot has no Node or NodePool objects "
            "(expected `kubectl get nodes,runtimeclasses -o yaml`)",
        )
    return facts

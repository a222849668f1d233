"""Cluster facts from a snapshot file (`kubectl get nodes,runtimeclasses -o yaml` or JSON).

Karpenter clusters add their NodePools (`kubectl get nodes,runtimeclasses,nodepools.karpenter.sh
-o yaml`): capacity that can appear, so a snapshot may hold no GPU node at all.  Clusters with Dynamic
Resource Allocation add `deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates` (with
`-A`): they become ``ClusterFacts.dra`` (policies.dra.facts).  ``sample`` names
the cluster profile bundled with gpuguard (the same file as examples/cluster.yaml).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from gpuguard.sources.yamlsafe import InputError, load_all_plain, read_text
from policies.facts import ClusterFacts, flatten
from policies.karpenter import NODEPOOL_API_VERSION, is_nodepool

SAMPLE = "sample"


def sample_text() -> str:
    return resources.files("gpuguard.sources").joinpath("sample-cluster.yaml").read_text(encoding="utf-8")


def load_cluster_facts(path: str) -> ClusterFacts:
    """Load a snapshot; raise InputError (file, line, message) on anything unusable."""
    if path == SAMPLE:
        text, name = sample_text(), "sample-cluster.yaml (bundled)"
    else:
        text, name = read_text(Path(path)), path
    docs = [d for d in load_all_plain(text, name) if d is not None]
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

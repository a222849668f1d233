"""Cluster facts from a snapshot file (`kubectl get nodes,runtimeclasses -o yaml` or JSON).

``sample`` names the cluster profile bundled with gpuguard (the same file as examples/cluster.yaml).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from gpuguard.sources.yamlsafe import InputError, load_all_plain, read_text
from policies.facts import ClusterFacts

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
    facts = ClusterFacts.from_objects(docs, source=name)
    if not facts.nodes:
        raise InputError(
            name, 1, "cluster snapshot has no Node objects (expected `kubectl get nodes,runtimeclasses -o yaml`)"
        )
    return facts

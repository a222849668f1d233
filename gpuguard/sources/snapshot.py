"""Cluster facts from a snapshot file (`kubectl get nodes,runtimeclasses -o yaml` or `-o json`).

Karpenter clusters add their NodePools (`kubectl get nodes,runtimeclasses,nodepools.karpenter.sh
-o yaml`): capacity that can appear, so a snapshot may hold no GPU node at all.  Clusters with Dynamic
Resource Allocation add `deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates` (with
`-A`): they become ``ClusterFacts.dra`` (policies.dra.facts).  Clusters with KServe add
`servingruntimes,clusterservingruntimes,llminferenceserviceconfigs` (with `-A`): what KServe merges under
its serving objects' pods (``ClusterFacts.kserve``, policies.kserve).  ``sample`` names
the cluster profile bundled with gpuguard (the same file as examples/cluster.yaml).

JSON is parsed as JSON, by orjson; YAML by libyaml through the streaming parser, one ``List`` item
at a time: each object becomes node facts as it arrives and its parsed form is dropped, so memory is
the text and the facts, not the text and every object (5,000 nodes: seconds, not minutes).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from gpuguard.sources.yamlsafe import InputError, read_text
from gpuguard.sources.yamlstream import ListEnd, stream
from policies.facts import ClusterFacts, flatten
from policies.facts_build import facts_from_objects
from policies.karpenter import NODEPOOL_API_VERSION, is_nodepool
from policies.wording import did_you_mean, suggest

SAMPLE = "sample"
_NOT_OBJECTS = "cluster snapshot must hold Kubernetes objects (a List or Node/RuntimeClass documents)"


def sample_text() -> str:
    return resources.files("gpuguard.sources").joinpath("sample-cluster.yaml").read_text(encoding="utf-8")


def _read_snapshot(path: str) -> str:
    """The snapshot's text; a missing file whose name is a near miss of ``sample`` says so."""
    try:
        return read_text(Path(path))
    except InputError as exc:
        close = suggest(path, [SAMPLE], cutoff=0.8) if not os.path.lexists(path) else []
        if not close:
            raise
        hint = f"; {did_you_mean(close, aside='the sample cluster gpuguard ships')}"
        raise InputError(exc.file, exc.line, exc.message + hint) from None


def load_cluster_facts(path: str) -> ClusterFacts:
    """Load a snapshot; raise InputError (file, line, message) on anything unusable."""
    if path == SAMPLE:
        text, name = sample_text(), "sample-cluster.yaml (bundled)"
    else:
        text, name = _read_snapshot(path), path
    seen = [0]
    facts = facts_from_objects(_checked(_objects(text, name), name, seen), source=name)
    if not seen[0]:
        raise InputError(name, 1, "empty cluster snapshot")
    if not facts.nodes and not facts.pools:
        raise InputError(
            name, 1, "cluster snapshot has no Node or NodePool objects "
            "(expected `kubectl get nodes,runtimeclasses -o yaml`)",
        )
    return facts


def _objects(text: str, name: str) -> Iterator[Any]:
    """Every top-level object of the snapshot (Lists flattened), as it is parsed."""
    if text.lstrip()[:1] in ("{", "["):
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise InputError(name, text.count("\n", 0, exc.pos) + 1, f"invalid JSON: {exc.msg}") from None
        yield from (data if isinstance(data, list) else [data])
        return
    for item in stream(text, name):
        if isinstance(item, InputError):
            raise item
        if isinstance(item, ListEnd):
            if item.error is not None:
                raise item.error
            if not item.stands:
                raise InputError(name, item.line, "a document with items: is not a Kubernetes List")
            continue
        if item.data is not None:
            yield item.data


def _checked(objects: Iterator[Any], name: str, seen: list[int]) -> Iterator[Mapping[str, Any]]:
    for doc in objects:
        if not isinstance(doc, Mapping):
            raise InputError(name, 1, _NOT_OBJECTS)
        seen[0] += 1
        for obj in flatten([doc]):
            if is_nodepool(obj) and obj.get("apiVersion") != NODEPOOL_API_VERSION:
                meta = obj.get("metadata")
                pool = meta.get("name") if isinstance(meta, Mapping) else None
                raise InputError(
                    name, 1, f"NodePool {pool!r} is {obj.get('apiVersion')}; gpuguard reads {NODEPOOL_API_VERSION} "
                    "NodePools (Karpenter 1.0 and later): take the snapshot with "
                    "`kubectl get nodepools.v1.karpenter.sh`",
                )
            yield obj

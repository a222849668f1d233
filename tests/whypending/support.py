"""The why-pending test cluster, its dumps in every accepted shape, and CLI runners.

The cluster is tests.support.cluster_objects.scenario() (ten nodes; pods in every phase, init
containers, sidecars, a nominated pod; realistic FailedScheduling messages; PriorityClasses) plus:

    node  l4-b  NVIDIA-L4 (g6.12xlarge), 4 GPUs, 48 cpu
          serving/kata-infer holds 2 GPUs with 44 cpu + 250m pod overhead (RuntimeClass kata-nvidia-gpu)
    pending serving/l4-infer: 2 L4 GPUs, 4 cpu: l4-b has the GPUs but only 3750m cpu once the
            overhead is counted (stranded); l4-notready is NotReady
    unbound ml/just-created: a GPU pod the scheduler has not tried yet (no condition, no event)
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from tests.support.cluster_objects import (
    L4,
    NOW,
    container,
    core_event,
    node,
    pod,
    scenario,
)

L4_INFER_MESSAGE = (
    "0/11 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
    "9 node(s) didn't match Pod's node affinity/selector. preemption: 0/11 nodes are available: "
    "1 No preemption victims found for incoming pod, 10 Preemption is not helpful for scheduling."
)
# The RuntimeClass overhead example of the Kubernetes docs (kata-fc, "overhead: podFixed: memory:
# 120Mi, cpu: 250m"; https://kubernetes.io/docs/concepts/scheduling-eviction/pod-overhead/); the
# RuntimeClass admission controller copies it into the pod's spec.overhead, and the scheduler adds
# it to the container requests.
KATA_OVERHEAD = {"cpu": "250m", "memory": "120Mi"}
TIMESTAMP_KEYS = frozenset({"creationTimestamp", "startTime", "lastTransitionTime", "lastTimestamp", "eventTime",
                            "lastObservedTime", "deletionTimestamp", "timeAdded", "lastHeartbeatTime"})


def runtime_class_with_overhead() -> dict[str, Any]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": "kata-nvidia-gpu", "uid": "uid-rc-kata"},
            "handler": "kata-qemu-nvidia-gpu", "overhead": {"podFixed": KATA_OVERHEAD}}


def cluster() -> dict[str, list[dict[str, Any]]]:
    parts = scenario()
    parts["nodes"].append(node("l4-b", product=L4, instance="g6.12xlarge", capacity=4, allocatable=4, cpu="48",
                               memory="196Gi"))
    kata = pod("serving", "kata-infer", node_name="l4-b", containers=[container("server", 2, cpu="44", memory="64Gi")],
               overhead=dict(KATA_OVERHEAD), owner=("ReplicaSet", "kata-infer-6c8d9"), priority=100)
    kata["spec"]["runtimeClassName"] = "kata-nvidia-gpu"
    infer = pod("serving", "l4-infer", containers=[container("server", 2, cpu="4", memory="16Gi")], priority=100,
                node_selector={"nvidia.com/gpu.product": L4}, scheduled_message=L4_INFER_MESSAGE,
                owner=("ReplicaSet", "l4-infer-7f9b5"), started="2026-11-30T11:20:00Z")
    created = pod("ml", "just-created", containers=[container("main", 1)], started="2026-11-30T11:59:50Z")
    parts["pods"] += [kata, infer, created]
    parts["events"].append(core_event(infer, L4_INFER_MESSAGE, count=7))
    parts["runtimeclasses"] = [runtime_class_with_overhead()]
    return parts


def objects(parts: dict[str, list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    parts = parts or cluster()
    return [o for kind in ("nodes", "pods", "events", "priorityclasses", "runtimeclasses", "nodepools")
            for o in parts.get(kind, [])]


def shifted(items: Any, delta: timedelta) -> Any:
    """A deep copy with every API timestamp moved by ``delta`` (to make the scenario happen now)."""
    def move(value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: move(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [move(v) for v in value]
        if key in TIMESTAMP_KEYS and isinstance(value, str) and value:
            moved = datetime.fromisoformat(value) + delta
            return moved.strftime("%Y-%m-%dT%H:%M:%S") + ("." + value.split(".")[1] if "." in value else "Z")
        return value
    return move(copy.deepcopy(items))


def happening_now(parts: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The scenario with its clock (NOW) at the current minute."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    result: dict[str, list[dict[str, Any]]] = shifted(parts, now - datetime.fromisoformat(NOW))
    return result


def write_dump(items: Sequence[dict[str, Any]], path: Path, shape: str) -> Path:
    """``kubectl get … -o yaml`` (``list``), multi-document YAML (``docs``) or ``-o json`` (``json``)."""
    doc = {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {"resourceVersion": ""}}
    if shape == "list":
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    elif shape == "docs":
        path.write_text(yaml.safe_dump_all(list(items), sort_keys=False))
    elif shape == "json":
        path.write_text(json.dumps(doc, indent=4))
    else:
        raise ValueError(shape)
    return path


def reasons(doc: dict[str, Any], key: str) -> dict[str, dict[str, Any]]:
    """The reasons of pod ``namespace/name`` in a JSON report, by kind."""
    namespace, _, name = key.partition("/")
    (found,) = [p for p in doc["pods"] if p["namespace"] == namespace and p["name"] == name]
    return {r["kind"]: r for r in found["reasons"]}


def pod_keys(doc: dict[str, Any]) -> list[str]:
    return [f"{p['namespace']}/{p['name']}" for p in doc["pods"]]


_AGE = re.compile(r"pending (?:for \S+ \(since [^)]*\)|since \S+)")


def without_ages(text: str) -> str:
    return _AGE.sub("pending for <age>", text)


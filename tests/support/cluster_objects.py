"""Realistic Node, Pod, Event and PriorityClass objects, and one GPU cluster built from them.

Shapes follow what the API server returns (``kubectl get -o yaml``): admission has filled
``spec.priority`` and ``preemptionPolicy`` from the PriorityClass, requests default from limits,
kubelet status carries ``capacity``/``allocatable``/conditions.

The scenario (:func:`scenario`) has ten nodes and pods in every phase; the numbers below are what
tests assert:

    node            pool                                   alloc  held (pods)                     notes
    h100-a          NVIDIA-H100-80GB-HBM3 (p5.48xlarge)    8      train-a 4, notebook-idle 2       free 2
    h100-b          NVIDIA-H100-80GB-HBM3 (p5.48xlarge)    8      init-pod 3 (bound, Pending),     free 2; done-job 8
                                                                  sidecar-pod 3                    (Succeeded) and crashed 4
                                                                                                   (Failed) hold nothing
    h100-c          NVIDIA-H100-80GB-HBM3 (p5.48xlarge)    8      train-c 4, terminating 2         urgent (prio 2000, 4 GPUs)
                                                                                                   nominated here
    a100-unhealthy  NVIDIA-A100-SXM4-80GB (p4de.24xlarge)  7/8    a100-job 7                       1 device unhealthy
    a100-down       NVIDIA-A100-SXM4-80GB (p4de.24xlarge)  0/8    -                                plugin disconnected
    a100-gone       NVIDIA-A100-SXM4-80GB (p4de.24xlarge)  0/0    -                                plugin gone > 5 min
    a100-never      NVIDIA-A100-SXM4-80GB (p4de.24xlarge)  -      -                                never registered
    a100-cordoned   NVIDIA-A100-SXM4-80GB (p4de.24xlarge)  8      -                                cordoned
    l4-notready     NVIDIA-L4 (g6.12xlarge)                4      -                                NotReady + not-ready taint
    cpu-1           -                                      -      web (no GPU)

Pending GPU pods: ml/big-train (4 GPUs on H100 only, preemptionPolicy Never: fragmented),
ml/medium (4 GPUs anywhere, priority 1500: fragmented, preemption helps), research/urgent (nominated
to h100-c, waiting for the terminating victim), ml/fits-now (1 GPU, only an events.k8s.io event),
ml/gated (scheduling gate).
"""

from __future__ import annotations

import copy
from typing import Any

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
L4 = "NVIDIA-L4"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# The DefaultTolerationSeconds admission plugin adds these to every pod.
DEFAULT_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
]
NOW = "2026-11-30T12:00:00Z"


def node(
    name: str,
    *,
    product: str | None = H100,
    instance: str | None = "p5.48xlarge",
    capacity: int | None = 8,
    allocatable: int | None = 8,
    gfd_count: int | None = None,
    unschedulable: bool = False,
    ready: str = "True",
    taints: list[dict[str, Any]] | None = None,
    cpu: str = "192",
    memory: str = "2063937500Ki",
    pods: str = "110",
) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    if instance:
        labels["node.kubernetes.io/instance-type"] = instance
    if product:
        labels.update({
            "nvidia.com/gpu.product": product,
            "nvidia.com/gpu.count": str(gfd_count if gfd_count is not None else capacity or 0),
            "nvidia.com/gpu.present": "true",
            "nvidia.com/cuda.driver-version.full": "570.124.06",
            "nvidia.com/gfd.timestamp": "1764500000",
        })
    cap = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "1844Gi"}
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "1700Gi"}
    if capacity is not None:
        cap["nvidia.com/gpu"] = str(capacity)
    if allocatable is not None:
        alloc["nvidia.com/gpu"] = str(allocatable)
    spec: dict[str, Any] = {"taints": taints if taints is not None else ([GPU_TAINT] if product else [])}
    if unschedulable:
        spec["unschedulable"] = True
        spec["taints"] = [*spec["taints"],
                          {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                           "timeAdded": "2026-11-30T10:00:00Z"}]
    conditions = [
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
        {"type": "Ready", "status": ready,
         "reason": "KubeletReady" if ready == "True" else "KubeletNotReady",
         "message": "kubelet is posting ready status" if ready == "True" else "container runtime is down",
         "lastHeartbeatTime": "2026-11-30T11:59:30Z", "lastTransitionTime": "2026-11-01T00:00:00Z"},
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-node-{name}", "labels": labels,
                     "creationTimestamp": "2026-11-01T00:00:00Z", "resourceVersion": "1"},
        "spec": spec,
        "status": {"capacity": cap, "allocatable": alloc, "conditions": conditions,
                   "nodeInfo": {"kubeletVersion": "v1.33.2", "containerRuntimeVersion": "containerd://1.7.27"}},
    }


def container(name: str, gpus: int = 0, cpu: str = "1", memory: str = "4Gi", **extra: Any) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {"memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)  # defaulted from the limit by the API server
        limits["nvidia.com/gpu"] = str(gpus)
    return {
        "name": name,
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "resources": {"requests": requests, "limits": limits},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        **extra,
    }


def pod(
    namespace: str,
    name: str,
    *,
    node_name: str | None = None,
    phase: str = "Running",
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    priority: int | None = 0,
    priority_class: str | None = None,
    preemption_policy: str | None = "PreemptLowerPriority",
    nominated: str | None = None,
    gates: list[str] | None = None,
    deleting: bool = False,
    scheduled_message: str | None = None,
    node_selector: dict[str, str] | None = None,
    tolerate_gpu: bool = True,
    overhead: dict[str, str] | None = None,
    owner: tuple[str, str] | None = ("Job", ""),
    started: str = "2026-11-30T08:00:00Z",
) -> dict[str, Any]:
    uid = f"uid-{namespace}-{name}"
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid,
        "creationTimestamp": started,
        "labels": {"app": name},
        "resourceVersion": "1",
    }
    if owner:
        kind, owner_name = owner
        meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": kind, "name": owner_name or name,
                                    "uid": f"uid-owner-{name}", "controller": True, "blockOwnerDeletion": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T11:58:00Z"
        meta["deletionGracePeriodSeconds"] = 600
    spec: dict[str, Any] = {
        "containers": containers or [container("main")],
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 600,
        "tolerations": ([GPU_TOLERATION] if tolerate_gpu else []) + copy.deepcopy(DEFAULT_TOLERATIONS),
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
    }
    if init_containers:
        spec["initContainers"] = init_containers
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    if preemption_policy:
        spec["preemptionPolicy"] = preemption_policy
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node_selector:
        spec["nodeSelector"] = node_selector
    if overhead:
        spec["overhead"] = overhead
    status: dict[str, Any] = {"phase": phase, "qosClass": "Burstable"}
    if node_name:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": started},
            {"type": "Ready", "status": "True" if phase == "Running" else "False", "lastTransitionTime": started},
        ]
        status["startTime"] = started
        status["hostIP"] = "10.0.0.10"
    elif gates:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
                                 "message": "Scheduling is blocked due to non-empty scheduling gates",
                                 "lastTransitionTime": started}]
    elif scheduled_message is not None:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": scheduled_message, "lastTransitionTime": "2026-11-30T11:30:00Z"}]
    if nominated:
        status["nominatedNodeName"] = nominated
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def core_event(pod_obj: dict[str, Any], message: str, count: int = 1, reason: str = "FailedScheduling",
               last: str = "2026-11-30T11:55:00Z") -> dict[str, Any]:
    """A core/v1 Event as ``kubectl get events -o yaml`` prints the scheduler's events."""
    meta = pod_obj["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.18a2b3c4d5e6f7a8", "namespace": meta["namespace"],
                     "uid": f"uid-event-{meta['name']}", "creationTimestamp": "2026-11-30T11:00:00Z"},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                           "namespace": meta["namespace"], "uid": meta["uid"], "resourceVersion": "1"},
        "reason": reason,
        "message": message,
        "type": "Warning",
        "action": "Scheduling",
        "reportingComponent": "default-scheduler",
        "reportingInstance": "default-scheduler-control-plane",
        "source": {"component": "default-scheduler"},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "eventTime": "2026-11-30T11:00:00.000000Z",
        "series": {"count": count, "lastObservedTime": last},
    }


def events_k8s_io_event(pod_obj: dict[str, Any], note: str) -> dict[str, Any]:
    """The same event in the events.k8s.io/v1 shape (``regarding``, ``note``)."""
    meta = pod_obj["metadata"]
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.18a2b3c4d5e6f7b9", "namespace": meta["namespace"]},
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "namespace": meta["namespace"],
                      "uid": meta["uid"]},
        "reason": "FailedScheduling",
        "note": note,
        "type": "Warning",
        "action": "Scheduling",
        "reportingController": "default-scheduler",
        "eventTime": "2026-11-30T11:50:00.000000Z",
        "deprecatedCount": 3,
    }


def priority_class(name: str, value: int, *, global_default: bool = False,
                   preemption_policy: str = "PreemptLowerPriority") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "uid": f"uid-pc-{name}"},
        "value": value,
        "globalDefault": global_default,
        "preemptionPolicy": preemption_policy,
        "description": f"{name} workloads",
    }


BIG_TRAIN_MESSAGE = (
    "0/10 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
    "1 node(s) were unschedulable, 3 Insufficient nvidia.com/gpu, "
    "5 node(s) didn't match Pod's node affinity/selector. preemption: not eligible due to preemptionPolicy=Never."
)
MEDIUM_MESSAGE = (
    "0/10 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
    "1 node(s) were unschedulable, 7 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint "
    "{nvidia.com/gpu: present}. preemption: 0/10 nodes are available: 2 Preemption is not helpful for scheduling, "
    "8 No preemption victims found for incoming pod."
)
URGENT_MESSAGE = (
    "0/10 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, "
    "1 node(s) were unschedulable, 7 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node "
    "affinity/selector. preemption: not eligible due to a terminating pod on the nominated node."
)
FITS_NOW_NOTE = "0/10 nodes are available: 8 Insufficient nvidia.com/gpu, 2 Insufficient cpu."


def scenario() -> dict[str, list[dict[str, Any]]]:
    """Nodes, pods, events and PriorityClasses of the documented scenario (fresh copies)."""
    def a100(name: str, **kwargs: Any) -> dict[str, Any]:
        return node(name, product=A100, instance="p4de.24xlarge", **kwargs)

    nodes = [
        node("h100-a"),
        node("h100-b"),
        node("h100-c"),
        a100("a100-unhealthy", capacity=8, allocatable=7),
        a100("a100-down", capacity=8, allocatable=0),
        a100("a100-gone", capacity=0, allocatable=0, gfd_count=8),
        a100("a100-never", capacity=None, allocatable=None, gfd_count=8),
        a100("a100-cordoned", unschedulable=True),
        node("l4-notready", product=L4, instance="g6.12xlarge", capacity=4, allocatable=4, ready="False",
             taints=[GPU_TAINT, {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
        node("cpu-1", product=None, instance="m7i.4xlarge", capacity=None, allocatable=None, cpu="16",
             memory="65536Mi"),
    ]
    h100 = {"nvidia.com/gpu.product": H100}
    pods = [
        # h100-a: 4 + 2 held
        pod("ml", "train-a", node_name="h100-a", containers=[container("main", 4, cpu="32", memory="256Gi")],
            priority=1000, priority_class="high-train", started="2026-11-30T02:00:00Z"),
        pod("ml", "notebook-idle", node_name="h100-a", containers=[container("notebook", 2)], priority=0,
            owner=("StatefulSet", "notebook"), started="2026-11-29T09:00:00Z"),
        # h100-b: an init container needing 3 (> main's 1) and a sidecar 1 + main 2; both count 3
        pod("ml", "init-pod", node_name="h100-b", phase="Pending",
            init_containers=[container("fetch", 3)], containers=[container("main", 1)], priority=0,
            started="2026-11-30T11:00:00Z"),
        pod("ml", "sidecar-pod", node_name="h100-b",
            init_containers=[container("proxy", 1, restartPolicy="Always")], containers=[container("main", 2)],
            priority=0, started="2026-11-30T11:10:00Z"),
        pod("ml", "done-job", node_name="h100-b", phase="Succeeded", containers=[container("main", 8)]),
        pod("ml", "crashed", node_name="h100-b", phase="Failed", containers=[container("main", 4)]),
        # h100-c: 4 + 2 (terminating) held, urgent nominated here
        pod("ml", "train-c", node_name="h100-c", containers=[container("main", 4)], priority=1000,
            priority_class="high-train"),
        pod("ml", "terminating", node_name="h100-c", containers=[container("main", 2)], priority=0, deleting=True),
        # A100s
        pod("ml", "a100-job", node_name="a100-unhealthy", containers=[container("main", 7)], priority=100),
        # CPU node and a pod bound to a node missing from the input
        pod("web", "web", node_name="cpu-1", containers=[container("nginx", cpu="500m", memory="512Mi")],
            owner=("ReplicaSet", "web-5d9f7c"), tolerate_gpu=False),
        pod("ml", "ghost-runner", node_name="gone-node", containers=[container("main", 1)]),
        # pending
        pod("ml", "big-train", containers=[container("main", 4, cpu="32", memory="256Gi")], priority=500,
            priority_class="batch-no-preempt", preemption_policy="Never", node_selector=h100,
            scheduled_message=BIG_TRAIN_MESSAGE, started="2026-11-30T10:00:00Z"),
        pod("ml", "medium", containers=[container("main", 4)], priority=None, priority_class="high",
            preemption_policy=None, scheduled_message=MEDIUM_MESSAGE, started="2026-11-30T10:30:00Z"),
        pod("research", "urgent", containers=[container("main", 4)], priority=2000, priority_class="critical-train",
            nominated="h100-c", scheduled_message=URGENT_MESSAGE, started="2026-11-30T11:40:00Z"),
        pod("ml", "fits-now", containers=[container("main", 1)], priority=0, started="2026-11-30T11:58:00Z"),
        pod("ml", "gated", containers=[container("main", 1)], priority=0, gates=["example.com/quota"]),
        pod("web", "cpu-pending", containers=[container("nginx", cpu="64")], tolerate_gpu=False,
            scheduled_message="0/10 nodes are available: 10 Insufficient cpu."),
    ]
    by_name = {p["metadata"]["name"]: p for p in pods}
    events = [
        core_event(by_name["big-train"], BIG_TRAIN_MESSAGE, count=12),
        events_k8s_io_event(by_name["fits-now"], FITS_NOW_NOTE),
        core_event(by_name["medium"], MEDIUM_MESSAGE, count=4),
        {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "h100-a.1", "namespace": "default"},
         "involvedObject": {"kind": "Node", "name": "h100-a"}, "reason": "NodeReady", "message": "ready",
         "type": "Normal"},
    ]
    classes = [
        priority_class("critical-train", 2000),
        priority_class("high", 1500),
        priority_class("high-train", 1000),
        priority_class("batch-no-preempt", 500, preemption_policy="Never"),
        priority_class("default-low", 0, global_default=True),
    ]
    return {"nodes": nodes, "pods": pods, "events": events, "priorityclasses": classes}


def as_list_document(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """``kubectl get … -o yaml`` output: one ``List`` holding every object."""
    return {"apiVersion": "v1", "kind": "List", "items": objects, "metadata": {"resourceVersion": ""}}


def all_objects(parts: dict[str, list[dict[str, Any]]] | None = None) -> list[dict[str, Any]]:
    parts = parts or scenario()
    return [*parts["nodes"], *parts["pods"], *parts["events"], *parts["priorityclasses"]]

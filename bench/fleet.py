"""A realistic GPU fleet as the API server holds it, and the churn such a fleet produces.

Nodes are cloned from the example cluster's node pools (examples/cluster.yaml: GFD labels, taints,
allocatable as kubelets report them) into four GPU pools and a CPU pool, 70 % GPU nodes, and get
what a real Node object carries besides: per-node allocatable memory and ephemeral storage that
differ by a few KiB, an instance id, a zone, conditions, addresses, ``nodeInfo`` and the kubelet's
list of cached images (most of a real Node's size).

Churn, at the rates real fleets show:

* GPU Feature Discovery relabels every GPU node once per ``sleepInterval`` (default ``60s``) and,
  unless ``--no-timestamp`` is set, rewrites ``nvidia.com/gfd.timestamp`` each time
  (NVIDIA/k8s-device-plugin docs/gpu-feature-discovery/README.md, flags ``--sleep-interval`` and
  ``--no-timestamp``), so every GPU node is MODIFIED once a minute;
* the kubelet posts node status at least every ``nodeStatusReportFrequency`` (default ``5m``) even
  when nothing changed, updating each condition's ``lastHeartbeatTime`` (kubelet configuration
  reference, KubeletConfiguration ``nodeStatusReportFrequency``), so every node is MODIFIED once
  per five minutes.

At 5,000 nodes that is 3,500/60 + 5,000/300 ≈ 75 events per second, none of which changes where a
pod can run.  ``dra=True`` publishes each GPU node's eight GPUs as a ResourceSlice of NVIDIA's DRA
driver (``gpu.nvidia.com``) instead of the device plugin's ``nvidia.com/gpu``, with a DeviceClass
that serves ``nvidia.com/gpu`` (``extendedResourceName``, KEP-5004), and :class:`ClaimChurn`
allocates and releases ResourceClaims as a busy cluster does (created, allocated by the scheduler,
deleted when the pod ends).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_CLUSTER = ROOT / "examples" / "cluster.yaml"
GFD_TIMESTAMP = "nvidia.com/gfd.timestamp"
GFD_INTERVAL_S = 60.0  # GPU Feature Discovery's default --sleep-interval
STATUS_INTERVAL_S = 300.0  # the kubelet's default nodeStatusReportFrequency
DRA_DRIVER = "gpu.nvidia.com"
# pool -> (template node in examples/cluster.yaml, share of the fleet)
POOLS: dict[str, tuple[str, float]] = {
    "a100": ("a100-pool-1", 0.24),
    "h100": ("h100-pool-1", 0.20),
    "t4": ("t4-pool-1", 0.16),
    "a100-mig": ("a100-mig-1", 0.10),
    "cpu": ("cpu-pool-1", 0.30),
}
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
IMAGES = (
    "nvcr.io/nvidia/k8s-device-plugin", "nvcr.io/nvidia/gpu-feature-discovery", "nvcr.io/nvidia/k8s/dcgm-exporter",
    "nvcr.io/nvidia/cloud-native/gpu-operator-validator", "nvcr.io/nvidia/k8s/container-toolkit",
    "nvcr.io/nvidia/pytorch", "nvcr.io/nvidia/tritonserver", "registry.k8s.io/kube-proxy",
    "registry.k8s.io/pause", "quay.io/prometheus/node-exporter", "docker.io/calico/node", "docker.io/calico/cni",
    "registry.k8s.io/sig-storage/csi-node-driver-registrar", "public.ecr.aws/aws-ec2/aws-node-termination-handler",
    "docker.io/fluent/fluent-bit", "ghcr.io/example-org/trainer", "registry.example.com/ml/model-server",
    "vllm/vllm-openai", "nvidia/cuda", "python",
)


def _templates() -> dict[str, dict[str, Any]]:
    with EXAMPLE_CLUSTER.open() as fh:
        docs = [d for d in yaml.safe_load_all(fh) if d]
    items = [i for doc in docs for i in (doc.get("items") or [doc])]
    return {i["metadata"]["name"]: i for i in items if i.get("kind") == "Node"}


def runtime_classes() -> list[dict[str, Any]]:
    with EXAMPLE_CLUSTER.open() as fh:
        docs = [d for d in yaml.safe_load_all(fh) if d]
    items = [i for doc in docs for i in (doc.get("items") or [doc])]
    return [i for i in items if i.get("kind") == "RuntimeClass"]


def _digest(rng: random.Random) -> str:
    return f"sha256:{rng.getrandbits(256):064x}"


def _status_extras(node: dict[str, Any], n: int, rng: random.Random) -> None:
    name = node["metadata"]["name"]
    status = node.setdefault("status", {})
    beat = "2026-12-01T10:00:00Z"
    status["conditions"] = [
        {"type": t, "status": "False", "reason": f"KubeletHas{r}", "message": m,
         "lastHeartbeatTime": beat, "lastTransitionTime": "2026-11-20T08:00:00Z"}
        for t, r, m in (
            ("MemoryPressure", "SufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "NoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "SufficientPID", "kubelet has sufficient PID available"),
        )
    ] + [{"type": "Ready", "status": "True", "reason": "KubeletReady",
          "message": "kubelet is posting ready status", "lastHeartbeatTime": beat,
          "lastTransitionTime": "2026-11-20T08:00:00Z"}]
    status["addresses"] = [{"type": "InternalIP", "address": f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}"},
                           {"type": "Hostname", "address": name}]
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
    status["nodeInfo"] = {
        "machineID": f"{rng.getrandbits(128):032x}", "systemUUID": f"ec2{rng.getrandbits(116):029x}",
        "bootID": f"{rng.getrandbits(128):032x}", "kernelVersion": "6.1.119-129.201.amzn2023.x86_64",
        "osImage": "Amazon Linux 2023.6.20241212", "containerRuntimeVersion": "containerd://1.7.23",
        "kubeletVersion": "v1.33.5", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64",
    }
    status["images"] = [
        {"names": [f"{image}@{_digest(rng)}", f"{image}:v{rng.randint(1, 30)}.{rng.randint(0, 9)}.0"],
         "sizeBytes": rng.randint(700_000, 9_000_000_000)}
        for image in rng.sample(IMAGES, 16)
    ]


def fleet(nodes: int = 5000, *, dra: bool = False, seed: int = 20261201) -> list[dict[str, Any]]:
    """``nodes`` Node objects in the pools of ``POOLS`` (names ``<pool>-<nnnnn>``)."""
    rng = random.Random(seed)
    templates = _templates()
    out: list[dict[str, Any]] = []
    counts = {pool: int(nodes * share) for pool, (_, share) in POOLS.items()}
    counts["cpu"] += nodes - sum(counts.values())
    n = 0
    for pool, (template, _) in POOLS.items():
        for i in range(counts[pool]):
            node = copy.deepcopy(templates[template])
            name = f"{pool}-{i:05d}"
            meta = node["metadata"]
            meta.update(name=name, uid=f"00000000-0000-4000-8000-{n:012d}", resourceVersion="1",
                        creationTimestamp="2026-11-20T08:00:00Z")
            meta["annotations"] = {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": f"i-{n * 7919:017x}"}),
            }
            labels = meta.setdefault("labels", {})
            labels.update({
                "kubernetes.io/hostname": name,
                "pool": pool,
                "topology.kubernetes.io/zone": ZONES[n % len(ZONES)],
                "topology.kubernetes.io/region": "us-east-1",
                "node.example.com/instance-id": f"i-{n * 7919:017x}",
            })
            status = node.setdefault("status", {})
            for which in ("allocatable", "capacity"):
                amounts = status.setdefault(which, {})
                amounts["memory"] = f"{int(amounts.get('memory', '2000000000Ki')[:-2]) - (n * 7919) % 65_536}Ki"
                amounts["ephemeral-storage"] = str(1_887_436_798_102 - (n * 104_729) % 4_194_304)
            gpu = pool != "cpu"
            if gpu:
                labels[GFD_TIMESTAMP] = str(1764583200 + rng.randint(0, 59))
                labels["nvidia.com/gpu.serial"] = f"{1320000000000 + n * 31}"
                if dra:  # the DRA driver publishes the GPUs; the device plugin does not run
                    for which in ("allocatable", "capacity"):
                        for key in [k for k in status[which] if k.startswith("nvidia.com/")]:
                            del status[which][key]
            _status_extras(node, n, rng)
            out.append(node)
            n += 1
    return out


def is_gpu_node(node: dict[str, Any]) -> bool:
    return bool(node["metadata"]["labels"].get("pool", "cpu") != "cpu")


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": DRA_DRIVER, "uid": "uid-deviceclass-gpu", "resourceVersion": "1"},
        "spec": {
            "selectors": [{"cel": {"expression": f"device.driver == '{DRA_DRIVER}' && "
                                                 f"device.attributes['{DRA_DRIVER}'].type == 'gpu'"}}],
            "extendedResourceName": "nvidia.com/gpu",
        },
    }


def resource_slice(node: dict[str, Any], gpus: int = 8) -> dict[str, Any]:
    """One node's GPUs as NVIDIA's DRA driver publishes them (one pool per node, one slice)."""
    name = node["metadata"]["name"]
    product = node["metadata"]["labels"].get("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB").replace("-", " ")
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"}, "uuid": {"string": f"GPU-{name}-{i}"},
                "productName": {"string": product}, "brand": {"string": "Nvidia"},
                "architecture": {"string": "Hopper" if "H100" in product else "Ampere"},
                "cudaComputeCapability": {"version": "9.0.0" if "H100" in product else "8.0.0"},
                "driverVersion": {"version": "570.124.6"}, "cudaDriverVersion": {"version": "12.8.0"},
                "pcieBusID": {"string": f"0000:{0x18 + i * 0x10:02x}:00.0"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(gpus)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-{DRA_DRIVER}-x7k2p", "uid": f"uid-slice-{name}", "resourceVersion": "1",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                          "uid": node["metadata"]["uid"], "controller": True}]},
        "spec": {"driver": DRA_DRIVER, "nodeName": name,
                 "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": devices},
    }


@dataclass
class NodeChurn:
    """Which node is relabelled (GFD) or reports status (kubelet) next, at the real rates."""

    gpu_nodes: list[str]
    all_nodes: list[str]
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    _gfd: int = 0
    _status: int = 0

    @property
    def events_per_second(self) -> float:
        return len(self.gpu_nodes) / GFD_INTERVAL_S + len(self.all_nodes) / STATUS_INTERVAL_S

    def schedule(self, start: float) -> Iterator[tuple[float, str, str]]:
        """(time, kind, node) of each event from ``start`` on: ``gfd`` or ``status``."""
        gfd_step = GFD_INTERVAL_S / max(1, len(self.gpu_nodes))
        status_step = STATUS_INTERVAL_S / max(1, len(self.all_nodes))
        next_gfd, next_status = start, start + status_step / 2
        while True:
            if self.gpu_nodes and next_gfd <= next_status:
                yield next_gfd, "gfd", self.gpu_nodes[self._gfd % len(self.gpu_nodes)]
                self._gfd += 1
                next_gfd += gfd_step
            else:
                yield next_status, "status", self.all_nodes[self._status % len(self.all_nodes)]
                self._status += 1
                next_status += status_step


def apply_node_event(node: dict[str, Any], kind: str, epoch: float) -> None:
    """What GFD's relabelling or a kubelet's status report changes in a Node object."""
    if kind == "gfd":
        node["metadata"]["labels"][GFD_TIMESTAMP] = str(int(epoch))
    else:
        stamp = _rfc3339(epoch)
        for condition in node["status"].get("conditions", ()):
            condition["lastHeartbeatTime"] = stamp


def _rfc3339(epoch: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ClaimChurn:
    """ResourceClaims of pods that come and go: each is created, allocated one GPU by the scheduler
    a moment later, and deleted when its pod ends (``lifetime`` seconds on)."""

    gpu_nodes: list[str]
    gpus: int = 8
    lifetime: float = 60.0
    rng: random.Random = field(default_factory=lambda: random.Random(11))
    free: dict[str, list[int]] = field(default_factory=dict)
    serial: int = 0

    def __post_init__(self) -> None:
        self.free = {n: list(range(self.gpus)) for n in self.gpu_nodes}

    def create(self) -> dict[str, Any]:
        self.serial += 1
        team = f"team-{self.serial % 20}"
        pod = f"job-{self.serial:07d}-worker-0"
        return {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {
                "name": f"{pod}-gpu-{self.rng.getrandbits(20):05x}", "namespace": team,
                "uid": f"uid-claim-{self.serial}", "generateName": f"{pod}-gpu-",
                "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod,
                                     "uid": f"uid-pod-{self.serial}", "controller": True,
                                     "blockOwnerDeletion": True}],
            },
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": DRA_DRIVER, "allocationMode": "ExactCount", "count": 1}}]}},
        }

    def allocate(self, claim: dict[str, Any]) -> dict[str, Any] | None:
        """The claim as the scheduler leaves it: one free GPU of some node allocated and reserved."""
        nodes = [n for n, free in self.free.items() if free]
        if not nodes:
            return None
        node = self.rng.choice(nodes)
        device = self.free[node].pop()
        claim = copy.deepcopy(claim)
        owner = claim["metadata"]["ownerReferences"][0]
        claim["status"] = {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRA_DRIVER, "pool": node,
                                         "device": f"gpu-{device}"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": owner["name"], "uid": owner["uid"]}],
        }
        return claim

    def release(self, claim: dict[str, Any]) -> None:
        for result in claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", ()):
            self.free[result["pool"]].append(int(result["device"].split("-")[1]))

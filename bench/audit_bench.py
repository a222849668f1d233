"""Time and peak memory of ``gpuguard audit`` over 10,000 distinct workloads and a 5,000-node cluster.

    .venv/bin/python bench/audit_bench.py [--nodes 5000] [--workloads 10000] [--pods-per-deployment 2]

Writes, in a child process, a synthetic but realistic ``kubectl get deploy,sts,jobs,cronjobs,
pytorchjobs,rayclusters,pods -A -o json`` dump (every workload distinct: its own name, namespace,
image, GPU count, selectors and tolerations; Deployments with running pods whose ReplicaSets are
not in the dump) and two ``kubectl get nodes,runtimeclasses -o json`` snapshots of a heterogeneous
fleet (H100, A100, L4 x4, L4 x1 and T4 pools on several drivers, CPU nodes, cordoned nodes): today,
and after a change (A100 driver rolled back, T4 pool retired, H100 pool tainted).

Each measurement runs in a fresh process, so its peak RSS is its own:
  * ``baseline``: ``json.load`` of the workload dump and the snapshot (the least any tool does);
  * ``facts``:    loading the snapshot into cluster facts;
  * ``audit``:    ``gpuguard audit dump.json --cluster today.json --format json``;
  * ``change``:   the same with ``--cluster-after after.json`` (every workload judged twice);
  * ``html``:     the change as ``--format html`` (the node-pool matrix too).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import fresh_process  # noqa: E402

POOLS = (  # (share of GPU nodes, product, instance type, GPUs, driver, CUDA)
    (0.25, "NVIDIA-H100-80GB-HBM3", "p5.48xlarge", 8, "570.124.06", "12.8"),
    (0.25, "NVIDIA-A100-SXM4-80GB", "p4de.24xlarge", 8, "550.127.05", "12.4"),
    (0.15, "NVIDIA-L4", "g6.12xlarge", 4, "550.127.05", "12.4"),
    (0.15, "NVIDIA-L4", "g6.xlarge", 1, "535.216.01", "12.2"),
    (0.20, "Tesla-T4", "g4dn.xlarge", 1, "535.216.01", "12.2"),
)
CPU_SHARE = 0.1
IMAGES = ("nvcr.io/nvidia/pytorch:24.{m:02d}-py3", "nvidia/cuda:12.{m}.0-runtime-ubuntu22.04",
          "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", "nvcr.io/nvidia/tritonserver:24.{m:02d}-py3",
          "registry.example.com/team-{m}/trainer:v{m}.3")
KINDS = (("Deployment", 0.40), ("StatefulSet", 0.10), ("Job", 0.20), ("CronJob", 0.05), ("PyTorchJob", 0.15),
         ("RayCluster", 0.05), ("Pod", 0.05))


def _pick(shares: Any, roll: float) -> Any:
    for item in shares:
        roll -= item[0] if isinstance(item[0], float) else item[1]
        if roll <= 0:
            return item
    return shares[-1]


def _driver_labels(full: str, cuda: str) -> dict[str, str]:
    major, minor, rev = full.split(".")
    return {"nvidia.com/cuda.driver-version.full": full, "nvidia.com/cuda.driver-version.major": major,
            "nvidia.com/cuda.driver-version.minor": minor, "nvidia.com/cuda.driver-version.revision": rev,
            "nvidia.com/cuda.runtime-version.full": cuda}


def node(i: int, rng: random.Random) -> dict[str, Any]:
    name = f"ip-10-{i // 250}-{i % 250}-{rng.randrange(1, 250)}.ec2.internal"
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "topology.kubernetes.io/zone": f"us-east-1{'abc'[i % 3]}",
              "node.kubernetes.io/instance-id": f"i-{rng.getrandbits(64):016x}"}
    status: dict[str, Any] = {"capacity": {"cpu": "96", "memory": "1056455220Ki", "pods": "110"},
                              "allocatable": {"cpu": "95500m", "memory": "1045969460Ki", "pods": "110"},
                              "images": [{"names": [f"nvcr.io/nvidia/pytorch@sha256:{rng.getrandbits(256):064x}"],
                                          "sizeBytes": 9_000_000_000} for _ in range(3)],
                              "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}
    spec: dict[str, Any] = {"providerID": f"aws:///us-east-1a/i-{rng.getrandbits(64):016x}"}
    if rng.random() >= CPU_SHARE:
        _, product, instance, gpus, driver, cuda = _pick(POOLS, rng.random())
        labels.update({"node.kubernetes.io/instance-type": instance, "nvidia.com/gpu.product": product,
                       "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.present": "true",
                       "nvidia.com/gfd.timestamp": str(1764500000 + i), **_driver_labels(driver, cuda)})
        for part in ("capacity", "allocatable"):
            status[part]["nvidia.com/gpu"] = str(gpus)
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    else:
        labels["node.kubernetes.io/instance-type"] = "m7i.24xlarge"
    if rng.random() < 0.005:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"{rng.getrandbits(128):032x}", "labels": labels,
                         "creationTimestamp": "2026-11-01T00:00:00Z"},
            "spec": spec, "status": status}


def after_change(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for n in nodes:
        labels = n["metadata"]["labels"]
        product = labels.get("nvidia.com/gpu.product")
        if product == "Tesla-T4":
            continue  # retired
        n = json.loads(json.dumps(n))
        labels = n["metadata"]["labels"]
        if product == "NVIDIA-A100-SXM4-80GB":
            labels.update(_driver_labels("535.216.01", "12.2"))
        if product == "NVIDIA-H100-80GB-HBM3":
            n["spec"]["taints"].append({"key": "dedicated", "value": "training", "effect": "NoSchedule"})
        out.append(n)
    return out


def pod_spec(i: int, rng: random.Random) -> dict[str, Any]:
    product = _pick(POOLS, rng.random())[1]
    gpus = rng.choice((1, 1, 2, 4, 8))
    image = rng.choice(IMAGES).format(m=1 + i % 11)
    limits = {"cpu": str(rng.choice((4, 8, 16))), "memory": f"{rng.choice((32, 64, 128))}Gi", "nvidia.com/gpu":
              str(gpus)}
    if rng.random() < 0.02:
        limits["nvidia.com/gpus"] = limits.pop("nvidia.com/gpu")  # a typo
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": image, "resources": {"limits": limits},
                        "env": [{"name": f"VAR_{k}", "value": f"{rng.getrandbits(32):x}"} for k in range(4)],
                        "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}] if rng.random() < 0.7 else []}],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
    }
    if rng.random() < 0.8:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
    if rng.random() < 0.9:
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return spec


def workload(i: int, rng: random.Random) -> list[dict[str, Any]]:
    kind = _pick(KINDS, rng.random())[0]
    namespace = f"team-{i % 80}"
    name = f"{kind.lower()}-{i:05d}"
    uid = f"{rng.getrandbits(128):032x}"
    meta = {"name": name, "namespace": namespace, "uid": uid, "creationTimestamp": "2026-11-20T00:00:00Z"}
    spec = pod_spec(i, rng)
    template = {"metadata": {"labels": {"app": name}}, "spec": spec}
    if kind == "Deployment":
        obj = {"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}}, "template": template}}
    elif kind == "StatefulSet":
        obj = {"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
               "spec": {"serviceName": name, "selector": {"matchLabels": {"app": name}}, "template": template}}
    elif kind == "Job":
        obj = {"apiVersion": "batch/v1", "kind": kind, "metadata": meta,
               "spec": {"template": {**template, "spec": {**spec, "restartPolicy": "Never"}}}}
    elif kind == "CronJob":
        obj = {"apiVersion": "batch/v1", "kind": kind, "metadata": meta, "spec": {
            "schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {**template, "spec": {
                **spec, "restartPolicy": "Never"}}}}}}
    elif kind == "PyTorchJob":
        replica = {"replicas": 1, "template": template}
        obj = {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": meta,
               "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": {**replica, "replicas": 3}}}}
    elif kind == "RayCluster":
        obj = {"apiVersion": "ray.io/v1", "kind": kind, "metadata": meta, "spec": {
            "headGroupSpec": {"template": {"spec": {"containers": [
                {"name": "ray-head", "image": "rayproject/ray:2.40.0"}]}}},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": 2, "template": template}]}}
    else:
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}
    out = [obj]
    if kind == "Deployment":
        rs = f"{name}-{rng.getrandbits(32):08x}"
        for k in range(2):
            out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": f"{rs}-{k}", "namespace": namespace, "uid": f"{rng.getrandbits(128):032x}",
                "labels": {"app": name, "pod-template-hash": rs.rsplit("-", 1)[1]},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs,
                                     "uid": f"{rng.getrandbits(128):032x}", "controller": True}]},
                "spec": {**spec, "nodeName": f"node-{k}"}, "status": {"phase": "Running"}})
    return out


def generate(nodes: int, workloads: int, directory: str) -> dict[str, Any]:
    t = time.perf_counter()
    rng = random.Random(20261130)
    fleet = [node(i, rng) for i in range(nodes)]
    classes = [{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
                "handler": "nvidia"}]
    items = [o for i in range(workloads) for o in workload(i, rng)]
    out: dict[str, Any] = {"objects": len(items)}
    for name, objects in (("dump.json", items), ("today.json", fleet + classes),
                          ("after.json", after_change(fleet) + classes)):
        path = Path(directory) / name
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=4))
        out[name] = path.stat().st_size / 1048576
    out["seconds"] = time.perf_counter() - t
    return out


def measure(kind: str, directory: str) -> dict[str, Any]:
    d = Path(directory)
    start, cpu = time.perf_counter(), time.process_time()
    out: dict[str, Any] = {}
    if kind == "baseline":
        for name in ("dump.json", "today.json"):
            with open(d / name, "rb") as fh:
                json.load(fh)
    elif kind == "facts":
        from gpuguard.sources.snapshot import load_cluster_facts

        facts = load_cluster_facts(str(d / "today.json"))
        out["groups"] = len(facts.groups)
    else:
        from gpuguard.cli import main as gpuguard

        argv = ["audit", str(d / "dump.json"), "--cluster", str(d / "today.json"), "--format", "json",
                "--output", os.devnull]
        if kind in ("change", "html"):
            argv += ["--cluster-after", str(d / "after.json")]
        if kind == "html":
            argv[argv.index("json")] = "html"
            argv[argv.index(os.devnull)] = str(d / "audit.html")
        with contextlib.redirect_stderr(io.StringIO()) as said:
            out["exit"] = gpuguard(argv)
        out["said"] = said.getvalue().strip()
    out["seconds"] = time.perf_counter() - start
    out["cpu_seconds"] = time.process_time() - cpu
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _child(*args: str) -> dict[str, Any]:
    return fresh_process.child(__file__, *args)


def _line(label: str, res: dict[str, Any]) -> str:
    return fresh_process.line(label, res, 34)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--workloads", type=int, default=10000)
    fresh_process.add_child_modes(parser, ("KIND", "DIR"), ("NODES", "WORKLOADS", "DIR"))
    args = parser.parse_args()
    if fresh_process.run_child_mode(args, measure, generate):
        return 0
    with tempfile.TemporaryDirectory(prefix="gpuguard-audit-bench-") as tmp:
        gen = _child("--generate", str(args.nodes), str(args.workloads), tmp)
        print(f"dump: {args.workloads} workloads ({gen['objects']} objects with the Deployments' pods), "
              f"{gen['dump.json']:.0f} MiB of JSON; snapshots of {args.nodes} nodes, {gen['today.json']:.0f} MiB "
              f"(generated in {gen['seconds']:.0f} s)")
        results = {kind: _child("--measure", kind, tmp) for kind in ("baseline", "facts", "audit", "change", "html")}
        html_mib = (Path(tmp) / "audit.html").stat().st_size / 1048576
    base = results["baseline"]
    print(_line("json.load of dump + snapshot", base))
    print(_line(f"cluster facts ({results['facts']['groups']} node groups)", results["facts"]))
    print(_line("audit --format json", results["audit"]) + f"   {results['audit']['said']}")
    print(_line("audit --cluster-after", results["change"]) + f"   {results['change']['said']}")
    print(_line(f"audit --cluster-after --format html ({html_mib:.1f} MiB)", results["html"]))
    for kind in ("audit", "change"):
        r = results[kind]
        print(f"  {kind}: {r['cpu_seconds'] / base['cpu_seconds']:.1f}x json.load CPU, "
              f"{r['peak_rss_mib'] / base['peak_rss_mib']:.2f}x its peak memory; "
              f"{1000 * r['cpu_seconds'] / args.workloads:.2f} ms CPU per workload")
    return 0


if __name__ == "__main__":
    sys.exit(main())

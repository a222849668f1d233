"""What the whole-job rules cost: ``gpuguard lint`` of 500 distinct gangs against a 5,000-node snapshot,
with the gang, quota and queue rules and without them.

    .venv/bin/python bench/gang_bench.py [--nodes 5000] [--gangs 500] [--repeat 3]

Writes, in a child process:

* ``snapshot.json`` — ``kubectl get nodes,runtimeclasses,nodepools,resourcequotas,localqueues,
  clusterqueues,resourceflavors -A -o json`` of a heterogeneous fleet: bench/fleet.py's 5,000 nodes
  (A100, H100, T4 and A100-MIG pools and CPU nodes cloned from examples/cluster.yaml, each node's
  allocatable memory and storage a few KiB apart, as real kubelets report them), two Karpenter
  NodePools capped at ``limits: {nvidia.com/gpu: …}``, a ResourceQuota with ``requests.nvidia.com/gpu``
  in each of 25 team namespaces, and Kueue's objects for them (a ResourceFlavor per GPU pool with its
  ``nodeLabels``, a ClusterQueue per team in two cohorts, a LocalQueue per namespace);
* ``gangs.yaml`` — 500 distinct gangs of every kind that has them: Kubeflow PyTorchJobs, TFJobs and
  MPIJobs, JobSets, LeaderWorkerSets, TrainJobs, Volcano Jobs, gang-scheduled RayClusters and Jobs
  Kueue admits as one workload (``kueue.x-k8s.io/queue-name``), each with its own name, namespace,
  replica counts, GPUs per pod, pool selector and image; some fit, some do not.

Then, each in a fresh process and alternating, ``--repeat`` times (the best CPU time of each counts):
``gpuguard lint gangs.yaml --cluster snapshot.json --format json`` (``gangs``) and the same with
``--disable gpu-gang-unschedulable --disable gpu-quota-exceeded --disable gpu-queue-unadmittable``
(``without``).  The goal: ``gangs`` within 2x ``without``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import fleet  # noqa: E402
import fresh_process  # noqa: E402

WHOLE_JOB_RULES = ("gpu-gang-unschedulable", "gpu-quota-exceeded", "gpu-queue-unadmittable")
TEAMS = 25
GPU_POOLS = {"a100": "nvidia.com/gpu", "h100": "nvidia.com/gpu", "t4": "nvidia.com/gpu"}
KINDS = ("PyTorchJob", "TFJob", "MPIJob", "JobSet", "LeaderWorkerSet", "TrainJob", "VolcanoJob", "RayCluster",
         "KueueJob")
IMAGES = ("nvcr.io/nvidia/pytorch:24.{m:02d}-py3", "nvcr.io/nvidia/tensorflow:24.{m:02d}-tf2-py3",
          "mpioperator/openmpi:0.{m}.0", "vllm/vllm-openai:v0.{m}.2", "rayproject/ray:2.{m}.0-gpu",
          "registry.example.com/team-{m}/trainer:v{m}.1")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
KUEUE = "kueue.x-k8s.io/v1beta2"


def _pod(rng: random.Random, i: int, pool: str, gpus: int, role: str) -> dict[str, Any]:
    image = rng.choice(IMAGES).format(m=1 + i % 9)
    requests = {"cpu": str(rng.choice((4, 8, 16))), "memory": f"{rng.choice((32, 64, 128))}Gi"}
    resources: dict[str, Any] = {"requests": requests,
                                 "limits": {"memory": f"{rng.choice((64, 128, 256))}Gi"}}
    if gpus:
        resources["limits"][GPU_POOLS[pool]] = gpus
    spec: dict[str, Any] = {
        "nodeSelector": {"pool": pool},
        "tolerations": [GPU_TOLERATION],
        "containers": [{"name": role, "image": image, "resources": resources,
                        "env": [{"name": "JOB_INDEX", "value": str(i)}],
                        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }
    return {"metadata": {"labels": {"app": f"job-{i}", "role": role}}, "spec": spec}


def gang(i: int, rng: random.Random) -> dict[str, Any]:
    kind = KINDS[i % len(KINDS)]
    team = i % TEAMS
    ns = f"team-{team:02d}"
    pool = rng.choice(tuple(GPU_POOLS))
    per = {"a100": 8, "h100": 8, "t4": 1}[pool]
    gpus = rng.choice((per, max(1, per // 2)))
    n = rng.choice((2, 4, 8, 16, 64, 256))  # the larger ones cannot all run on their pool
    meta: dict[str, Any] = {"name": f"{kind.lower()}-{i:04d}", "namespace": ns}
    worker = _pod(rng, i, pool, gpus, "worker")
    if kind in ("PyTorchJob", "TFJob", "MPIJob"):
        key = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}[kind]
        head = {"PyTorchJob": "Master", "TFJob": "Chief", "MPIJob": "Launcher"}[kind]
        version = "kubeflow.org/v2beta1" if kind == "MPIJob" else "kubeflow.org/v1"
        lead = _pod(rng, i, pool, 0 if kind == "MPIJob" else gpus, "launcher")
        return {"apiVersion": version, "kind": kind, "metadata": meta, "spec": {key: {
            head: {"replicas": 1, "template": lead}, "Worker": {"replicas": n - 1, "template": worker}}}}
    if kind == "JobSet":
        jobs = max(1, n // 4)
        return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta, "spec": {
            "replicatedJobs": [{"name": "workers", "replicas": jobs, "template": {"spec": {
                "parallelism": max(1, n // jobs), "completions": max(1, n // jobs), "template": worker}}}]}}
    if kind == "LeaderWorkerSet":
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta, "spec": {
            "replicas": rng.choice((1, 2)), "leaderWorkerTemplate": {"size": n, "workerTemplate": worker}}}
    if kind == "TrainJob":
        resources = worker["spec"]["containers"][0]["resources"]
        return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": meta, "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": n, "image": worker["spec"]["containers"][0]["image"],
                        "resourcesPerNode": resources}}}
    if kind == "VolcanoJob":
        return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": meta, "spec": {
            "minAvailable": n, "schedulerName": "volcano",
            "tasks": [{"name": "worker", "replicas": n, "template": worker}]}}
    if kind == "RayCluster":
        meta["labels"] = {"ray.io/gang-scheduling-enabled": "true"}
        ray_head = _pod(rng, i, pool, 0, "ray-head")
        return {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": meta, "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": ray_head},
            "workerGroupSpecs": [{"groupName": "gpu", "replicas": n - 1, "minReplicas": n - 1,
                                  "maxReplicas": n - 1, "rayStartParams": {}, "template": worker}]}}
    meta["labels"] = {"kueue.x-k8s.io/queue-name": f"{ns}-queue"}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
        "parallelism": n, "completions": n, "suspend": True, "template": {
            **worker, "spec": {**worker["spec"], "restartPolicy": "Never"}}}}


def queue_objects() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for pool in GPU_POOLS:
        out.append({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": pool},
                    "spec": {"nodeLabels": {"pool": pool}, "tolerations": [GPU_TOLERATION]}})
    for team in range(TEAMS):
        ns = f"team-{team:02d}"
        flavors = [{"name": pool, "resources": [{"name": "cpu", "nominalQuota": 512}, {"name": "memory",
                    "nominalQuota": "8Ti"}, {"name": "nvidia.com/gpu", "nominalQuota": 64 if pool != "t4" else 16,
                    **({"lendingLimit": 16} if team % 3 == 0 else {})}]} for pool in GPU_POOLS]
        out.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": ns},
                    "spec": {"cohortName": f"cohort-{team % 2}", "namespaceSelector": {},
                             "resourceGroups": [{"coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                                                 "flavors": flavors}]}})
        out.append({"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": f"{ns}-queue", "namespace": ns},
                    "spec": {"clusterQueue": ns}})
        out.append({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": ns},
                    "spec": {"hard": {"requests.nvidia.com/gpu": str(128 + 64 * (team % 4)), "pods": "500"}}})
    return out


def nodepools() -> list[dict[str, Any]]:
    out = []
    for name, family, gpus in (("p5-spot", "p5", 64), ("g6-burst", "g6", 32)):
        out.append({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": {
            "template": {"metadata": {"labels": {"pool": f"karpenter-{family}"}}, "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [family]}],
                "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]}},
            "limits": {"nvidia.com/gpu": gpus}}})
    return out


def generate(nodes: int, gangs: int, directory: str) -> dict[str, Any]:
    start = time.perf_counter()
    d = Path(directory)
    items = [*fleet.fleet(nodes), *fleet.runtime_classes(), *nodepools(), *queue_objects()]
    (d / "snapshot.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    rng = random.Random(20261201)
    jobs = [gang(i, rng) for i in range(gangs)]
    (d / "gangs.yaml").write_text(yaml.safe_dump_all(jobs, sort_keys=False))
    return {"seconds": time.perf_counter() - start, "objects": len(items),
            "snapshot_mib": (d / "snapshot.json").stat().st_size / 1048576,
            "gangs_mib": (d / "gangs.yaml").stat().st_size / 1048576}


def measure(kind: str, directory: str) -> dict[str, Any]:
    from gpuguard.cli import main as gpuguard

    d = Path(directory)
    argv = ["lint", str(d / "gangs.yaml"), "--cluster", str(d / "snapshot.json"), "--format", "json"]
    if kind == "without":
        for rule in WHOLE_JOB_RULES:
            argv += ["--disable", rule]
    start, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()):
        code = gpuguard(argv)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    report = json.loads(out.getvalue())
    rules: dict[str, int] = {}
    for f in report["findings"]:
        if f["rule"] in WHOLE_JOB_RULES:
            rules[f["rule"]] = rules.get(f["rule"], 0) + 1
    return {"exit": code, "seconds": seconds, "cpu_seconds": cpu_seconds, "whole_job_findings": rules,
            "findings": len(report["findings"]),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement, alternating; best counts")
    fresh_process.add_child_modes(parser, ("KIND", "DIR"), ("NODES", "GANGS", "DIR"))
    args = parser.parse_args()
    if fresh_process.run_child_mode(args, measure, generate):
        return 0
    with tempfile.TemporaryDirectory(prefix="gpuguard-gang-bench-") as tmp:
        gen = fresh_process.child(__file__, "--generate", str(args.nodes), str(args.gangs), tmp)
        print(f"snapshot: {args.nodes} nodes and {gen['objects'] - args.nodes} other objects, "
              f"{gen['snapshot_mib']:.0f} MiB of JSON; {args.gangs} gangs, {gen['gangs_mib']:.1f} MiB of YAML "
              f"(generated in {gen['seconds']:.0f} s)")
        runs: dict[str, list[dict[str, Any]]] = {"gangs": [], "without": []}
        for _ in range(args.repeat):
            for kind in ("without", "gangs"):
                runs[kind].append(fresh_process.child(__file__, "--measure", kind, tmp))
    best = {kind: min(found, key=lambda r: r["cpu_seconds"]) for kind, found in runs.items()}
    for kind, label in (("without", "lint --disable the three whole-job rules"), ("gangs", "lint with them")):
        r = best[kind]
        print(fresh_process.line(label, r, 44) + f"   exit {r['exit']}, {r['findings']} findings "
              f"{json.dumps(r['whole_job_findings'], sort_keys=True)}")
    ratio = best["gangs"]["cpu_seconds"] / best["without"]["cpu_seconds"]
    extra = best["gangs"]["cpu_seconds"] - best["without"]["cpu_seconds"]
    print(f"whole-job rules: {ratio:.2f}x the CPU time without them ({1000 * extra / args.gangs:.1f} ms CPU per gang); "
          f"goal <= 2x: {'met' if ratio <= 2 else 'NOT met'}")
    print("all runs (CPU s): " + "; ".join(f"{k} " + ", ".join(f"{r['cpu_seconds']:.2f}" for r in v)
                                          for k, v in runs.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

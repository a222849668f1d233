"""Time and peak memory of loading a large cluster dump and analysing its pending GPU pods.

    .venv/bin/python bench/pending_bench.py [--nodes 5000] [--pods 50000] [--yaml-pods 5000]

Writes a synthetic but realistic ``kubectl get nodes,pods,events,priorityclasses -A -o json`` dump
(kubectl's 4-space indentation; heterogeneous pools: H100 and A100 8-GPU nodes, L4 1- and 4-GPU
nodes, T4 nodes, CPU nodes; unhealthy, plugin-down, cordoned and NotReady nodes; every pod distinct,
with env, volumes and container statuses as the API server returns them; running, bound-pending,
succeeded, failed, terminating, nominated and pending pods with scheduler messages and events).

Each measurement runs in a fresh process, so peak RSS is its own:
  * ``baseline``: ``json.load`` of the dump (the least any Python tool does to read it);
  * ``load``: gpuguard.kube.dump.load_dumps;
  * ``full``: load + ClusterState.build (allocation, pools, health) + fit, preemption and
    scheduler-message analysis of every pending GPU pod;
  * ``cli-text`` / ``cli-json``: ``gpuguard why-pending --dump FILE -A --format text|json --output
    OUT`` end to end (the above, plus the engine's static findings for every pending pod, the
    whole diagnosis and the rendered report).
``--yaml-pods`` also writes the first N pods with all nodes as YAML and times ``full`` on it.
"""

from __future__ import annotations

import argparse
import json
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

POOLS = (  # (share of GPU nodes, product, instance type, GPUs per node)
    (0.30, "NVIDIA-H100-80GB-HBM3", "p5.48xlarge", 8),
    (0.30, "NVIDIA-A100-SXM4-80GB", "p4de.24xlarge", 8),
    (0.15, "NVIDIA-L4", "g6.12xlarge", 4),
    (0.10, "NVIDIA-L4", "g6.xlarge", 1),
    (0.15, "Tesla-T4", "g4dn.xlarge", 1),
)
CPU_NODE_SHARE = 0.1
PENDING_SHARE = 0.02


def _pick_pool(share: float) -> tuple[str, str, int]:
    for weight, product, instance, count in POOLS:
        share -= weight
        if share <= 0:
            return product, instance, count
    return POOLS[-1][1:]


def _node(i: int, rng: random.Random) -> dict[str, Any]:
    name = f"ip-10-{i // 250}-{i % 250}-{rng.randrange(1, 250)}.ec2.internal"
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "topology.kubernetes.io/zone": f"us-east-1{'abc'[i % 3]}", "node.kubernetes.io/instance-id":
              f"i-{rng.getrandbits(64):016x}", "karpenter.sh/capacity-type": "on-demand"}
    status: dict[str, Any] = {"capacity": {"cpu": "96", "memory": "1056455220Ki", "pods": "110"},
                              "allocatable": {"cpu": "95500m", "memory": "1045969460Ki", "pods": "110"}}
    taints: list[dict[str, Any]] = []
    gpus = 0
    if rng.random() >= CPU_NODE_SHARE:
        product, instance, count = _pick_pool(rng.random())
        gpus = count
        labels.update({"node.kubernetes.io/instance-type": instance, "nvidia.com/gpu.product": product,
                       "nvidia.com/gpu.count": str(count), "nvidia.com/gpu.present": "true",
                       "nvidia.com/cuda.driver-version.full": "570.124.06",
                       "nvidia.com/gfd.timestamp": str(1764500000 + i)})
        allocatable = count
        roll = rng.random()
        if roll < 0.01:
            allocatable = count - 1  # an XID took one device out
        elif roll < 0.015:
            allocatable = 0  # plugin disconnected
        status["capacity"]["nvidia.com/gpu"] = str(count)
        status["allocatable"]["nvidia.com/gpu"] = str(allocatable)
        taints.append({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"})
    else:
        labels["node.kubernetes.io/instance-type"] = "m7i.24xlarge"
    ready = "False" if rng.random() < 0.005 else "True"
    status["conditions"] = [
        {"type": t, "status": "False", "reason": f"KubeletHasSufficient{t}", "message": "ok",
         "lastHeartbeatTime": "2026-11-30T11:59:00Z", "lastTransitionTime": "2026-11-01T00:00:00Z"}
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ] + [{"type": "Ready", "status": ready, "reason": "KubeletReady", "message": "kubelet is posting ready status",
          "lastHeartbeatTime": "2026-11-30T11:59:00Z", "lastTransitionTime": "2026-11-01T00:00:00Z"}]
    status["nodeInfo"] = {"kubeletVersion": "v1.33.2", "containerRuntimeVersion": "containerd://1.7.27",
                          "osImage": "Amazon Linux 2023", "kernelVersion": "6.1.132", "architecture": "amd64",
                          "machineID": f"{rng.getrandbits(128):032x}", "systemUUID": f"{rng.getrandbits(128):032x}",
                          "bootID": f"{rng.getrandbits(128):032x}", "operatingSystem": "linux",
                          "kubeProxyVersion": "", "containerRuntime": "containerd"}
    status["addresses"] = [{"type": "InternalIP", "address": f"10.{i // 250}.{i % 250}.1"},
                           {"type": "Hostname", "address": name}]
    status["images"] = [{"names": [f"nvcr.io/nvidia/pytorch@sha256:{rng.getrandbits(256):064x}"],
                         "sizeBytes": 9_000_000_000} for _ in range(3)]
    spec: dict[str, Any] = {"providerID": f"aws:///us-east-1a/i-{rng.getrandbits(64):016x}", "taints": taints}
    if rng.random() < 0.005:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "uid": f"{rng.getrandbits(128):032x}", "labels": labels,
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                         "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
                         "creationTimestamp": "2026-11-01T00:00:00Z", "resourceVersion": str(1000 + i)},
            "spec": spec, "status": status, "_gpus": gpus}


def _container(name: str, gpus: int, rng: random.Random) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {"cpu": f"{rng.choice((1, 2, 4, 8))}", "memory": f"{rng.choice((8, 16, 64))}Gi"},
                           "limits": {"memory": "64Gi"}}
    if gpus:
        res["requests"]["nvidia.com/gpu"] = str(gpus)
        res["limits"]["nvidia.com/gpu"] = str(gpus)
    return {"name": name, "image": f"nvcr.io/nvidia/pytorch:24.{rng.randrange(1, 12):02d}-py3",
            "command": ["torchrun", "--nproc-per-node", str(max(gpus, 1)), "train.py"],
            "env": [{"name": f"TRAIN_VAR_{k}", "value": f"{rng.getrandbits(40):x}"} for k in range(8)],
            "resources": res,
            "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"},
                             {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                              "readOnly": True}],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent"}


def _pod(i: int, node: dict[str, Any] | None, gpus: int, phase: str, rng: random.Random,
         pending_message: str | None = None) -> dict[str, Any]:
    ns = f"team-{i % 60}"
    name = f"job-{i:06d}-{rng.getrandbits(20):05x}"
    uid = f"{rng.getrandbits(128):032x}"
    spec: dict[str, Any] = {
        "containers": [_container("main", gpus, rng)],
        "restartPolicy": "Never", "schedulerName": "default-scheduler", "serviceAccountName": "default",
        "priority": rng.choice((0, 0, 0, 100, 1000)), "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300}],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}},
                    {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}],
    }
    if i % 25 == 0:
        spec["initContainers"] = [_container("fetch-data", gpus, rng)]
    if i % 40 == 0:
        spec["initContainers"] = [{**_container("proxy", 0, rng), "restartPolicy": "Always"}]
    status: dict[str, Any] = {"phase": phase, "qosClass": "Burstable"}
    if node is not None:
        spec["nodeName"] = node["metadata"]["name"]
        status.update({"hostIP": "10.0.0.1", "podIP": f"10.{i % 250}.{i // 250 % 250}.9",
                       "startTime": "2026-11-30T08:00:00Z",
                       "conditions": [{"type": t, "status": "True", "lastProbeTime": None,
                                       "lastTransitionTime": "2026-11-30T08:00:05Z"}
                                      for t in ("PodReadyToStartContainers", "Initialized", "Ready",
                                                "ContainersReady", "PodScheduled")],
                       "containerStatuses": [{"name": "main", "ready": phase == "Running", "restartCount": 0,
                                              "started": True, "image": spec["containers"][0]["image"],
                                              "imageID": f"nvcr.io/nvidia/pytorch@sha256:{rng.getrandbits(256):064x}",
                                              "containerID": f"containerd://{rng.getrandbits(256):064x}",
                                              "state": {"running": {"startedAt": "2026-11-30T08:00:04Z"}}}]})
    else:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": pending_message or "", "lastProbeTime": None,
                                 "lastTransitionTime": "2026-11-30T11:00:00Z"}]
    meta: dict[str, Any] = {
        "name": name, "namespace": ns, "uid": uid, "generateName": f"job-{i:06d}-",
        "creationTimestamp": "2026-11-30T08:00:00Z", "resourceVersion": str(10_000 + i),
        "labels": {"app": "train", "job-name": f"job-{i:06d}", "batch.kubernetes.io/controller-uid": uid},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": f"job-{i:06d}", "uid": uid,
                             "controller": True, "blockOwnerDeletion": True}],
    }
    if phase == "Running" and i % 200 == 0:
        meta["deletionTimestamp"] = "2026-11-30T11:58:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def build_dump(nodes: int, pods: int, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    node_objs = [_node(i, rng) for i in range(nodes)]
    gpu_nodes = [n for n in node_objs if n["_gpus"]]
    cpu_nodes = [n for n in node_objs if not n["_gpus"]]
    free = {n["metadata"]["name"]: n["_gpus"] for n in gpu_nodes}
    items: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    pending = int(pods * PENDING_SHARE)
    message = ("0/{n} nodes are available: {a} Insufficient nvidia.com/gpu, {b} node(s) had untolerated taint "
               "{{nvidia.com/gpu: present}}. preemption: 0/{n} nodes are available: {a} No preemption victims found "
               "for incoming pod, {b} Preemption is not helpful for scheduling.")
    text = message.format(n=nodes, a=len(gpu_nodes), b=len(cpu_nodes))
    # Fill every GPU node up to a small fragment (0-2 GPUs left): the "idle GPUs, pending pods" shape.
    plan: list[tuple[dict[str, Any], int]] = []
    for node in gpu_nodes:
        left = free[node["metadata"]["name"]] - rng.choice((0, 0, 0, 1, 2))
        while left > 0:
            gpus = rng.choice([g for g in (1, 2, 4, 8) if g <= left])
            plan.append((node, gpus))
            left -= gpus
    rng.shuffle(plan)
    i = 0
    for i in range(pending, pods):
        if plan:
            node, gpus = plan.pop()
            phase = "Running" if rng.random() < 0.97 else "Pending"  # bound and starting: holds GPUs
        elif rng.random() < 0.7:
            node, gpus, phase = rng.choice(cpu_nodes or gpu_nodes), 0, "Running"
        else:
            node, gpus = rng.choice(gpu_nodes or cpu_nodes), rng.choice((1, 2))
            phase = rng.choice(("Succeeded", "Failed"))
        items.append(_pod(i, node, gpus, phase, rng))
    for i in range(pending):
        gpus = rng.choice((1, 2, 4, 8))
        pod = _pod(pods + i, None, gpus, "Pending", rng, text)
        if i % 10 == 0 and gpu_nodes:
            pod["status"]["nominatedNodeName"] = rng.choice(gpu_nodes)["metadata"]["name"]
        items.append(pod)
        events.append({"apiVersion": "v1", "kind": "Event",
                       "metadata": {"name": f"{pod['metadata']['name']}.{i:x}", "namespace":
                                    pod["metadata"]["namespace"]},
                       "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod["metadata"]["name"],
                                          "namespace": pod["metadata"]["namespace"], "uid": pod["metadata"]["uid"]},
                       "reason": "FailedScheduling", "message": text, "type": "Warning",
                       "count": rng.randrange(1, 50), "lastTimestamp": "2026-11-30T11:55:00Z",
                       "source": {"component": "default-scheduler"}})
    for n in node_objs:
        del n["_gpus"]
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                "value": value, "globalDefault": value == 0, "preemptionPolicy": "PreemptLowerPriority"}
               for name, value in (("default", 0), ("batch", 100), ("prod", 1000), ("critical", 100000))]
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
            "items": [*node_objs, *items, *events, *classes]}


def measure(kind: str, path: str) -> dict[str, Any]:
    start = time.perf_counter()
    cpu = time.process_time()
    out: dict[str, Any] = {}
    if kind == "baseline":
        with open(path, "rb") as fh:
            json.load(fh)
        out["seconds"] = time.perf_counter() - start
    elif kind.startswith("cli-"):
        from gpuguard.cli import main as gpuguard

        written = Path(path).with_name(f"report.{kind}")
        code = gpuguard(["why-pending", "--dump", path, "-A", "--format", kind[len("cli-"):], "--output", str(written)])
        assert code == 0, code
        out["seconds"] = time.perf_counter() - start
        out["report_kib"] = written.stat().st_size / 1024
    else:
        from gpuguard.kube.dump import load_dumps

        load = load_dumps([path])
        assert not load.errors, load.errors
        out["load_seconds"] = time.perf_counter() - start
        out["load_cpu"] = time.process_time() - cpu
        if kind == "full":
            from policies.pending.events import scheduler_verdict
            from policies.pending.fit import FitAnalyser
            from policies.pending.health import cluster_issues
            from policies.pending.preemption import PreemptionAnalyser
            from policies.pending.state import ClusterState

            t, c = time.perf_counter(), time.process_time()
            state = ClusterState.build(load.objects)
            issues = cluster_issues(list(state.allocation.nodes.values()))
            out["build_seconds"], out["build_cpu"] = time.perf_counter() - t, time.process_time() - c
            t, c = time.perf_counter(), time.process_time()
            analyser = FitAnalyser(state)
            preemption = PreemptionAnalyser(state)
            verdicts: dict[str, int] = {}
            pending = state.pending_gpu_pods()
            for pod in pending:
                report = analyser.analyse(pod)
                if report.verdict != "fits":
                    preemption.analyse(report)
                scheduler_verdict(pod, state.events)
                verdicts[report.verdict] = verdicts.get(report.verdict, 0) + 1
            out["analyse_seconds"], out["analyse_cpu"] = time.perf_counter() - t, time.process_time() - c
            out.update(nodes=len(state.nodes), pods=len(state.pods), pending=len(pending), verdicts=verdicts,
                       pools=len(state.allocation.pools), gpu_nodes=len(state.allocation.nodes),
                       health_issues=len(issues))
        out["seconds"] = time.perf_counter() - start
    out["cpu_seconds"] = time.process_time() - cpu
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def generate(nodes: int, pods: int, yaml_pods: int, directory: str) -> dict[str, Any]:
    """Write cluster.json (and cluster.yaml with the first ``yaml_pods`` pods); runs in a child so
    the measuring processes do not inherit its memory."""
    t = time.perf_counter()
    dump = build_dump(nodes, pods)
    path = Path(directory) / "cluster.json"
    path.write_text(json.dumps(dump, indent=4))
    out: dict[str, Any] = {"objects": len(dump["items"]), "json_mib": path.stat().st_size / 1048576}
    if yaml_pods:
        import yaml

        kept = [o for o in dump["items"] if o["kind"] == "Node"]
        kept += [o for o in dump["items"] if o["kind"] == "Pod"][:yaml_pods]
        ypath = Path(directory) / "cluster.yaml"
        ypath.write_text(yaml.dump({**dump, "items": kept}, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
                                   sort_keys=False))
        out["yaml_mib"] = ypath.stat().st_size / 1048576
    out["seconds"] = time.perf_counter() - t
    return out


def _child(*args: str) -> dict[str, Any]:
    return fresh_process.child(__file__, *args)


def _line(label: str, res: dict[str, Any]) -> str:
    return fresh_process.line(label, res, 28)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--yaml-pods", type=int, default=5000, help="also time a YAML dump with this many pods")
    fresh_process.add_child_modes(parser, ("KIND", "FILE"), ("NODES", "PODS", "YAML_PODS", "DIR"))
    args = parser.parse_args()
    if fresh_process.run_child_mode(args, measure, generate):
        return 0
    with tempfile.TemporaryDirectory(prefix="gpuguard-pending-bench-") as tmp:
        gen = _child("--generate", str(args.nodes), str(args.pods), str(args.yaml_pods), tmp)
        print(f"dump: {args.nodes} nodes, {args.pods} pods, {gen['objects']} objects, {gen['json_mib']:.0f} MiB of "
              f"JSON (generated in {gen['seconds']:.0f} s)")
        path = Path(tmp) / "cluster.json"
        results = {kind: _child("--measure", kind, str(path))
                   for kind in ("baseline", "load", "full", "cli-text", "cli-json")}
        if args.yaml_pods:
            results["yaml"] = _child("--measure", "full", str(Path(tmp) / "cluster.yaml"))
    base, full = results["baseline"], results["full"]
    print(_line("json.load (baseline)", base))
    print(_line("load_dumps", results["load"]))
    print(_line("load + analysis", full))
    print(f"  CPU: load {full['load_cpu']:.2f} s, build {full['build_cpu']:.2f} s (allocation, pools, health), "
          f"{full['pending']} pending GPU pods analysed in {full['analyse_cpu']:.2f} s "
          f"(fit, preemption, scheduler message)")
    print(f"  {full['gpu_nodes']} GPU nodes in {full['pools']} pools, {full['health_issues']} health issues, "
          f"verdicts {full['verdicts']}; {full['cpu_seconds'] / base['cpu_seconds']:.2f}x json.load (CPU)")
    for fmt in ("text", "json"):
        res = results[f"cli-{fmt}"]
        print(_line(f"why-pending --format {fmt}", res) + f"   report {res['report_kib']:.0f} KiB")
    if "yaml" in results:
        print(_line(f"YAML {args.nodes} nodes + {args.yaml_pods} pods ({gen['yaml_mib']:.0f} MiB)", results["yaml"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

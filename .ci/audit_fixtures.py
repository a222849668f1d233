"""Write the audit test fixtures: a workload dump and a before/after pair of cluster snapshots.

    .venv/bin/python .ci/audit_fixtures.py        # rewrites tests/fixtures/audit/*.yaml

The objects have the shape ``kubectl get … -o yaml`` prints (a ``List`` of items with server-set
metadata: uids, ownerReferences, creationTimestamps, status).  The planned change is three things
an operator does to a GPU cluster at once:

* driver rollback: the A100 pool goes from driver 550.127.05 (CUDA 12.4) back to 535.216.01 (CUDA 12.2);
* pool removal: the three T4 nodes are retired;
* taint added: h100-1 is reserved for training (``dedicated=training:NoSchedule``), and h100-2 is
  repartitioned with MIG (mixed strategy, seven ``1g.10gb`` instances), so it offers no whole GPU.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "audit"
CREATED = "2026-11-02T09:12:44Z"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _uid(n: int) -> str:
    return f"5f0c2a7e-91d3-4b6a-8e2f-{n:012d}"


def _driver_labels(full: str, cuda: str) -> dict[str, str]:
    major, minor, rev = full.split(".")
    cmaj, cmin = cuda.split(".")
    return {
        "nvidia.com/cuda.driver-version.full": full,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": rev,
        "nvidia.com/cuda.runtime-version.full": cuda,
        "nvidia.com/cuda.runtime-version.major": cmaj,
        "nvidia.com/cuda.runtime-version.minor": cmin,
    }


def node(name: str, n: int, instance: str, product: str | None = None, gpus: int = 0, driver: str = "",
         cuda: str = "", taints: list[dict[str, str]] | None = None, compute: str = "",
         extra_labels: dict[str, str] | None = None, resources: dict[str, str] | None = None) -> dict[str, Any]:
    labels = {
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": instance,
        "topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": "us-east-1" + "abc"[n % 3],
    }
    capacity = {"cpu": "96", "ephemeral-storage": "1887436798102", "memory": "1135144148Ki", "pods": "110"}
    if product:
        labels.update(_driver_labels(driver, cuda))
        major, minor = compute.split(".")
        labels.update({
            "nvidia.com/gfd.timestamp": str(1762074764 + n), "nvidia.com/gpu.compute.major": major,
            "nvidia.com/gpu.compute.minor": minor, "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": product, "nvidia.com/gpu.replicas": "1",
            "nvidia.com/mig.capable": "true" if "100" in product else "false",
        })
        capacity["nvidia.com/gpu"] = str(gpus)
    labels.update(extra_labels or {})
    if resources is not None:
        capacity.pop("nvidia.com/gpu", None)
        capacity.update(resources)
    spec: dict[str, Any] = {"podCIDR": f"10.244.{n}.0/24", "podCIDRs": [f"10.244.{n}.0/24"],
                            "providerID": f"aws:///us-east-1a/i-0{n:016x}"}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"annotations": {"node.alpha.kubernetes.io/ttl": "0"}, "creationTimestamp": CREATED,
                     "labels": labels, "name": name, "resourceVersion": str(200000 + n), "uid": _uid(900 + n)},
        "spec": spec,
        "status": {"allocatable": dict(capacity), "capacity": dict(capacity),
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "kubelet is posting ready status",
                                   "lastHeartbeatTime": "2026-11-30T11:59:00Z",
                                   "lastTransitionTime": CREATED}],
                   "nodeInfo": {"architecture": "amd64", "bootID": f"{n:08x}-6a3e-4e43-9b5e-2f0c1d2e3f40",
                                "containerRuntimeVersion": "containerd://1.7.22",
                                "kernelVersion": "5.15.0-122-generic", "kubeProxyVersion": "",
                                "kubeletVersion": "v1.31.4", "machineID": f"ec2{n:029x}",
                                "operatingSystem": "linux", "osImage": "Ubuntu 22.04.5 LTS",
                                "systemUUID": f"ec2{n:05x}-0000-4000-8000-000000000000"}},
    }


def runtime_class() -> dict[str, Any]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "handler": "nvidia",
            "metadata": {"name": "nvidia", "uid": _uid(990), "creationTimestamp": CREATED, "resourceVersion": "1200"}}


def before_cluster() -> list[dict[str, Any]]:
    h100 = {"product": "NVIDIA-H100-80GB-HBM3", "gpus": 8, "driver": "570.124.06", "cuda": "12.8", "compute": "9.0",
            "taints": [dict(GPU_TAINT)]}
    a100 = {"product": "NVIDIA-A100-SXM4-80GB", "gpus": 8, "driver": "550.127.05", "cuda": "12.4", "compute": "8.0",
            "taints": [dict(GPU_TAINT)]}
    t4 = {"product": "Tesla-T4", "gpus": 1, "driver": "535.216.01", "cuda": "12.2", "compute": "7.5"}
    nodes = [node("cpu-1", 1, "m6i.4xlarge")]
    nodes += [node(f"h100-{i}", 10 + i, "p5.48xlarge", **h100) for i in (1, 2)]  # type: ignore[arg-type]
    nodes += [node(f"a100-{i}", 20 + i, "p4de.24xlarge", **a100) for i in (1, 2)]  # type: ignore[arg-type]
    nodes += [node(f"t4-{i}", 30 + i, "g4dn.xlarge", **t4) for i in (1, 2, 3)]  # type: ignore[arg-type]
    return [*nodes, runtime_class()]


def after_cluster() -> list[dict[str, Any]]:
    out = []
    for obj in before_cluster():
        name = obj["metadata"]["name"]
        if name.startswith("t4-"):
            continue  # the T4 pool is retired
        obj = copy.deepcopy(obj)
        labels = obj["metadata"].get("labels", {})
        if name.startswith("a100-"):  # driver rollback
            labels.update(_driver_labels("535.216.01", "12.2"))
        if name == "h100-1":  # reserved for training
            obj["spec"]["taints"].append({"key": "dedicated", "value": "training", "effect": "NoSchedule"})
        if name == "h100-2":  # MIG, mixed strategy: 7 x 1g.10gb per GPU
            labels.update({"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": "all-1g.10gb",
                           "nvidia.com/gpu.count": "8", "nvidia.com/mig-1g.10gb.count": "56"})
            for part in ("allocatable", "capacity"):
                obj["status"][part].pop("nvidia.com/gpu")
                obj["status"][part]["nvidia.com/mig-1g.10gb"] = "56"
        out.append(obj)
    return out


# --- workloads ---------------------------------------------------------------------------------


def meta(name: str, namespace: str, n: int, owner: dict[str, Any] | None = None,
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"creationTimestamp": CREATED, "generation": 1, "name": name, "namespace": namespace,
                           "resourceVersion": str(300000 + n), "uid": _uid(n)}
    if labels:
        out["labels"] = labels
    if owner is not None:
        out["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                   "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                   "controller": True, "blockOwnerDeletion": True}]
    return out


def container(name: str, image: str, gpus: int = 0, resource: str = "nvidia.com/gpu",
              shm: bool = False) -> dict[str, Any]:
    limits: dict[str, str] = {"cpu": "8", "memory": "64Gi"}
    if gpus:
        limits[resource] = str(gpus)
    c: dict[str, Any] = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
                         "resources": {"limits": limits, "requests": dict(limits)},
                         "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
    if shm:
        c["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    return c


def pod_spec(containers: list[dict[str, Any]], selector: dict[str, str] | None = None,
             tolerations: list[dict[str, Any]] | None = None, shm: bool = False,
             restart: str = "Always") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers, "dnsPolicy": "ClusterFirst", "restartPolicy": restart,
                            "schedulerName": "default-scheduler", "securityContext": {},
                            "terminationGracePeriodSeconds": 30}
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    if shm:
        spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]
    return spec


def pod_of(owner: dict[str, Any], name: str, n: int, spec: dict[str, Any], node_name: str, phase: str = "Running",
           labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    spec["nodeName"] = node_name
    spec.setdefault("tolerations", []).extend([
        {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
        {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists",
         "tolerationSeconds": 300},
    ])
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": meta(name, owner["metadata"]["namespace"], n, owner, labels),
            "spec": spec,
            "status": {"phase": phase, "hostIP": "10.0.0.1", "podIP": f"10.244.0.{n % 250}",
                       "qosClass": "Guaranteed", "startTime": CREATED,
                       "conditions": [{"type": "PodScheduled", "status": "True",
                                       "lastTransitionTime": CREATED}]}}


def deployment(name: str, namespace: str, n: int, spec: dict[str, Any], replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(name, namespace, n, labels=labels),
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%",
                                                                              "maxUnavailable": "25%"}},
                     "template": {"metadata": {"labels": labels}, "spec": spec}},
            "status": {"replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas,
                       "observedGeneration": 1}}


def replica_set(deploy: dict[str, Any], template_hash: str, n: int) -> dict[str, Any]:
    name = f"{deploy['metadata']['name']}-{template_hash}"
    labels = {**deploy["spec"]["selector"]["matchLabels"], "pod-template-hash": template_hash}
    template = copy.deepcopy(deploy["spec"]["template"])
    template["metadata"]["labels"] = dict(labels)
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": meta(name, deploy["metadata"]["namespace"], n, deploy, labels),
            "spec": {"replicas": deploy["spec"]["replicas"], "selector": {"matchLabels": labels}, "template": template},
            "status": {"replicas": deploy["spec"]["replicas"], "readyReplicas": deploy["spec"]["replicas"]}}


def workloads() -> list[dict[str, Any]]:
    gpu_tol = [dict(GPU_TOLERATION)]
    items: list[dict[str, Any]] = []

    # inference/vllm-llama: 2 replicas on the H100s (ReplicaSet and pods in the dump)
    vllm_spec = pod_spec([container("vllm", "nvcr.io/nvidia/tritonserver:24.08-vllm-python-py3", 1)],
                         {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, gpu_tol)
    vllm = deployment("vllm-llama", "inference", 1, vllm_spec, replicas=2)
    vllm_rs = replica_set(vllm, "7c9f8d5b6d", 2)
    items += [vllm, vllm_rs]
    items += [pod_of(vllm_rs, f"vllm-llama-7c9f8d5b6d-{s}", 3 + i, vllm_spec, f"h100-{i + 1}",
                     labels=vllm_rs["metadata"]["labels"]) for i, s in enumerate(("x2k8p", "q7w4m"))]

    # inference/t4-batch: on the T4 pool; its ReplicaSet is not in the dump (matched by name)
    t4_spec = pod_spec([container("triton", "nvcr.io/nvidia/tritonserver:23.10-py3", 1)],
                       {"nvidia.com/gpu.product": "Tesla-T4"})
    t4 = deployment("t4-batch", "inference", 10, t4_spec, replicas=3)
    items.append(t4)
    items += [pod_of(replica_set(t4, "5d8b7f9c4", 11), f"t4-batch-5d8b7f9c4-{s}", 12 + i, t4_spec, f"t4-{i + 1}",
                     labels={"app": "t4-batch", "pod-template-hash": "5d8b7f9c4"})
              for i, s in enumerate(("a1b2c", "d3e4f", "g5h6j"))]

    # ml-train/llama-ft: a PyTorchJob pinned to the A100s, NGC PyTorch 24.05 (CUDA 12.4.1)
    replica = {"replicas": 1, "restartPolicy": "OnFailure",
               "template": {"metadata": {"annotations": {"sidecar.istio.io/inject": "false"}},
                            "spec": pod_spec([container("pytorch", "nvcr.io/nvidia/pytorch:24.05-py3", 8, shm=True)],
                                             {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}, gpu_tol, shm=True,
                                             restart="OnFailure")}}
    worker = copy.deepcopy(replica)
    worker["replicas"] = 1
    ptj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": meta("llama-ft", "ml-train", 20),
           "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": worker},
                    "runPolicy": {"cleanPodPolicy": "None"}},
           "status": {"conditions": [{"type": "Running", "status": "True", "reason": "PyTorchJobRunning",
                                      "lastTransitionTime": CREATED}]}}
    items.append(ptj)
    items += [pod_of(ptj, f"llama-ft-{role}-0", 21 + i, replica["template"]["spec"], f"a100-{i + 1}",
                     labels={"training.kubeflow.org/job-name": "llama-ft",
                             "training.kubeflow.org/replica-type": role})
              for i, role in enumerate(("master", "worker"))]

    # research/jupyter: a StatefulSet that may land on any GPU node (PyTorch 2.5.1 wheels, CUDA 12.4)
    nb_spec = pod_spec([container("notebook", "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime", 1)], None, gpu_tol)
    nb = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": meta("jupyter", "research", 30),
          "spec": {"replicas": 1, "serviceName": "jupyter", "selector": {"matchLabels": {"app": "jupyter"}},
                   "template": {"metadata": {"labels": {"app": "jupyter"}}, "spec": nb_spec}},
          "status": {"replicas": 1, "readyReplicas": 1}}
    items.append(nb)
    items.append(pod_of(nb, "jupyter-0", 31, nb_spec, "h100-2", labels={"app": "jupyter"}))

    # research/mig-probe: a Job asking for a MIG slice nobody offers yet (Pending)
    mig_spec = pod_spec([container("probe", "nvidia/cuda:12.4.1-base-ubuntu22.04", 1, "nvidia.com/mig-1g.10gb")],
                        None, gpu_tol, restart="Never")
    mig = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("mig-probe", "research", 40),
           "spec": {"backoffLimit": 0, "completions": 1, "parallelism": 1,
                    "template": {"metadata": {"labels": {"job-name": "mig-probe"}}, "spec": mig_spec}},
           "status": {"active": 1, "startTime": CREATED}}
    items.append(mig)
    pending = pod_of(mig, "mig-probe-8xk2v", 41, mig_spec, "", phase="Pending", labels={"job-name": "mig-probe"})
    del pending["spec"]["nodeName"]
    pending["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                        "lastTransitionTime": CREATED,
                                        "message": "0/8 nodes are available: 8 Insufficient nvidia.com/mig-1g.10gb. "
                                                   "preemption: 0/8 nodes are available: 8 No preemption victims "
                                                   "found for incoming pod."}]
    items.append(pending)

    # research/nightly-eval: a CronJob on CUDA 12.8 (native only on the H100 driver), with last night's Job
    eval_spec = pod_spec([container("eval", "nvidia/cuda:12.8.0-runtime-ubuntu22.04", 1)], None, gpu_tol,
                         restart="Never")
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta("nightly-eval", "research", 50),
            "spec": {"schedule": "0 2 * * *", "concurrencyPolicy": "Forbid",
                     "jobTemplate": {"spec": {"template": {"spec": eval_spec}}}},
            "status": {"lastScheduleTime": "2026-11-30T02:00:00Z"}}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("nightly-eval-29404560", "research", 51, cron),
           "spec": {"template": {"metadata": {"labels": {"job-name": "nightly-eval-29404560"}}, "spec": eval_spec}},
           "status": {"succeeded": 1, "completionTime": "2026-11-30T02:41:07Z"}}
    done = pod_of(job, "nightly-eval-29404560-k8d2s", 52, eval_spec, "h100-2", phase="Succeeded",
                  labels={"job-name": "nightly-eval-29404560"})
    items += [cron, job, done]

    # notebooks/scratch: a bare pod with two GPUs and no /dev/shm
    scratch = {"apiVersion": "v1", "kind": "Pod", "metadata": meta("scratch", "notebooks", 60),
               "spec": {**pod_spec([container("torch", "nvcr.io/nvidia/pytorch:24.08-py3", 2)], None, gpu_tol),
                        "nodeName": "h100-1"},
               "status": {"phase": "Running", "startTime": CREATED}}
    items.append(scratch)

    # kube-system/nvidia-device-plugin: GPU infrastructure in an exempt namespace
    plugin_spec = pod_spec([container("nvidia-device-plugin-ctr", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0")],
                           None, [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet",
          "metadata": meta("nvidia-device-plugin-daemonset", "kube-system", 70),
          "spec": {"selector": {"matchLabels": {"name": "nvidia-device-plugin-ds"}},
                   "template": {"metadata": {"labels": {"name": "nvidia-device-plugin-ds"}}, "spec": plugin_spec}},
          "status": {"currentNumberScheduled": 4, "desiredNumberScheduled": 4, "numberMisscheduled": 0,
                     "numberReady": 4}}
    items.append(ds)

    # web/frontend: no GPU at all
    web = deployment("frontend", "web", 80, pod_spec([container("nginx", "nginx:1.27")]), replicas=2)
    items.append(web)
    return items


def dump(objects: list[dict[str, Any]], header: str) -> str:
    listed = {"apiVersion": "v1", "items": objects, "kind": "List", "metadata": {"resourceVersion": ""}}
    return header + yaml.safe_dump(listed, sort_keys=True, width=120)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    what = {
        "cluster-before.yaml": (before_cluster(), "kubectl get nodes,runtimeclasses -o yaml (today)"),
        "cluster-after.yaml": (after_cluster(), "kubectl get nodes,runtimeclasses -o yaml (the planned cluster: A100 "
                                                "driver rolled back, T4 pool removed, h100-1 tainted, h100-2 MIG)"),
        "workloads.yaml": (workloads(), "kubectl get deploy,rs,sts,ds,jobs,cronjobs,pods,pytorchjobs -A -o yaml "
                                        "(t4-batch's ReplicaSet left out)"),
    }
    for name, (objects, command) in what.items():
        (OUT / name).write_text(dump(objects, f"# Written by .ci/audit_fixtures.py; shaped as `{command}`\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

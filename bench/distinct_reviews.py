"""Distinct, realistic AdmissionReviews for the webhook benchmarks.

Every review is a different object, as a busy cluster sends them: pods of many teams and
controllers with their own names, uids, labels and owners, a mix of images (NGC, Docker Hub
framework images, CUDA base images, private images the engine cannot know, plain OS images),
GPU counts from 1 to 8, some with node selectors or affinity for a GPU product, a few with
findings (a request without a limit, a GPU product no node has).  About one in eight is a
workload controller (Deployment, Job, StatefulSet) rather than a Pod.

Nothing repeats: the container names and the object's identity differ in every review, so a
memo keyed by template content never hits twice across a cycle of ``count`` reviews.

    .venv/bin/python bench/distinct_reviews.py 6000 > reviews.jsonl
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASE_REVIEW = ROOT / "tests" / "fixtures" / "admission" / "pod-gpu-with-limit.json"

IMAGES = (
    "nvcr.io/nvidia/pytorch:24.05-py3",
    "nvcr.io/nvidia/pytorch:23.10-py3",
    "nvcr.io/nvidia/tritonserver:24.01-py3",
    "nvcr.io/nvidia/nemo:24.07",
    "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime",
    "pytorch/pytorch:2.1.2-cuda11.8-cudnn8-runtime",
    "nvidia/cuda:12.2.0-runtime-ubuntu22.04",
    "nvidia/cuda:11.8.0-cudnn8-runtime-ubuntu22.04",
    "nvidia/cuda:12.4.1-devel-ubuntu22.04",
    "vllm/vllm-openai:v0.5.0",
    "tensorflow/tensorflow:2.15.0-gpu",
    "ghcr.io/example-org/trainer:{n:x}",
    "registry.example.com/ml/model-server:2026.11.{n}",
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/research/finetune@sha256:{digest}",
    "python:3.11-slim",
    "ubuntu:22.04",
)
TEAMS = tuple(f"team-{name}" for name in (
    "vision", "speech", "nlp", "recsys", "ranking", "search", "ads", "fraud", "robotics", "genai",
    "platform", "research", "infra", "eval", "data", "safety", "ocr", "maps", "video", "health",
))
PRODUCTS = ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3")
CONTROLLERS = (
    ("apps/v1", "Deployment", "deployments", "apps"),
    ("batch/v1", "Job", "jobs", "batch"),
    ("apps/v1", "StatefulSet", "statefulsets", "apps"),
)


def _uid(rng: random.Random) -> str:
    raw = f"{rng.getrandbits(128):032x}"
    return f"{raw[:8]}-{raw[8:12]}-4{raw[13:16]}-8{raw[17:20]}-{raw[20:]}"


def _pod(base: dict[str, Any], n: int, rng: random.Random) -> dict[str, Any]:
    pod: dict[str, Any] = json.loads(json.dumps(base))
    team = TEAMS[n % len(TEAMS)]
    job = f"{team.split('-', 1)[1]}-{rng.choice(('train', 'finetune', 'serve', 'eval', 'sweep'))}-{n:05d}"
    meta = pod["metadata"]
    meta.update(
        name=f"{job}-{rng.getrandbits(24):06x}",
        namespace=team,
        uid=_uid(rng),
        labels={"app": job, "team": team, "run-id": f"r{n}", "pod-template-hash": f"{rng.getrandbits(32):08x}"},
        ownerReferences=[{
            "apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": _uid(rng),
            "controller": True, "blockOwnerDeletion": True,
        }],
    )
    image = rng.choice(IMAGES).format(n=n, digest=f"{rng.getrandbits(256):064x}")
    gpus = str(rng.choice((1, 1, 1, 2, 2, 4, 8)))
    container = pod["spec"]["containers"][0]
    container.update(name=f"worker-{n}", image=image)
    container["env"] = [
        {"name": "RUN_ID", "value": f"r{n}"},
        {"name": "MASTER_ADDR", "value": f"{job}-0.{job}.{team}.svc"},
        {"name": "NCCL_DEBUG", "value": "WARN"},
    ]
    resources = container["resources"]
    for which in ("requests", "limits"):
        resources[which]["nvidia.com/gpu"] = gpus
        resources[which]["cpu"] = str(int(gpus) * 8)
        resources[which]["memory"] = f"{int(gpus) * 64}Gi"
    roll = rng.random()
    spec = pod["spec"]
    if roll < 0.25:
        product = rng.choice(PRODUCTS)
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
        if product.startswith("NVIDIA-H100") and rng.random() < 0.9:  # the H100 pool is reserved
            spec["tolerations"].append({"key": "dedicated", "operator": "Equal", "value": "training",
                                        "effect": "NoSchedule"})
    elif roll < 0.35:
        spec["tolerations"].append({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"})
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": list(PRODUCTS)}]},
        ]}}}
    elif roll < 0.38:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": "Tesla-T4"}  # no such node: a finding
    elif roll < 0.42:
        del resources["limits"]["nvidia.com/gpu"]  # a request without a limit: a finding
    if rng.random() < 0.2:
        spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}]
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    return pod


def _controller(pod: dict[str, Any], n: int) -> tuple[dict[str, Any], tuple[str, str, str, str]]:
    api_version, kind, resource, group = CONTROLLERS[n % len(CONTROLLERS)]
    meta = pod["metadata"]
    template = {"metadata": {"labels": meta["labels"]}, "spec": pod["spec"]}
    spec: dict[str, Any] = {"template": template}
    if kind != "Job":
        spec["selector"] = {"matchLabels": {"app": meta["labels"]["app"]}}
        spec["replicas"] = 1 + n % 4
    obj = {
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": meta["labels"]["app"], "namespace": meta["namespace"], "uid": meta["uid"],
                     "labels": {"team": meta["namespace"]}},
        "spec": spec,
    }
    return obj, (api_version, kind, resource, group)


def reviews(count: int, seed: int = 20261130) -> list[bytes]:
    """``count`` distinct AdmissionReview request bodies (JSON, one per element)."""
    rng = random.Random(seed)
    base_review = json.loads(BASE_REVIEW.read_text())
    base_pod = base_review["request"]["object"]
    out = []
    for n in range(count):
        review = json.loads(json.dumps(base_review))
        req = review["request"]
        obj = _pod(base_pod, n, rng)
        if n % 8 == 7:
            obj, (api_version, kind, resource, group) = _controller(obj, n)
            version = api_version.split("/")[-1]
            req["kind"] = req["requestKind"] = {"group": group, "version": version, "kind": kind}
            req["resource"] = req["requestResource"] = {"group": group, "version": version, "resource": resource}
        req.update(uid=_uid(rng), name=obj["metadata"]["name"], namespace=obj["metadata"]["namespace"], object=obj)
        req["userInfo"]["username"] = "system:serviceaccount:kube-system:job-controller"
        out.append(json.dumps(review, separators=(",", ":")).encode())
    return out


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else 6000
    sys.stdout.buffer.write(b"\n".join(reviews(count)) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

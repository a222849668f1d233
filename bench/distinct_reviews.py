"""Distinct, realistic AdmissionReviews for the webhook benchmarks.

Every review is a different object, as a busy cluster sends them: pods of many teams and
controllers with their own names, uids, labels and owners, a mix of images (NGC, Docker Hub
framework images, CUDA base images, private images the engine cannot know, plain OS images),
GPU counts from 1 to 8, some with node selectors or affinity for a GPU product, a few with
findings (a request without a limit, a GPU product no node has).  About one in eight is a
workload controller (Deployment, Job, StatefulSet) rather than a Pod.

Pods arrive as the API server sends them to a webhook: with the service-account token volume the
ServiceAccount admission plugin adds first.  Nothing repeats: the container names and the
object's identity differ in every review, so a memo keyed by what rules read never hits twice
across a cycle of ``count`` reviews.  ``replica_reviews`` makes the other realistic stream: pods
of one template in a row, as a controller creates its replicas.

    .venv/bin/python bench/distinct_reviews.py 6000 [--replicas] > reviews.jsonl
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
TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery utilrand.String's alphabet
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


def as_admitted(pod: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The pod as it reaches a webhook: the ServiceAccount admission plugin, which runs first, has
    set the service account and mounted a token volume with a generated name in every container
    (kubernetes plugin/pkg/admission/serviceaccount/admission.go, mountServiceAccountToken)."""
    spec = pod["spec"]
    spec.setdefault("serviceAccountName", "default")
    name = "kube-api-access-" + "".join(rng.choice(TOKEN_NAME_CHARS) for _ in range(5))
    for key in ("initContainers", "containers"):
        for c in spec.get(key, ()):
            c.setdefault("volumeMounts", []).append({"name": name, "readOnly": True, "mountPath": TOKEN_PATH})
    spec.setdefault("volumes", []).append({"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}})
    return pod


def replica(pod: dict[str, Any], index: int, rng: random.Random) -> dict[str, Any]:
    """Replica ``index`` of ``pod``'s controller (an Indexed Job, a StatefulSet, a training
    operator's worker set): its own name, uid, hostname and RANK; then admitted as above."""
    pod = json.loads(json.dumps(pod))
    meta = pod["metadata"]
    job = meta["labels"]["app"]
    meta.update(name=f"{job}-{index}-{rng.getrandbits(20):05x}", uid=_uid(rng))
    meta["labels"] = {**meta["labels"], "batch.kubernetes.io/job-completion-index": str(index)}
    meta["annotations"] = {"batch.kubernetes.io/job-completion-index": str(index)}
    spec = pod["spec"]
    spec.update(hostname=f"{job}-{index}", subdomain=job)
    for c in spec["containers"]:
        c["env"] = [{"name": "RANK", "value": str(index)}, *c.get("env", [])]
    return as_admitted(pod, rng)


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
        else:
            obj = as_admitted(obj, rng)
        out.append(_review(review, obj, rng))
    return out


def _review(review: dict[str, Any], obj: dict[str, Any], rng: random.Random) -> bytes:
    req = review["request"]
    req.update(uid=_uid(rng), name=obj["metadata"]["name"], namespace=obj["metadata"]["namespace"], object=obj)
    req["userInfo"]["username"] = "system:serviceaccount:kube-system:job-controller"
    return json.dumps(review, separators=(",", ":")).encode()


def replica_reviews(count: int, replicas: int = 10, seed: int = 20261201) -> list[bytes]:
    """``count`` Pod CREATE reviews: ``count / replicas`` distinct templates (as ``reviews`` makes
    them), each sent as ``replicas`` pods in a row, the way a controller creates them.  Every review
    is a distinct object; what repeats is what real replicas share."""
    rng = random.Random(seed)
    base_review = json.loads(BASE_REVIEW.read_text())
    base_pod = base_review["request"]["object"]
    out: list[bytes] = []
    for n in range(-(-count // replicas)):
        template = _pod(base_pod, n, rng)
        for index in range(min(replicas, count - len(out))):
            out.append(_review(json.loads(json.dumps(base_review)), replica(template, index, rng), rng))
    return out


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else 6000
    made = replica_reviews(count) if "--replicas" in argv[1:] else reviews(count)
    sys.stdout.buffer.write(b"\n".join(made) + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

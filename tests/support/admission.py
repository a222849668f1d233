"""AdmissionReviews shaped as kube-apiserver sends them (admission/v1 types.go), built from objects."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import orjson

from tests.support.paths import FIXTURES

ADMISSION = FIXTURES / "admission"
PLURALS = {"Pod": "pods", "Deployment": "deployments", "Job": "jobs", "PyTorchJob": "pytorchjobs",
           "ResourceClaim": "resourceclaims", "ResourceClaimTemplate": "resourceclaimtemplates",
           "PodTemplate": "podtemplates", "Workspace": "workspaces", "DaemonSet": "daemonsets", "JobSet": "jobsets",
           "LeaderWorkerSet": "leaderworkersets", "TFJob": "tfjobs", "MPIJob": "mpijobs"}
OPTIONS = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}
# What the ServiceAccount admission plugin adds to a pod before any webhook sees it: a projected
# token volume named kube-api-access-<5 random characters>, mounted in every container (kubernetes
# plugin/pkg/admission/serviceaccount/admission.go: mountServiceAccountToken, TokenVolumeSource).
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_VOLUME_SOURCE: dict[str, Any] = {"projected": {"defaultMode": 420, "sources": [
    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                  "fieldPath": "metadata.namespace"}}]}},
]}}


def token_volume(name: str) -> dict[str, Any]:
    return {"name": name, **copy.deepcopy(TOKEN_VOLUME_SOURCE)}


def token_mount(name: str) -> dict[str, Any]:
    return {"name": name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}


USERS = {
    "alice": {"username": "alice@example.com", "uid": "b7f6f0a2-5c1e-4a57-9d7c-2f0d1c3e4a5b",
              "groups": ["ml-team", "system:authenticated"]},
    # Controllers and the garbage collector act as their service accounts (kube-controller-manager
    # --use-service-account-credentials).
    "job-controller": {"username": "system:serviceaccount:kube-system:job-controller",
                       "uid": "5d8e1a34-3c1d-4b64-8f43-7c52e3f1d0a1",
                       "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"]},
    "generic-garbage-collector": {"username": "system:serviceaccount:kube-system:generic-garbage-collector",
                                  "uid": "0b7e2d2c-6a8f-4f0e-b1f4-2d9c1e5a7b33",
                                  "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                                             "system:authenticated"]},
    "kubelet": {"username": "system:node:a100-pool-1", "uid": "", "groups": ["system:nodes", "system:authenticated"]},
}


def fixture_object(name: str) -> dict[str, Any]:
    """The object of a CREATE review fixture (server-side defaults included)."""
    review = orjson.loads((ADMISSION / name).read_bytes())
    obj: dict[str, Any] = review["request"]["object"]
    return obj


def review(
    operation: str,
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None = None,
    *,
    subresource: str = "",
    dry_run: bool = False,
    user: str = "alice",
) -> dict[str, Any]:
    target = obj if obj is not None else old
    assert target is not None
    api_version = target["apiVersion"]
    group, _, version = api_version.rpartition("/")
    kind = target["kind"]
    resource = {"group": group, "version": version, "resource": PLURALS[kind]}
    gvk = {"group": group, "version": version, "kind": kind}
    meta = target.get("metadata", {})
    request: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": gvk,
        "resource": resource,
        "requestKind": gvk,
        "requestResource": resource,
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "operation": operation,
        "userInfo": USERS[user],
        "object": copy.deepcopy(obj),
        "oldObject": copy.deepcopy(old),
        "dryRun": dry_run,
        "options": {"kind": OPTIONS.get(operation, "CreateOptions"), "apiVersion": "meta.k8s.io/v1"},
    }
    if subresource:
        request["subResource"] = subresource
        request["requestSubResource"] = subresource
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def running(pod: dict[str, Any], node: str = "a100-pool-1") -> dict[str, Any]:
    """``pod`` as stored after scheduling: bound to ``node``, with a uid, resourceVersion and status."""
    out = copy.deepcopy(pod)
    meta = out.setdefault("metadata", {})
    meta.setdefault("uid", "3c0c6c5e-8f0a-4c8e-9d5c-1b2a3c4d5e6f")
    meta["resourceVersion"] = "81234"
    meta.setdefault("creationTimestamp", "2026-11-30T08:00:00Z")
    out["spec"]["nodeName"] = node
    out["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T08:00:05Z"}],
        "hostIP": "10.0.1.17",
        "podIP": "10.244.3.9",
        "startTime": "2026-11-30T08:00:00Z",
        "qosClass": "Burstable",
    }
    return out


def terminating(obj: dict[str, Any], finalizers: list[str]) -> dict[str, Any]:
    """``obj`` after a DELETE that finalizers hold up: deletionTimestamp set, finalizers pending."""
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    meta["deletionTimestamp"] = "2026-11-30T09:15:00Z"
    meta["deletionGracePeriodSeconds"] = 0
    meta["finalizers"] = list(finalizers)
    return out


def pool_pod(image: str, pool: str) -> dict[str, Any]:
    """A Pod with one 1-GPU container of ``image``, held to the node ``pool`` of examples/cluster.yaml
    (``pool: a100``, ``h100``, ``t4``…) and tolerating every taint."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"nodeSelector": {"pool": pool}, "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "train", "image": image,
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


# On examples/cluster.yaml's A100 pool an NGC image gets a 613-character warning-level CUDA finding
# whose first clause holds a 250-character aside on where the CUDA version came from.  With the
# 120-character rule the admission warning was "gpu-cuda-driver-mismatch at spec.containers[0].image".
NGC_ON_A100 = pool_pod("nvcr.io/nvidia/pytorch:24.05-py3", "a100")
NGC_ON_A100_WARNING = (
    "gpu-cuda-driver-mismatch: container 'train': image nvcr.io/nvidia/pytorch:24.05-py3 needs CUDA 12.4.1 (…), "
    "it runs only in a compatibility mode on every candidate node…"
)

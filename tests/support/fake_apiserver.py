"""An in-process server speaking the Kubernetes list/watch wire format, for the real ``kubernetes`` client.

It keeps an event history per resource, streams watch events as chunked JSON lines, can expire
resource versions (an ERROR event with code 410, as etcd compaction produces), can fail requests
with HTTP 500 or refuse them with 403, and pages lists with ``limit``/``continue``.  Resources are
registered in ``PATHS``/``TYPE_META``/``LIST_META``; tests may register more before starting a server.

Namespaced resources (pods, events, workloads) are served cluster-wide (``/api/v1/pods``,
``/apis/apps/v1/deployments``) and per namespace (``/api/v1/namespaces/NS/pods``), keyed
``namespace/name``, and honour equality field selectors (``a.b=c``, ``a.b==c``, ``a.b!=c``,
comma-separated) on the fields the API server supports for them; an unsupported field is a 400, as
the API server answers.  Lists honour equality and existence label selectors (``labelSelector=k=v``,
``labelSelector=k``).

Discovery is served as the API server serves it (k8s.io/apimachinery pkg/apis/meta/v1 types.go):
``/api`` (APIVersions), ``/api/v1`` and ``/apis/GROUP/VERSION`` (APIResourceList with name, kind,
namespaced, verbs) and ``/apis`` (APIGroupList with versions and preferredVersion), listing the
served resources that are not ``absent``.  Objects can be read by name (GET), created (POST: 201,
or 409 AlreadyExists) and replaced (PUT: 409 Conflict unless ``metadata.resourceVersion`` is the
stored one), which the audit's report publishing uses; ``writes`` records each write.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import time
from collections.abc import Iterable, Iterator
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.support.http_replies import reply_json

DEADLINE = 15.0
PATHS: dict[str, str] = {
    "/api/v1/nodes": "nodes",
    "/apis/node.k8s.io/v1/runtimeclasses": "runtimeclasses",
    "/apis/karpenter.sh/v1/nodepools": "nodepools",
    "/api/v1/pods": "pods",
    "/api/v1/events": "events",
    "/apis/scheduling.k8s.io/v1/priorityclasses": "priorityclasses",
    "/apis/resource.k8s.io/v1/deviceclasses": "deviceclasses",
    "/apis/resource.k8s.io/v1/resourceslices": "resourceslices",
    "/apis/resource.k8s.io/v1/resourceclaims": "resourceclaims",
    "/apis/resource.k8s.io/v1/resourceclaimtemplates": "resourceclaimtemplates",
    "/api/v1/resourcequotas": "resourcequotas",
}
# Workload kinds (for the audit), a CRD kind among them, and the policy report kinds:
# resource -> (group, version, kind, namespaced).
MORE_RESOURCES: dict[str, tuple[str, str, str, bool]] = {
    "deployments": ("apps", "v1", "Deployment", True),
    "replicasets": ("apps", "v1", "ReplicaSet", True),
    "statefulsets": ("apps", "v1", "StatefulSet", True),
    "daemonsets": ("apps", "v1", "DaemonSet", True),
    "jobs": ("batch", "v1", "Job", True),
    "cronjobs": ("batch", "v1", "CronJob", True),
    "pytorchjobs": ("kubeflow.org", "v1", "PyTorchJob", True),
    "policyreports": ("wgpolicyk8s.io", "v1alpha2", "PolicyReport", True),
    "clusterpolicyreports": ("wgpolicyk8s.io", "v1alpha2", "ClusterPolicyReport", False),
    "reports": ("openreports.io", "v1alpha1", "Report", True),
    "clusterreports": ("openreports.io", "v1alpha1", "ClusterReport", False),
    # KServe's runtimes and configs (cluster facts of the webhook, where KServe is installed)
    "servingruntimes": ("serving.kserve.io", "v1alpha1", "ServingRuntime", True),
    "clusterservingruntimes": ("serving.kserve.io", "v1alpha1", "ClusterServingRuntime", False),
    "llminferenceserviceconfigs": ("serving.kserve.io", "v1alpha2", "LLMInferenceServiceConfig", True),
    # Kueue (kueue.x-k8s.io v1beta2), CRDs: absent until a test installs them.
    "localqueues": ("kueue.x-k8s.io", "v1beta2", "LocalQueue", True),
    "clusterqueues": ("kueue.x-k8s.io", "v1beta2", "ClusterQueue", False),
    "resourceflavors": ("kueue.x-k8s.io", "v1beta2", "ResourceFlavor", False),
    "cohorts": ("kueue.x-k8s.io", "v1beta2", "Cohort", False),
    "workloads": ("kueue.x-k8s.io", "v1beta2", "Workload", True),
    # JobSet and LeaderWorkerSet, CRDs too
    "jobsets": ("jobset.x-k8s.io", "v1alpha2", "JobSet", True),
    "leaderworkersets": ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", True),
}
KUEUE_RESOURCES = ("localqueues", "clusterqueues", "resourceflavors", "cohorts", "workloads")
for _res, (_group, _version, _kind, _ns) in MORE_RESOURCES.items():
    PATHS[f"/apis/{_group}/{_version}/{_res}"] = _res
NAMESPACED = frozenset({"pods", "events", "resourceclaims", "resourceclaimtemplates", "resourcequotas",
                        *(r for r, info in MORE_RESOURCES.items() if info[3])})
# Dynamic Resource Allocation (resource.k8s.io/v1): served only when a test asks for them.
DRA_RESOURCES = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")
# What a server serves unless told otherwise (the webhook's facts); ALL_RESOURCES adds the rest.
DEFAULT_RESOURCES = ("nodes", "runtimeclasses", "nodepools")
TYPE_META: dict[str, dict[str, str]] = {
    "nodes": {"apiVersion": "v1", "kind": "Node"},
    "runtimeclasses": {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass"},
    "nodepools": {"apiVersion": "karpenter.sh/v1", "kind": "NodePool"},
    "pods": {"apiVersion": "v1", "kind": "Pod"},
    "events": {"apiVersion": "v1", "kind": "Event"},
    "priorityclasses": {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass"},
    "deviceclasses": {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass"},
    "resourceslices": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"},
    "resourceclaims": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"},
    "resourceclaimtemplates": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate"},
    "resourcequotas": {"apiVersion": "v1", "kind": "ResourceQuota"},
}
LIST_META: dict[str, dict[str, str]] = {
    "nodes": {"apiVersion": "v1", "kind": "NodeList"},
    "runtimeclasses": {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClassList"},
    "nodepools": {"apiVersion": "karpenter.sh/v1", "kind": "NodePoolList"},
    "pods": {"apiVersion": "v1", "kind": "PodList"},
    "events": {"apiVersion": "v1", "kind": "EventList"},
    "priorityclasses": {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClassList"},
    "deviceclasses": {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClassList"},
    "resourceslices": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSliceList"},
    "resourceclaims": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimList"},
    "resourceclaimtemplates": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplateList"},
    "resourcequotas": {"apiVersion": "v1", "kind": "ResourceQuotaList"},
}
for _res, (_group, _version, _kind, _ns) in MORE_RESOURCES.items():
    TYPE_META[_res] = {"apiVersion": f"{_group}/{_version}", "kind": _kind}
    LIST_META[_res] = {"apiVersion": f"{_group}/{_version}", "kind": f"{_kind}List"}
ALL_RESOURCES = tuple(r for r in TYPE_META if r not in DRA_RESOURCES)
# Resources of CRDs: answered with 404 until the test "installs" the CRD (``absent.discard``).
OPTIONAL = frozenset({"nodepools", "pytorchjobs", "policyreports", "clusterpolicyreports", "reports",
                      "clusterreports", "jobsets", "leaderworkersets", *KUEUE_RESOURCES,
                      "servingruntimes", "clusterservingruntimes", "llminferenceserviceconfigs"})
KSERVE_RESOURCES = ("servingruntimes", "clusterservingruntimes", "llminferenceserviceconfigs")
VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
# Field selectors the API server accepts per resource (pkg/registry/core/pod/strategy.go
# PodToSelectableFields, pkg/registry/core/event/strategy.go ToSelectableFields; subset).
FIELD_LABELS: dict[str, frozenset[str]] = {
    "pods": frozenset({"metadata.name", "metadata.namespace", "spec.nodeName", "spec.schedulerName",
                       "status.phase", "status.nominatedNodeName"}),
    "events": frozenset({"metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.name",
                         "involvedObject.namespace", "involvedObject.uid", "reason", "type"}),
}


def _field(obj: dict[str, Any], path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return "" if node is None else str(node)


def parse_field_selector(resource: str, text: str) -> list[tuple[str, str, bool]] | str:
    """[(field, value, equal)], or an error message for an unsupported field."""
    terms: list[tuple[str, str, bool]] = []
    for term in filter(None, text.split(",")):
        if "!=" in term:
            key, value, equal = *term.split("!=", 1), False
        elif "==" in term:
            key, value, equal = *term.split("==", 1), True
        elif "=" in term:
            key, value, equal = *term.split("=", 1), True
        else:
            return f"invalid field selector term {term!r}"
        if key not in FIELD_LABELS.get(resource, frozenset()):
            return f'field label not supported: "{key}"'
        terms.append((key, value, equal))
    return terms


def _labels_match(labels: dict[str, Any], selector: str) -> bool:
    """Equality (``k=v``) and existence (``k``) terms of a label selector, comma-separated."""
    for term in filter(None, selector.split(",")):
        key, equal, value = term.partition("=")
        if (labels.get(key) != value) if equal else (key not in labels):
            return False
    return True


def _key(resource: str, obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}" if resource in NAMESPACED else str(meta["name"])
EXPIRED = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "reason": "Expired",
    "code": 410,
    "message": "too old resource version: 1 (5)",
}


def gpu_node(name: str, gpus: int = 8, product: str = "NVIDIA-H100-80GB-HBM3") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "nvidia.com/gpu.product": product,
                "nvidia.com/cuda.driver-version.full": "570.124.06",
            },
        },
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "96", "memory": "1056455220Ki", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "allocatable": {"cpu": "95500m", "memory": "1045969460Ki", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2025-01-01T00:00:00Z"}],
        },
    }


def cpu_node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


def nodepool(name: str, families: list[str], taint: bool = True) -> dict[str, Any]:
    """A Karpenter NodePool of AWS instance families (shaped like aws/karpenter-provider-aws examples)."""
    spec: dict[str, Any] = {
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "requirements": [{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": families}],
    }
    if taint:
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "spec": {"template": {"spec": spec}, "limits": {"cpu": "1000"}},
    }


def runtime_class(name: str, handler: str) -> dict[str, Any]:
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name, "uid": f"uid-{name}"},
        "handler": handler,
        "scheduling": {"nodeSelector": {"nvidia.com/gpu.present": "true"}},
    }


class FakeApiServer:
    """Objects, an event history and request counters per resource."""

    def __init__(self, resources: Iterable[str] = DEFAULT_RESOURCES) -> None:
        """Serve ``resources`` (names from TYPE_META); others answer 404 as if not installed."""
        served = tuple(resources)
        self.served = frozenset(served)
        self.cond = threading.Condition()
        self.rv = 1
        self.objects: dict[str, dict[str, dict[str, Any]]] = {r: {} for r in served}
        self.history: dict[str, list[tuple[int, dict[str, Any]]]] = {r: [] for r in served}
        self.compacted: dict[str, int] = dict.fromkeys(served, 0)
        # Events dropped from the front of each history (compaction keeps memory bounded in long runs);
        # watch positions count from the first event ever recorded.
        self.history_base: dict[str, int] = dict.fromkeys(served, 0)
        self.history_limit: int | None = None
        self.list_calls: dict[str, int] = dict.fromkeys(served, 0)
        self.page_calls: dict[str, int] = dict.fromkeys(served, 0)
        self.watch_calls: dict[str, int] = dict.fromkeys(served, 0)
        self.fail_lists: dict[str, int] = dict.fromkeys(served, 0)
        self.fail_watches: dict[str, int] = dict.fromkeys(served, 0)
        self.expire_continue: dict[str, int] = dict.fromkeys(served, 0)
        # "pods" refuses cluster-wide lists of pods with 403; "pods@ml" refuses namespace ml
        self.forbidden: set[str] = set()
        self.list_queries: list[tuple[str, str | None, dict[str, list[str]]]] = []
        self.watch_queries: list[dict[str, list[str]]] = []
        self.watch_log: list[tuple[str, int]] = []  # (resource, resourceVersion) of each watch
        self.absent: set[str] = set(OPTIONAL)  # CRDs not installed
        self.verbs: dict[str, tuple[str, ...]] = {}  # discovery verbs per resource (default VERBS)
        self.writes: list[tuple[str, str, str]] = []  # (POST | PUT, resource, key) of each write
        self.closing = False
        self.port = 0

    # --- mutations (test side) ---
    def _record(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        event = {"type": kind, "object": copy.deepcopy(obj)}
        history = self.history[resource]
        history.append((self.rv, event))
        if self.history_limit is not None and len(history) > self.history_limit:
            # What etcd compaction does: the oldest versions are gone; a watch that has not read them
            # yet, and a watch from one of them, get 410 Gone.
            drop = len(history) - self.history_limit // 2
            self.compacted[resource] = history[drop - 1][0]
            del history[:drop]
            self.history_base[resource] += drop
        self.cond.notify_all()

    def put(self, resource: str, obj: dict[str, Any], notify: bool = True) -> None:
        with self.cond:
            self.rv += 1
            obj = copy.deepcopy(obj)
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
            name = _key(resource, obj)
            kind = "MODIFIED" if name in self.objects[resource] else "ADDED"
            self.objects[resource][name] = obj
            if notify:
                self._record(resource, kind, obj)

    def delete(self, resource: str, name: str) -> None:
        """``name`` is ``namespace/name`` for namespaced resources."""
        with self.cond:
            self.rv += 1
            obj = self.objects[resource].pop(name)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self._record(resource, "DELETED", obj)

    def expire(self, resource: str) -> None:
        """Compact history: open watches get an ERROR 410 event, old versions are gone."""
        with self.cond:
            self.compacted[resource] = self.rv
            self.history[resource].append((self.rv, {"type": "ERROR", "object": EXPIRED}))
            self.cond.notify_all()

    def bookmark(self, resource: str) -> None:
        with self.cond:
            self.rv += 1
            obj = {**TYPE_META[resource], "metadata": {"resourceVersion": str(self.rv)}}
            self.history[resource].append((self.rv, {"type": "BOOKMARK", "object": obj}))
            self.cond.notify_all()

    # --- request side ---
    def list_page(
        self,
        resource: str,
        limit: int | None,
        token: str | None,
        namespace: str | None = None,
        field_selector: str = "",
        label_selector: str = "",
    ) -> tuple[int, dict[str, Any]]:
        with self.cond:
            scope = f"{resource}@{namespace}" if namespace else resource
            if scope in self.forbidden:
                where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
                return 403, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                             "reason": "Forbidden", "code": 403,
                             "message": f'{resource} is forbidden: User "system:serviceaccount:gpuguard:gpuguard" '
                                        f'cannot list resource "{resource}" in API group ""{where}'}
            terms = parse_field_selector(resource, field_selector)
            if isinstance(terms, str):
                return 400, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                             "reason": "BadRequest", "code": 400, "message": terms}
            self.page_calls[resource] += 1
            if token and self.expire_continue[resource] > 0:
                self.expire_continue[resource] -= 1
                return 410, {**EXPIRED, "message": "The provided continue parameter is too old"}
            if not token:
                self.list_calls[resource] += 1
                if self.fail_lists[resource] > 0:
                    self.fail_lists[resource] -= 1
                    return 500, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                 "reason": "InternalError", "code": 500, "message": "etcd unavailable"}
            matching = []
            for name in sorted(self.objects[resource]):
                stored = self.objects[resource][name]
                if namespace and stored["metadata"].get("namespace") != namespace:
                    continue
                if any((_field(stored, k) == v) != eq for k, v, eq in terms):
                    continue
                if not _labels_match(stored["metadata"].get("labels") or {}, label_selector):
                    continue
                matching.append(stored)
            start = int(token) if token else 0
            end = start + limit if limit else len(matching)
            items = []
            for stored in matching[start:end]:  # only the page is copied: lists of 5,000 nodes stay cheap
                item = copy.deepcopy(stored)
                item.pop("kind", None)  # the API server omits TypeMeta on list items
                item.pop("apiVersion", None)
                items.append(item)
            meta: dict[str, Any] = {"resourceVersion": str(self.rv)}
            if end < len(matching):
                meta["continue"] = str(end)
            return 200, {**LIST_META[resource], "metadata": meta, "items": items}

    # --- discovery and single objects (request side) ---
    def _installed(self) -> list[str]:
        return [r for r in self.served if r not in self.absent]

    def api_resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        with self.cond:
            found = []
            for resource in sorted(self._installed()):
                g, _, v = TYPE_META[resource]["apiVersion"].rpartition("/")
                if (g, v) == (group, version):
                    found.append({"name": resource, "singularName": "", "namespaced": resource in NAMESPACED,
                                  "kind": TYPE_META[resource]["kind"], "verbs": list(self.verbs.get(resource, VERBS))})
        if not found:
            return None
        group_version = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": found}

    def api_group_list(self) -> dict[str, Any]:
        with self.cond:
            versions: dict[str, list[str]] = {}
            for resource in self._installed():
                g, _, v = TYPE_META[resource]["apiVersion"].rpartition("/")
                if g and v not in versions.setdefault(g, []):
                    versions[g].append(v)
        groups = [{"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                   "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}}
                  for g, vs in sorted(versions.items())]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def get_object(self, resource: str, key: str) -> tuple[int, dict[str, Any]]:
        with self.cond:
            stored = self.objects[resource].get(key)
            if stored is None:
                return 404, _status(404, "NotFound", f'{resource} "{key.rpartition("/")[2]}" not found')
            return 200, copy.deepcopy(stored)

    def write_object(self, method: str, resource: str, namespace: str | None, obj: dict[str, Any],
                     name: str | None = None) -> tuple[int, dict[str, Any]]:
        """POST (create) or PUT (replace) with the API server's conflict rules."""
        meta = obj.setdefault("metadata", {})
        if namespace:
            meta["namespace"] = namespace
        if name is not None and meta.get("name") != name:
            return 400, _status(400, "BadRequest", "the name of the object does not match the name on the URL")
        key = _key(resource, obj)
        with self.cond:
            existing = self.objects[resource].get(key)
            if method == "POST" and existing is not None:
                return 409, _status(409, "AlreadyExists", f'{resource} "{meta.get("name")}" already exists')
            if method == "PUT":
                if existing is None:
                    return 404, _status(404, "NotFound", f'{resource} "{name}" not found')
                if meta.get("resourceVersion") != existing["metadata"]["resourceVersion"]:
                    return 409, _status(409, "Conflict", f'Operation cannot be fulfilled on {resource} "{name}": '
                                        "the object has been modified; please apply your changes to the latest "
                                        "version and try again")
                meta["uid"] = existing["metadata"]["uid"]
                meta["creationTimestamp"] = existing["metadata"]["creationTimestamp"]
            else:
                meta["uid"] = f"uid-{resource}-{key}"
                meta["creationTimestamp"] = "2026-11-30T12:00:00Z"
            obj.update(TYPE_META[resource])
            self.writes.append((method, resource, key))
            self.put(resource, obj)
            return (201 if method == "POST" else 200), copy.deepcopy(self.objects[resource][key])

    def _pending(self, resource: str, seen: int, deadline: float) -> bool:
        recorded = self.history_base[resource] + len(self.history[resource])
        return self.closing or recorded > seen or time.monotonic() > deadline

    def events(self, resource: str, since: int, timeout: float) -> Iterator[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        with self.cond:
            if since < self.compacted[resource]:
                yield {"type": "ERROR", "object": EXPIRED}
                return
            history = self.history[resource]
            pos = self.history_base[resource] + next(
                (i for i, (rv, _) in enumerate(history) if rv > since), len(history)
            )
        while True:
            with self.cond:
                self.cond.wait_for(partial(self._pending, resource, pos, deadline), timeout=0.2)
                if self.closing or time.monotonic() > deadline:
                    return
                base = self.history_base[resource]
                if pos < base:  # compacted past what this watch has read
                    batch = [{"type": "ERROR", "object": EXPIRED}]
                else:
                    batch = [e for _, e in self.history[resource][pos - base:]]
                    pos = base + len(self.history[resource])
            for event in batch:
                yield event
                if event["type"] == "ERROR":
                    return


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "reason": reason,
            "code": code, "message": message}


def _by_path() -> dict[tuple[str, str, str], str]:
    """(group, version, plural) -> resource name, for every registered resource."""
    out = {}
    for resource, meta in TYPE_META.items():
        group, _, version = meta["apiVersion"].rpartition("/")
        out[(group, version, resource)] = resource
    return out


def parse_path(path: str) -> tuple[str, str | None, str | None] | None:
    """(resource, namespace, name) of a resource path, or None."""
    parts = path.strip("/").split("/")
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = unquote(rest[1]), rest[2:]
    if not 1 <= len(rest) <= 2:
        return None
    resource = _by_path().get((group, version, rest[0]))
    if resource is None or (namespace is not None and resource not in NAMESPACED):
        return None
    return resource, namespace, unquote(rest[1]) if len(rest) == 2 else None


def make_handler(api: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _json(self, status: int, body: dict[str, Any]) -> None:
            reply_json(self, status, body)

        def _route(self, path: str) -> tuple[str | None, str | None]:
            parsed = parse_path(path)
            if parsed is not None and parsed[2] is None:
                return parsed[0], parsed[1]
            return PATHS.get(path), None

        def _discovery(self, path: str) -> bool:
            parts = path.strip("/").split("/")
            if parts == ["api"]:
                self._json(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
            elif parts == ["apis"]:
                self._json(200, api.api_group_list())
            elif parts == ["api", "v1"] or (len(parts) == 3 and parts[0] == "apis"):
                group, version = ("", "v1") if parts[0] == "api" else (parts[1], parts[2])
                found = api.api_resource_list(group, version)
                self._json(200, found) if found else self._json(404, _status(404, "NotFound", "not found"))
            else:
                return False
            return True

        def _body(self) -> dict[str, Any] | None:
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                return None
            return body if isinstance(body, dict) else None

        def _write(self, method: str) -> None:
            body = self._body()  # read it whatever the answer: the connection is kept alive
            parsed = parse_path(urlsplit(self.path).path)
            if parsed is None or parsed[0] not in api.served or parsed[0] in api.absent:
                self._json(404, _status(404, "NotFound", "the server could not find the requested resource"))
                return
            resource, namespace, name = parsed
            if (method == "POST") == (name is not None):
                self._json(405, _status(405, "MethodNotAllowed", f"{method} is not allowed here"))
                return
            if body is None:
                self._json(400, _status(400, "BadRequest", "the body is not a JSON object"))
                return
            self._json(*api.write_object(method, resource, namespace, body, name))

        def do_POST(self) -> None:
            self._write("POST")

        def do_PUT(self) -> None:
            self._write("PUT")

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if self._discovery(url.path):
                return
            parsed = parse_path(url.path)
            if parsed is not None and parsed[2] is not None:  # one object by name
                wanted, in_namespace, name = parsed
                if wanted not in api.served or wanted in api.absent:
                    self._json(404, _status(404, "NotFound", "the server could not find the requested resource"))
                    return
                self._json(*api.get_object(wanted, f"{in_namespace}/{name}" if in_namespace else str(name)))
                return
            resource, namespace = self._route(url.path)
            if resource is not None and resource in api.absent:
                with api.cond:
                    if resource in api.list_calls:  # counted, so tests can wait for a recheck
                        api.list_calls[resource] += 1
                resource = None
            if resource is None or resource not in api.served:
                self._json(404, {"kind": "Status", "code": 404, "status": "Failure", "reason": "NotFound"})
                return
            query = parse_qs(url.query)
            if query.get("watch", [""])[0] in ("true", "1"):
                self._watch(resource, query)
            else:
                limit = int(query["limit"][0]) if "limit" in query else None
                token = query.get("continue", [None])[0]
                selector = query.get("fieldSelector", [""])[0]
                labels = query.get("labelSelector", [""])[0]
                with api.cond:
                    api.list_queries.append((resource, namespace, query))
                self._json(*api.list_page(resource, limit, token, namespace, selector, labels))

        def _watch(self, resource: str, query: dict[str, list[str]]) -> None:
            with api.cond:
                api.watch_calls[resource] += 1
                api.watch_queries.append(query)
                api.watch_log.append((resource, int(query.get("resourceVersion", ["0"])[0] or 0)))
                fail = api.fail_watches[resource] > 0
                if fail:
                    api.fail_watches[resource] -= 1
            if fail:
                self._json(500, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                 "reason": "InternalError", "code": 500, "message": "watch failed"})
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            since = int(query.get("resourceVersion", ["0"])[0] or 0)
            timeout = float(query.get("timeoutSeconds", ["60"])[0])
            try:
                for event in api.events(resource, since, timeout):
                    line = json.dumps(event).encode() + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

    return Handler



def api_client(api: FakeApiServer) -> Any:
    """A ``kubernetes`` ApiClient for the served ``api`` (plain HTTP on 127.0.0.1)."""
    from kubernetes import client as k8s

    configuration = k8s.Configuration()
    configuration.host = f"http://127.0.0.1:{api.port}"  # type: ignore[attr-defined]
    return k8s.ApiClient(configuration)


@contextlib.contextmanager
def serving(state: FakeApiServer) -> Iterator[FakeApiServer]:
    """Serve ``state`` on 127.0.0.1 (its ``port`` attribute is set) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.port = server.server_address[1]
    try:
        yield state
    finally:
        with state.cond:
            state.closing = True
            state.cond.notify_all()
        server.shutdown()
        server.server_close()

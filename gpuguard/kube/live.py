"""List the objects the pending-pod analysis needs from a live cluster, read-only.

Uses the ``kubernetes`` client's list calls only (RBAC: ``list`` on nodes, pods, events,
priorityclasses and, optionally, runtimeclasses and karpenter.sh nodepools), paginated with
``limit``/``continue``; an expired continue token (HTTP 410) restarts that list.  Bodies are
decoded with msgspec into pruned dicts (see prune.py), so a large cluster costs little memory.

* Pods are listed cluster-wide with ``status.phase!=Succeeded,status.phase!=Failed``, the same
  filter as the scheduler's informer (pending-gpus.md §2.1): every namespace's pods hold GPUs.
  When only one namespace may be read, that namespace is listed and a note says allocation is
  partial.
* Events are filtered to ``reason=FailedScheduling`` (a field selector the core/v1 Event API
  supports; pending-gpus.md §1.5).
* Nodes and pods are required; a failure to list events, PriorityClasses, RuntimeClasses or
  NodePools becomes a note (a 404 for NodePools means Karpenter is not installed: no note).
* Dynamic Resource Allocation's DeviceClasses, ResourceSlices, ResourceClaims and
  ResourceClaimTemplates are listed at the newest ``resource.k8s.io`` version served (v1, else
  v1beta2, else v1beta1; 404 at every one: DRA is not served, no note).  They are kept all or none:
  the devices without the claims that hold them (or the reverse) would misstate what is free.
* For workloads that have no pods (policies/pending/workloads.py): ``FailedCreate`` and
  ``FailedCreatePod`` events (two more field-selected lists, in the events' namespace), ResourceQuotas,
  batch Jobs labelled ``kueue.x-k8s.io/queue-name`` (a label selector), and where Kueue is served its
  Workloads, LocalQueues, ClusterQueues, ResourceFlavors and Cohorts (``kueue.x-k8s.io`` v1beta2, else
  v1beta1; Cohorts also v1alpha1), all or none.  Each is optional: a list that fails is a note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuguard.kube.pager import ContinueExpired, pages_of
from gpuguard.kube.prune import decode_item
from gpuguard.kube.status import HTTP_FORBIDDEN, HTTP_NOT_FOUND, status_message, status_of
from policies.pending.events import FAILED_CREATE
from policies.pending.state import ClusterObjects
from policies.queue_facts import COHORT_VERSIONS, QUEUE_LABEL
from policies.queue_facts import GROUP as KUEUE_GROUP
from policies.queue_facts import VERSIONS as KUEUE_VERSIONS

PAGE_SIZE = 500
CONNECT_TIMEOUT_SECONDS = 10.0
READ_TIMEOUT_SECONDS = 60.0
NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"
SCHEDULING_EVENTS = "reason=FailedScheduling"
MAX_RESTARTS = 3
NODEPOOL_GROUP, NODEPOOL_VERSION = "karpenter.sh", "v1"  # the version policies.karpenter reads
DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")  # the versions policies.dra reads, newest first
DRA_LISTS = (("DeviceClass", "deviceclasses"), ("ResourceSlice", "resourceslices"),
             ("ResourceClaim", "resourceclaims"), ("ResourceClaimTemplate", "resourceclaimtemplates"))
KUEUE_LISTS = (("Workload", "workloads", KUEUE_VERSIONS), ("LocalQueue", "localqueues", KUEUE_VERSIONS),
               ("ClusterQueue", "clusterqueues", KUEUE_VERSIONS), ("ResourceFlavor", "resourceflavors", KUEUE_VERSIONS),
               ("Cohort", "cohorts", COHORT_VERSIONS))


class LiveError(Exception):
    """A required list failed; the message names the resource and, for 403, the RBAC needed."""


@dataclass(slots=True)
class LiveListing:
    objects: ClusterObjects = field(default_factory=ClusterObjects)
    notes: list[str] = field(default_factory=list)
    requests: int = 0


def _reason(exc: BaseException) -> str:
    """The API server's Status message when there is one, else the exception's text."""
    body = getattr(exc, "body", None)
    message = status_message(body) if isinstance(body, bytes | str) and body else None
    if message is not None:
        return message
    reason = getattr(exc, "reason", None)
    return str(reason or exc or type(exc).__name__).splitlines()[0][:300]


class _Lister:
    def __init__(self, api_client: Any, page_size: int, timeout: tuple[float, float]) -> None:
        self.api_client = api_client
        self.page_size = page_size
        self.timeout = timeout
        self.requests = 0

    def _method(self, api: str, name: str) -> Callable[..., Any]:
        import kubernetes.client

        method: Callable[..., Any] = getattr(getattr(kubernetes.client, api)(self.api_client), name)
        return method

    def collect(self, api: str, method: str, kind: str, out: list[Any], **kwargs: Any) -> None:
        """Every page of one list; restarts (at most MAX_RESTARTS times) when a token expires."""
        for _attempt in range(MAX_RESTARTS + 1):
            found: list[Any] = []
            try:
                for page in pages_of(self._method(api, method), page_size=self.page_size, timeout=self.timeout,
                                       on_call=self._count, **kwargs):
                    for raw in page.items:
                        obj = decode_item(raw, kind)
                        if isinstance(obj, dict):
                            found.append(obj)
            except ContinueExpired:
                continue
            out.extend(found)
            return
        raise LiveError(f"listing {kind} objects: the continue token kept expiring (HTTP 410)")

    def _count(self) -> None:
        self.requests += 1


def _rbac(verb_resource: str, scope: str) -> str:
    return f"grant `list` on {verb_resource} ({scope}) to this identity"


def list_cluster(
    api_client: Any,
    namespace: str | None = None,
    *,
    page_size: int = PAGE_SIZE,
    timeout: tuple[float, float] = (CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS),
    runtime_classes: bool = True,
    nodepools: bool = True,
    dra: bool = True,
    whole_jobs: bool = True,
) -> LiveListing:
    """Nodes, non-terminal pods, FailedScheduling events, PriorityClasses (and RuntimeClasses and
    Karpenter NodePools, which only the engine's static checks read; no NodePool CRD means none; and
    the DRA objects, when ``resource.k8s.io`` is served).

    ``namespace`` limits the events listed (the pods to explain live there); pods are listed
    cluster-wide unless that is forbidden.  Raises LiveError when nodes or pods cannot be listed.
    """
    lister = _Lister(api_client, page_size, timeout)
    listing = LiveListing()
    objects = listing.objects

    def required(what: str, scope: str, api: str, method: str, kind: str, out: list[Any], **kw: Any) -> None:
        try:
            lister.collect(api, method, kind, out, **kw)
        except LiveError:
            raise
        except Exception as exc:
            status = status_of(exc)
            hint = f"; {_rbac(what, scope)}" if status == HTTP_FORBIDDEN else ""
            raise LiveError(f"cannot list {what}: {_reason(exc)}{hint}") from None

    def optional(what: str, api: str, method: str, kind: str, out: list[Any], **kw: Any) -> None:
        try:
            lister.collect(api, method, kind, out, **kw)
        except Exception as exc:
            listing.notes.append(f"{what} not listed ({_reason(exc)}); the analysis continues without them")

    required("nodes", "cluster", "CoreV1Api", "list_node", "Node", objects.nodes)
    try:
        lister.collect("CoreV1Api", "list_pod_for_all_namespaces", "Pod", objects.pods,
                       field_selector=NON_TERMINAL_PODS)
    except Exception as exc:
        if status_of(exc) != HTTP_FORBIDDEN or not namespace:
            status = status_of(exc)
            hint = f"; {_rbac('pods', 'all namespaces')}" if status == HTTP_FORBIDDEN else ""
            raise LiveError(f"cannot list pods: {_reason(exc)}{hint}") from None
        required("pods", f"namespace {namespace}", "CoreV1Api", "list_namespaced_pod", "Pod", objects.pods,
                 namespace=namespace, field_selector=NON_TERMINAL_PODS)
        listing.notes.append(
            f"pods could only be listed in namespace {namespace}: GPUs held by pods of other namespaces are "
            "not counted, so free GPUs are overstated"
        )
    if namespace:
        optional("FailedScheduling events", "CoreV1Api", "list_namespaced_event", "Event", objects.events,
                 namespace=namespace, field_selector=SCHEDULING_EVENTS)
    else:
        optional("FailedScheduling events", "CoreV1Api", "list_event_for_all_namespaces", "Event", objects.events,
                 field_selector=SCHEDULING_EVENTS)
    optional("PriorityClasses", "SchedulingV1Api", "list_priority_class", "PriorityClass", objects.priority_classes)
    if runtime_classes:
        optional("RuntimeClasses", "NodeV1Api", "list_runtime_class", "RuntimeClass", objects.runtime_classes)
    if nodepools:
        try:
            lister.collect("CustomObjectsApi", "list_cluster_custom_object", "NodePool", objects.nodepools,
                           group=NODEPOOL_GROUP, version=NODEPOOL_VERSION, plural="nodepools")
        except Exception as exc:
            if status_of(exc) != HTTP_NOT_FOUND:  # 404: Karpenter is not installed
                listing.notes.append(f"Karpenter NodePools not listed ({_reason(exc)}); the static checks "
                                     "continue without them")
    if dra:
        _list_dra(lister, listing)
    if whole_jobs:
        _list_whole_jobs(lister, listing, namespace, optional)
    listing.requests = lister.requests
    return listing


def _list_whole_jobs(lister: _Lister, listing: LiveListing, namespace: str | None,
                     optional: Callable[..., None]) -> None:
    """What explains workloads without pods: controllers' FailedCreate events, quotas, queued Jobs, Kueue."""
    objects = listing.objects
    for reason in FAILED_CREATE:
        if namespace:
            optional(f"{reason} events", "CoreV1Api", "list_namespaced_event", "Event", objects.events,
                     namespace=namespace, field_selector=f"reason={reason}")
        else:
            optional(f"{reason} events", "CoreV1Api", "list_event_for_all_namespaces", "Event", objects.events,
                     field_selector=f"reason={reason}")
    optional("ResourceQuotas", "CoreV1Api", "list_resource_quota_for_all_namespaces", "ResourceQuota", objects.quotas)
    jobs: list[Any] = []
    optional(f"Jobs labelled {QUEUE_LABEL}", "BatchV1Api", "list_job_for_all_namespaces", "Job", jobs,
             label_selector=QUEUE_LABEL)
    for job in jobs:
        job.setdefault("apiVersion", "batch/v1")
    objects.controllers.extend(jobs)
    found: list[Any] = []
    try:
        for kind, plural, versions in KUEUE_LISTS:
            items: list[Any] = []
            served = ""
            for version in versions:
                try:
                    lister.collect("CustomObjectsApi", "list_cluster_custom_object", kind, items,
                                   group=KUEUE_GROUP, version=version, plural=plural)
                except Exception as exc:
                    if status_of(exc) == HTTP_NOT_FOUND:
                        continue  # an older version may be served
                    raise
                served = version
                break
            if not served:
                if kind == "Workload":
                    return  # kueue.x-k8s.io is not served: no Kueue in this cluster
                continue  # Cohorts came later than the rest
            for item in items:  # list items carry no TypeMeta; policies.queue_facts reads the group
                item.setdefault("apiVersion", f"{KUEUE_GROUP}/{served}")
            found.extend(items)
    except Exception as exc:
        listing.notes.append(f"Kueue objects ({KUEUE_GROUP}) not listed ({_reason(exc)}); workloads Kueue holds "
                             "are not explained")
        return
    objects.kueue.extend(found)


def _list_dra(lister: _Lister, listing: LiveListing) -> None:
    found: list[Any] = []
    version = ""
    try:
        for kind, plural in DRA_LISTS:
            items: list[Any] = []
            for candidate in ((version,) if version else DRA_VERSIONS):
                try:
                    lister.collect("CustomObjectsApi", "list_cluster_custom_object", kind, items,
                                   group=DRA_GROUP, version=candidate, plural=plural)
                except Exception as exc:
                    if status_of(exc) == HTTP_NOT_FOUND and not version:
                        continue  # an older version may be served
                    raise
                version = candidate
                break
            if not version:
                return  # resource.k8s.io is not served: no DRA in this cluster
            for item in items:  # list items carry no TypeMeta; policies.dra reads the version
                item.setdefault("apiVersion", f"{DRA_GROUP}/{version}")
            found.extend(items)
    except Exception as exc:
        listing.notes.append(f"DRA objects ({DRA_GROUP}) not listed ({_reason(exc)}); the analysis continues "
                             "without DeviceClasses, ResourceSlices and ResourceClaims")
        return
    listing.objects.dra.extend(found)


def configuration_from(kubeconfig: str | None, in_cluster: bool) -> Any:
    """A ``kubernetes.client.Configuration`` for the service account or a kubeconfig (None: the
    default one), loaded now, so a missing kubeconfig or service account fails with its own message."""
    from kubernetes import client
    from kubernetes import config as kube_config

    config: Any = kube_config  # untyped module
    configuration = client.Configuration()
    if in_cluster:
        config.load_incluster_config(client_configuration=configuration)
    else:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    return configuration


def api_client_from(kubeconfig: str | None, in_cluster: bool) -> Any:
    """A ``kubernetes.client.ApiClient`` for the service account or a kubeconfig (None: default)."""
    from kubernetes import client

    return client.ApiClient(configuration_from(kubeconfig, in_cluster))

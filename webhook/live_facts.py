"""Cluster facts kept current by listing and watching Nodes, RuntimeClasses, Karpenter NodePools, DRA
objects, ResourceQuotas and Kueue's queues.

One background thread per resource runs the reflector loop that client-go's informers use:
list (paginated) → watch from the list's resourceVersion with bookmarks → on ``410 Gone``
relist → on other errors back off exponentially with jitter and resume.  Every change that
matters to the rules rebuilds an immutable :class:`ClusterFacts` and swaps the reference in, so
admission requests read ``current()`` without locks and never call the API server.

Objects are read as the API server sends them (``_preload_content=False`` and raw watch
events), i.e. with camelCase keys; list items carry no ``kind``, so they are converted with
``node_from_object``/``runtime_class_from_object``/``nodepool_from_object`` directly rather than
by kind dispatch.

NodePools (``karpenter.sh/v1``) are optional: while the API server answers 404 (no Karpenter
CRD), the NodePool reflector counts as synced with none and lists again every
``crd_recheck_seconds``, so a Karpenter installed later is picked up without a restart.

Dynamic Resource Allocation (``resource.k8s.io``: DeviceClasses, ResourceSlices, ResourceClaims and
ResourceClaimTemplates) is optional the same way: each is listed at the newest version the server
serves (v1 since Kubernetes 1.34, else v1beta2, else v1beta1); 404 at every version means DRA is not
served.  They become ``ClusterFacts.dra`` (``policies.dra.facts``): parsed views, claims and
templates keyed ``namespace/name``.  Which devices match which selectors is remembered from one
snapshot to the next while the ResourceSlices and DeviceClasses stay the same (claims change with
every allocation).

ResourceQuotas (all namespaces) and Kueue's LocalQueues, ClusterQueues, ResourceFlavors and Cohorts
(``kueue.x-k8s.io`` v1beta2, else v1beta1; Cohorts also v1alpha1) are watched for the whole-job rules
(gpu-quota-exceeded, gpu-queue-unadmittable): they become ``ClusterFacts.quotas`` and
``ClusterFacts.queues``, each with a token of its own (``QUOTAS``, ``QUEUES``), so a quota edit keeps
the memo entries of every pod template.  Their ``status`` (a quota's ``used``, a ClusterQueue's
reservations) changes with every pod and admission and no rule judges by it (the rules say "never",
not "not now"), so it is dropped before comparing: only spec changes publish.  Kueue is optional like
Karpenter: while its CRDs are not served the queues are unknown (``None``: the queue rule stays
silent) and they are listed again every ``crd_recheck_seconds``, so a Kueue installed later is picked
up without a restart; they count as known once LocalQueues, ClusterQueues and ResourceFlavors are all
served (Cohorts too, where their CRD is served).  A list the API server forbids (HTTP 403: the RBAC of
an older release) is logged once as a warning and treated as not served: the rules judge without it,
readiness does not wait for it, and it is tried again every ``crd_recheck_seconds``.

KServe's ServingRuntimes, ClusterServingRuntimes and LLMInferenceServiceConfigs (``serving.kserve.io``)
are optional the same way (a 403 too): they become ``ClusterFacts.kserve`` (policies.kserve), what
KServe merges under its InferenceServices' and LLMInferenceServices' pods, with a token of their own
(``KSERVE``).
"""

from __future__ import annotations

import contextlib
import logging
import operator
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from gpuguard.kube.live import configuration_from
from gpuguard.kube.pager import pages_of
from gpuguard.kube.status import HTTP_FORBIDDEN, HTTP_GONE, HTTP_NOT_FOUND, status_message, status_of
from policies.dra.capacity import mark_applied, node_capacity, serving
from policies.dra.claims import parse_resource_claim, parse_resource_claim_template
from policies.dra.facts import DraFacts
from policies.dra.objects import DeviceClass
from policies.dra.reading import DraObjects
from policies.dra.slices import parse_device_class, parse_resource_slice
from policies.facts import (
    ClusterFacts,
    NodeFacts,
    NodeGrouper,
    RuntimeClassFacts,
    node_from_object,
    runtime_class_from_object,
    same_for_scheduling,
)
from policies.karpenter import nodepool_from_object
from policies.kserve import GROUP as KSERVE_GROUP
from policies.kserve import KServeObjects, kserve_objects
from policies.queue_facts import (
    COHORT_VERSIONS,
    QueueFacts,
    cluster_queue_from_object,
    cohort_from_object,
    local_queue_from_object,
    resource_flavor_from_object,
)
from policies.queue_facts import GROUP as KUEUE_GROUP
from policies.queue_facts import VERSIONS as KUEUE_VERSIONS
from policies.quota_facts import QuotaFacts, quota_from_object
from policies.reads import ASPECTS, DRA_CLAIMS, DRA_DEVICES, DRA_TEMPLATES, KSERVE, POOLS, QUEUES, QUOTAS
from policies.reads import NODES as NODES_ASPECT
from policies.reads import RUNTIME_CLASSES as RUNTIME_CLASSES_ASPECT
from policies.shapes import as_mapping

log = logging.getLogger("gpuguard.facts")

CRD_RECHECK_SECONDS = 60.0
LIST_PAGE_SIZE = 500
# client-go's reflector: watch timeout is random in [minWatchTimeout, 2*minWatchTimeout).
MIN_WATCH_TIMEOUT_SECONDS = 300
CONNECT_TIMEOUT_SECONDS = 10.0
LIST_READ_TIMEOUT_SECONDS = 60.0
# While changes keep coming, at most one snapshot per this many seconds: a burst of node updates
# (a pool tainted, a thousand GFD relabels) costs a few rebuilds, and a change waits at most this long.
PUBLISH_INTERVAL_SECONDS = 0.2
_ITEM: msgspec.json.Decoder[Any] = msgspec.json.Decoder()

FactsCallback = Callable[[ClusterFacts], None]
ApiClientFactory = Callable[[], Any]


class ResourceGone(Exception):
    """The resourceVersion is too old (HTTP 410): the store must be rebuilt by a fresh list."""


class _Stopped(Exception):
    """Raised inside a reflector thread to unwind it when stop() was called."""


class _Absent(Exception):
    """An optional resource the API server does not serve (its CRD is not installed)."""


class _Forbidden(_Absent):
    """A resource the API server refuses to list (403) where that means "judge without it"."""


@dataclass(frozen=True, slots=True)
class _Resource:
    """How to list/watch one resource type and turn its objects into facts."""

    name: str
    api: str  # CoreV1Api | NodeV1Api | CustomObjectsApi
    method: str  # list_node | list_runtime_class | list_cluster_custom_object
    convert: Callable[[Mapping[str, Any]], Any]
    arguments: tuple[tuple[str, str], ...] = ()  # fixed keyword arguments of the list method
    optional: bool = False  # served only when a CRD is installed
    versions: tuple[str, ...] = ()  # API versions to try in order (list_cluster_custom_object's ``version``)
    namespaced: bool = False  # stored as namespace/name
    # Whether two converted versions are the same for the rules (a new one that is changes nothing).
    same: Callable[[Any, Any], bool] = operator.eq
    # A 403 means "not granted" rather than an outage: the facts go without it (listed again every
    # crd_recheck_seconds) instead of the webhook staying unready (an upgrade applied before its RBAC).
    forbidden_is_absent: bool = False
    # Whether being served with no objects is news of its own (Kueue installed with no LocalQueue
    # yet: a queue-name then names none), not only the objects' changes.
    served_is_news: bool = False

    def key(self, meta: Mapping[str, Any]) -> str | None:
        name = meta.get("name")
        if not isinstance(name, str):
            return None
        return f"{meta.get('namespace') or ''}/{name}" if self.namespaced else name


NODES = _Resource("nodes", "CoreV1Api", "list_node", node_from_object, same=same_for_scheduling)
RUNTIME_CLASSES = _Resource("runtimeclasses", "NodeV1Api", "list_runtime_class", runtime_class_from_object)
NODEPOOLS = _Resource(
    "nodepools",
    "CustomObjectsApi",
    "list_cluster_custom_object",
    nodepool_from_object,
    arguments=(("group", "karpenter.sh"), ("version", "v1"), ("plural", "nodepools")),
    optional=True,
)


def _dra(plural: str, convert: Callable[[Mapping[str, Any]], Any], namespaced: bool = False) -> _Resource:
    return _Resource(
        plural,
        "CustomObjectsApi",
        "list_cluster_custom_object",
        convert,
        arguments=(("group", "resource.k8s.io"), ("plural", plural)),
        optional=True,
        versions=("v1", "v1beta2", "v1beta1"),
        namespaced=namespaced,
    )


DEVICE_CLASSES = _dra("deviceclasses", parse_device_class)
RESOURCE_SLICES = _dra("resourceslices", parse_resource_slice)
RESOURCE_CLAIMS = _dra("resourceclaims", parse_resource_claim, namespaced=True)
RESOURCE_CLAIM_TEMPLATES = _dra("resourceclaimtemplates", parse_resource_claim_template, namespaced=True)
DRA_RESOURCES = (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES)
_DRA_NAMES = frozenset(r.name for r in DRA_RESOURCES)


def _spec_only(convert: Callable[[Mapping[str, Any]], Any]) -> Callable[[Mapping[str, Any]], Any]:
    """``convert`` of the object without its ``status`` (no rule judges by it; it changes all the time)."""

    def without_status(obj: Mapping[str, Any]) -> Any:
        return convert({k: v for k, v in obj.items() if k != "status"})

    return without_status


RESOURCE_QUOTAS = _Resource(
    "resourcequotas",
    "CoreV1Api",
    "list_resource_quota_for_all_namespaces",
    _spec_only(quota_from_object),
    optional=True,  # always served by a real API server; a test server may not
    namespaced=True,
    forbidden_is_absent=True,
)


def _kueue(plural: str, convert: Callable[[Mapping[str, Any]], Any], namespaced: bool = False,
           versions: tuple[str, ...] = KUEUE_VERSIONS) -> _Resource:
    return _Resource(
        plural,
        "CustomObjectsApi",
        "list_cluster_custom_object",
        _spec_only(convert),
        arguments=(("group", KUEUE_GROUP), ("plural", plural)),
        optional=True,
        versions=versions,
        namespaced=namespaced,
        forbidden_is_absent=True,
        served_is_news=True,
    )


LOCAL_QUEUES = _kueue("localqueues", local_queue_from_object, namespaced=True)
CLUSTER_QUEUES = _kueue("clusterqueues", cluster_queue_from_object)
RESOURCE_FLAVORS = _kueue("resourceflavors", resource_flavor_from_object)
COHORTS = _kueue("cohorts", cohort_from_object, versions=COHORT_VERSIONS)
KUEUE_RESOURCES = (LOCAL_QUEUES, CLUSTER_QUEUES, RESOURCE_FLAVORS, COHORTS)
_KUEUE_NAMES = frozenset(r.name for r in KUEUE_RESOURCES)


def _kserve(plural: str, kind: str, versions: tuple[str, ...], namespaced: bool) -> _Resource:
    def convert(obj: Mapping[str, Any]) -> dict[str, Any]:
        meta = as_mapping(obj.get("metadata"))
        api_version = obj.get("apiVersion")
        return {  # what policies.kserve reads, with the kind list items may lack
            "apiVersion": api_version if isinstance(api_version, str) else f"{KSERVE_GROUP}/{versions[0]}",
            "kind": kind,
            "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace")},
            "spec": obj.get("spec"),
        }

    return _Resource(
        plural,
        "CustomObjectsApi",
        "list_cluster_custom_object",
        convert,
        arguments=(("group", KSERVE_GROUP), ("plural", plural)),
        optional=True,
        versions=versions,
        namespaced=namespaced,
        forbidden_is_absent=True,
    )


# KServe's ServingRuntimes, ClusterServingRuntimes and LLMInferenceServiceConfigs (policies.kserve), where
# KServe is installed: what its InferenceServices' and LLMInferenceServices' pods are merged over.
KSERVE_RESOURCES = (
    _kserve("servingruntimes", "ServingRuntime", ("v1alpha1",), namespaced=True),
    _kserve("clusterservingruntimes", "ClusterServingRuntime", ("v1alpha1",), namespaced=False),
    _kserve("llminferenceserviceconfigs", "LLMInferenceServiceConfig", ("v1alpha2", "v1alpha1"), namespaced=True),
)
_KSERVE_NAMES = frozenset(r.name for r in KSERVE_RESOURCES)
# Every resource LiveFacts runs a reflector for, in its order.
WATCHED = (NODES, RUNTIME_CLASSES, NODEPOOLS, *DRA_RESOURCES, RESOURCE_QUOTAS, *KUEUE_RESOURCES, *KSERVE_RESOURCES)



def backoff_delay(attempt: int, initial: float, maximum: float, rng: random.Random) -> float:
    """Exponential back-off with "equal jitter": half fixed, half random, capped at maximum."""
    ceiling = min(maximum, initial * (2 ** max(0, attempt - 1)))
    return float(ceiling / 2 + rng.uniform(0, ceiling / 2))


class _Reflector:
    """List+watch loop for one resource; keeps name → converted facts."""

    def __init__(self, owner: LiveFacts, resource: _Resource) -> None:
        self.owner = owner
        self.resource = resource
        self.store: dict[str, Any] = {}
        self.version: str | None = None  # resume point: the last resourceVersion seen
        self.synced = False
        self.absent = False  # an optional resource the API server does not serve (or forbids: ``forbidden``)
        self.forbidden = False  # the API server refused to list it (403) and that counts as absent
        self.last_contact: float | None = None  # monotonic time the server last confirmed our view
        self.list_calls = 0
        self.version_index = 0  # into resource.versions
        self._response: Any = None  # the open watch response, so stop() can interrupt its read
        self._rng = random.Random()
        self.thread = threading.Thread(
            target=self._run, name=f"gpuguard-watch-{resource.name}", daemon=True
        )

    @property
    def api_version(self) -> str:
        return self.resource.versions[self.version_index] if self.resource.versions else ""

    def _convert(self, item: Mapping[str, Any]) -> Any:
        if self.resource.versions and "apiVersion" not in item:  # list items carry no TypeMeta
            group = dict(self.resource.arguments)["group"]
            item = {**item, "apiVersion": f"{group}/{self.api_version}"}
        return self.resource.convert(item)

    # --- API calls -----------------------------------------------------------------------
    def _method(self) -> Callable[..., Any]:
        import kubernetes.client

        api = getattr(kubernetes.client, self.resource.api)(self.owner.api_client)
        method: Callable[..., Any] = getattr(api, self.resource.method)
        fixed = dict(self.resource.arguments)
        if self.resource.versions:
            fixed["version"] = self.api_version
        if not fixed:
            return method

        def bound(**kwargs: Any) -> Any:
            return method(**fixed, **kwargs)

        return bound

    def _list(self) -> str:
        """Full paginated list; replaces the store. Returns the list's resourceVersion."""
        self.list_calls += 1
        method = self._method()
        items: list[Mapping[str, Any]] = []
        version = ""
        try:
            for page in pages_of(method, page_size=LIST_PAGE_SIZE,
                                   timeout=(CONNECT_TIMEOUT_SECONDS, LIST_READ_TIMEOUT_SECONDS)):
                for raw in page.items:
                    item = _ITEM.decode(raw)
                    if isinstance(item, Mapping):
                        items.append(item)
                version = page.resource_version
                if page.more and self.owner.stopping:
                    raise _Stopped
        except _Stopped:
            raise
        except Exception as exc:
            if status_of(exc) == HTTP_GONE:  # an expired continue token: start over
                raise ResourceGone(f"{self.resource.name}: {exc}") from None
            if status_of(exc) == HTTP_NOT_FOUND and self.resource.optional:
                raise _Absent from None
            if status_of(exc) == HTTP_FORBIDDEN and self.resource.forbidden_is_absent:
                raise _Forbidden(status_message(getattr(exc, "body", None) or b"") or "403 Forbidden") from None
            raise
        store: dict[str, Any] = {}
        for item in items:
            key = self.resource.key(as_mapping(item.get("metadata")))
            converted = self._convert(item)
            if converted is not None and key is not None:
                store[key] = converted
        self.owner._replace(self, store, absent=False)
        return version

    def _events(self, version: str) -> Iterator[dict[str, Any]]:
        from kubernetes import watch

        watch_module: Any = watch  # the client's watch module is untyped
        w = watch_module.Watch()
        timeout = int(self.owner.watch_timeout_seconds * (1 + self._rng.random()))
        method = self._method()

        # Watch derives a model type from the method's docstring and deserialises into it; an
        # undocumented wrapper makes it hand back the raw dicts (and its ``deserialize=False``
        # mode breaks on ERROR events, which it reads from a key only the other mode sets).
        def raw(**kwargs: Any) -> Any:
            resp = method(**kwargs)
            self._response = resp
            # stop() sets the flag, then interrupts whatever response is registered: one of the
            # two sides always sees the other, whenever stop() runs.
            if self.owner.stopping:
                # Close, not release: the server is still streaming on this connection, and a
                # released connection would be reused by the other thread's next request.
                resp.close()
                resp.release_conn()
                raise _Stopped
            return resp

        stream = w.stream(
            raw,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout,
            _request_timeout=(CONNECT_TIMEOUT_SECONDS, timeout + 30),
        )
        try:
            yield from stream
        finally:
            self._response = None

    def _watch(self) -> None:
        """Watch from ``self.version`` until the server ends the stream or it fails."""
        assert self.version is not None
        try:
            for event in self._events(self.version):
                if self.owner.stopping:
                    return
                self._apply(event)
        except Exception as exc:
            if status_of(exc) == HTTP_GONE:
                raise ResourceGone(f"{self.resource.name}: {exc}") from None
            raise
        if not self.owner.stopping:
            self.last_contact = time.monotonic()  # a clean end of the watch: nothing was missed

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object")
        if not isinstance(obj, Mapping):
            return
        meta = as_mapping(obj.get("metadata"))
        if meta.get("resourceVersion"):
            self.version = str(meta["resourceVersion"])
        self.last_contact = time.monotonic()
        name = self.resource.key(meta)
        if kind == "BOOKMARK" or name is None:
            return
        if kind in ("ADDED", "MODIFIED"):
            converted = self._convert(obj)
            if converted is not None:
                self.owner._put(self, name, converted)
        elif kind == "DELETED":
            self.owner._put(self, name, None)

    # --- the loop ------------------------------------------------------------------------
    def _pause(self, attempt: int, exc: BaseException) -> None:
        delay = backoff_delay(attempt, self.owner.backoff_initial, self.owner.backoff_max, self._rng)
        log.warning("%s: %s; retrying in %.1fs", self.resource.name, exc, delay)
        log.debug("%s: failure details", self.resource.name, exc_info=exc)
        self.owner._stop_event.wait(delay)

    def _run(self) -> None:
        attempt = 0
        while not self.owner.stopping:
            try:
                if self.version is None:
                    self.version = self._list()
                    if self.forbidden:
                        log.info("%s: listing is allowed now", self.resource.name)
                    self.forbidden = False
                    log.info(
                        "%s: listed %d at resourceVersion %s", self.resource.name, len(self.store), self.version
                    )
                self._watch()
                attempt = 0
            except _Stopped:
                return
            except _Forbidden as exc:
                # RBAC grants a resource at every version alike: no older version to try.
                self.version_index = 0
                if not self.forbidden:
                    log.warning("%s: the API server forbids listing them (%s); judging without them until "
                                "get/list/watch is granted (see deploy/rbac.yaml), checking again every %.0fs",
                                self.resource.name, exc, self.owner.crd_recheck_seconds)
                self.forbidden = True
                if not self.synced or self.store or not self.absent:
                    self.owner._replace(self, {}, absent=True)
                self.version = None
                self.owner._stop_event.wait(self.owner.crd_recheck_seconds)
            except _Absent:
                if self.version_index + 1 < len(self.resource.versions):
                    self.version_index += 1  # an older version of the API may be served
                    self.version = None
                    continue
                self.version_index = 0
                self.forbidden = False
                if not self.synced or self.store or not self.absent:
                    log.info("%s: not served by the API server (CRD or API not enabled); checking again every %.0fs",
                             self.resource.name, self.owner.crd_recheck_seconds)
                    self.owner._replace(self, {}, absent=True)
                self.version = None
                self.owner._stop_event.wait(self.owner.crd_recheck_seconds)
            except ResourceGone as exc:
                log.info("%s: %s; relisting", self.resource.name, exc)
                self.version = None
                attempt += 1
                if attempt > 1:  # a relist that is gone again at once: do not hammer the server
                    self._pause(attempt - 1, exc)
            except Exception as exc:
                if self.owner.stopping:
                    return
                attempt += 1
                self._pause(attempt, exc)

    def interrupt(self) -> None:
        resp = self._response
        sock = getattr(getattr(resp, "connection", None), "sock", None)
        if sock is not None:
            # Unblocks a read in progress (it returns end-of-stream); closing is left to the reader.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


@dataclass
class _Changes:
    """What changed since the last publish (taken by the publisher under the lock)."""

    nodes: set[str] = field(default_factory=set)  # node names added, modified or deleted
    resources: set[str] = field(default_factory=set)  # other resources with a change
    slice_nodes: set[str] | None = field(default_factory=set)  # nodes whose DRA devices changed; None: all
    slice_pools: set[tuple[str, str]] = field(default_factory=set)  # (driver, pool) of changed node-local slices
    since: float | None = None  # monotonic time of the first unpublished change

    def __bool__(self) -> bool:
        return bool(self.nodes or self.resources or self.since is not None)


@dataclass(frozen=True, slots=True)
class PublishStats:
    publishes: int
    events_applied: int  # watch events that changed what scheduling reads
    events_unchanged: int  # watch events (heartbeats, GFD timestamps, …) that changed nothing
    longest_build_seconds: float
    last_build_seconds: float
    regroups: int  # publishes that regrouped every node


class LiveFacts:
    """Facts from a live cluster, current within a watch round trip.

    ``api_client_factory`` returns a ``kubernetes.client.ApiClient``; ``on_update`` is called
    (from the publisher thread) with every new snapshot.

    Reflector threads only store what changed; one publisher thread turns changes into snapshots,
    at most one per ``publish_interval`` seconds while changes keep coming (a burst of a thousand
    node updates costs a few snapshots, not a thousand).  A snapshot is built incrementally: the
    node groups whose members did not change are kept (``NodeGrouper``), each aspect of the facts
    keeps its token while unchanged, so the memo entries of the previous snapshot that read only
    unchanged aspects stay valid (``ClusterFacts(basis=…)``), and what DRA serves is worked out again
    only for the nodes whose devices changed.  A node event that changes nothing scheduling reads
    (status heartbeats, ``nvidia.com/gfd.timestamp``: ``policies.facts.same_for_scheduling``) is
    not a change.
    """

    def __init__(
        self,
        api_client_factory: ApiClientFactory,
        on_update: FactsCallback | None = None,
        *,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        watch_timeout_seconds: int = MIN_WATCH_TIMEOUT_SECONDS,
        crd_recheck_seconds: float = CRD_RECHECK_SECONDS,
        publish_interval: float = PUBLISH_INTERVAL_SECONDS,
    ) -> None:
        self._factory = api_client_factory
        self._on_update = on_update
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.watch_timeout_seconds = watch_timeout_seconds
        self.crd_recheck_seconds = crd_recheck_seconds
        self.publish_interval = publish_interval
        self.api_client: Any = None
        self._facts = ClusterFacts.empty()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop_event = threading.Event()
        self._dra_reflectors = tuple(_Reflector(self, r) for r in DRA_RESOURCES)
        self._quota_reflector = _Reflector(self, RESOURCE_QUOTAS)
        self._kueue_reflectors = tuple(_Reflector(self, r) for r in KUEUE_RESOURCES)
        self._kserve_reflectors = tuple(_Reflector(self, r) for r in KSERVE_RESOURCES)
        self._reflectors = (
            _Reflector(self, NODES),
            _Reflector(self, RUNTIME_CLASSES),
            _Reflector(self, NODEPOOLS),
            *self._dra_reflectors,
            self._quota_reflector,
            *self._kueue_reflectors,
            *self._kserve_reflectors,
        )
        assert tuple(r.resource for r in self._reflectors) == WATCHED
        self._changes = _Changes()
        self._dra_tuples: list[tuple[Any, ...] | None] = [None] * len(DRA_RESOURCES)
        self._publisher = threading.Thread(target=self._publish_loop, name="gpuguard-facts-publisher", daemon=True)
        self._started = False
        self._ready = False
        # Publisher state (only the publisher thread touches it).
        self._grouper = NodeGrouper()
        self._tokens: dict[str, object] = {a: object() for a in ASPECTS}
        self._classes: Mapping[str, RuntimeClassFacts] = {}
        self._pools: tuple[NodeFacts, ...] = ()
        self._dra: DraFacts | None = None
        self._served: dict[str, DeviceClass] | None = None
        self._quotas: QuotaFacts | None = None
        self._queues: QueueFacts | None = None
        self._kserve: KServeObjects | None = None
        self._last_publish = 0.0
        self._publishes = 0
        self._applied = 0
        self._unchanged = 0
        self._longest_build = 0.0
        self._last_build = 0.0

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    @property
    def ready(self) -> bool:
        """True once every watched resource has been listed completely (or found not served, or
        forbidden where that is allowed) and a snapshot holding all of them is published."""
        return self._ready

    @property
    def list_calls(self) -> Mapping[str, int]:
        return {r.resource.name: r.list_calls for r in self._reflectors}

    def current(self) -> ClusterFacts:
        return self._facts

    def age_seconds(self) -> float | None:
        """Seconds since the server last confirmed every resource (list, event, bookmark)."""
        contacts = [r.last_contact for r in self._reflectors if not r.absent]
        if not self.ready or any(c is None for c in contacts):
            return None
        return max(0.0, time.monotonic() - min(c for c in contacts if c is not None))

    def lag_seconds(self) -> float:
        """How long the oldest change received but not yet in the published snapshot has waited (0: none)."""
        since = self._changes.since
        return 0.0 if since is None else max(0.0, time.monotonic() - since)

    def publishing(self) -> Mapping[str, float]:
        """``stats()`` as webhook.metrics.PUBLISHING names them."""
        st = self.stats()
        return {"publishes_total": st.publishes, "events_applied_total": st.events_applied,
                "events_unchanged_total": st.events_unchanged, "longest_build_seconds": st.longest_build_seconds,
                "last_build_seconds": st.last_build_seconds, "regroups_total": st.regroups}

    def stats(self) -> PublishStats:
        return PublishStats(self._publishes, self._applied, self._unchanged, self._longest_build,
                            self._last_build, self._grouper.regroups)

    def start(self) -> LiveFacts:
        if self._started:
            raise RuntimeError("LiveFacts already started")
        self._started = True
        self.api_client = self._factory()
        self._publisher.start()
        for r in self._reflectors:
            r.thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the watch threads; interrupts blocked watch reads."""
        self._stop_event.set()
        with self._changed:
            self._changed.notify_all()
        for r in self._reflectors:
            r.interrupt()
        deadline = time.monotonic() + timeout
        for thread in (*(r.thread for r in self._reflectors), self._publisher):
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))
        if self.alive:
            # Closing the client's pools under a thread still inside a request can leave that
            # request waiting forever; the threads are daemons, so leave the client to them.
            log.warning("watch threads did not stop within %.1fs", timeout)
            return
        close = getattr(self.api_client, "close", None)
        if callable(close):
            try:
                close()
            except Exception:  # closing a pool whose sockets were shut down may complain
                log.debug("closing the API client failed", exc_info=True)

    @property
    def alive(self) -> bool:
        return any(r.thread.is_alive() for r in self._reflectors) or self._publisher.is_alive()

    # --- store updates (called from reflector threads) -----------------------------------
    def _note_change(self, reflector: _Reflector, name: str, old: Any, new: Any) -> None:
        changes = self._changes
        if changes.since is None:
            changes.since = time.monotonic()
        resource = reflector.resource
        if resource is NODES:
            changes.nodes.add(name)
            return
        changes.resources.add(resource.name)
        if resource is RESOURCE_SLICES and changes.slice_nodes is not None:
            for item in (old, new):
                if item is None:
                    continue
                if item.node_name and not item.per_device_node_selection:
                    changes.slice_nodes.add(item.node_name)
                    changes.slice_pools.add((item.driver, item.pool.name))  # its pool's other nodes too
                else:
                    changes.slice_nodes = None  # devices reachable from many nodes: every node again
                    break

    def _replace(self, reflector: _Reflector, store: dict[str, Any], *, absent: bool = False) -> None:
        with self._changed:
            if reflector.resource.served_is_news and (not reflector.synced or reflector.absent != absent):
                self._changes.resources.add(reflector.resource.name)
                if self._changes.since is None:
                    self._changes.since = time.monotonic()
            reflector.absent = absent
            old = reflector.store
            same = reflector.resource.same
            for name in old.keys() - store.keys():
                self._note_change(reflector, name, old[name], None)
            for name, value in store.items():
                previous = old.get(name)
                if previous is None or not same(previous, value):
                    self._note_change(reflector, name, previous, value)
                else:
                    store[name] = previous  # keep the published object: nothing changed
            reflector.store = store
            if not reflector.synced:
                reflector.synced = True
                if self._changes.since is None:
                    self._changes.since = time.monotonic()
            reflector.last_contact = time.monotonic()
            self._changed.notify()

    def _put(self, reflector: _Reflector, name: str, value: Any) -> None:
        with self._changed:  # stores are only read by the publisher, under the same lock
            old = reflector.store.get(name)
            if value is None:
                if old is None:
                    return
                reflector.store.pop(name)
            else:
                if old is not None and reflector.resource.same(old, value):
                    self._unchanged += 1
                    return
                reflector.store[name] = value
            self._applied += 1
            self._note_change(reflector, name, old, value)
            self._changed.notify()

    # --- the publisher -----------------------------------------------------------------------
    def _publish_loop(self) -> None:
        while not self.stopping:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._changes) or self.stopping)
            if self.stopping:
                return
            # Coalesce: at most one snapshot per interval while changes keep coming; until the
            # first complete snapshot is out, publish as soon as there is news (readiness waits).
            pause = self._last_publish + self.publish_interval - time.monotonic()
            if self._ready and pause > 0 and self._stop_event.wait(pause):
                return
            try:
                self._publish()
            except Exception:
                log.exception("building the cluster facts failed; keeping the previous snapshot")
                self._stop_event.wait(self.publish_interval)

    def _take(self) -> tuple[dict[str, NodeFacts | None], bool, dict[str, Any]]:
        """Under the lock: the nodes to work out again, whether all is listed, and copies
        of the other stores that changed."""
        with self._changed:
            changes, self._changes = self._changes, _Changes()
            node_store = self._reflectors[0].store
            synced = all(r.synced for r in self._reflectors)
            copies: dict[str, Any] = {}
            if changes.resources & _DRA_NAMES:
                dra_reflectors = self._dra_reflectors
                for i, r in enumerate(dra_reflectors):  # a store that did not change keeps its tuple
                    if r.resource.name in changes.resources or self._dra_tuples[i] is None:
                        self._dra_tuples[i] = tuple(r.store[k] for k in sorted(r.store))
                copies["dra"] = (
                    None if all(r.absent or not r.synced for r in dra_reflectors)
                    else (tuple(self._dra_tuples), not dra_reflectors[0].absent)
                )
            devices_changed = bool(changes.resources & {DEVICE_CLASSES.name, RESOURCE_SLICES.name})
            if devices_changed and (changes.slice_nodes is None or DEVICE_CLASSES.name in changes.resources):
                names: set[str] = set(node_store) | changes.nodes
            else:
                names = set(changes.nodes)
                if changes.slice_nodes:
                    names |= changes.slice_nodes
                if changes.slice_pools:
                    slices = self._dra_reflectors[1].store.values()
                    names.update(s.node_name for s in slices
                                 if s.node_name and (s.driver, s.pool.name) in changes.slice_pools)
            nodes = {n: node_store.get(n) for n in names}
            if RUNTIME_CLASSES.name in changes.resources:
                copies["classes"] = dict(self._reflectors[1].store)
            if NODEPOOLS.name in changes.resources:
                pools = self._reflectors[2].store
                copies["pools"] = tuple(pools[k] for k in sorted(pools))
            if RESOURCE_QUOTAS.name in changes.resources:
                quota = self._quota_reflector
                copies["quotas"] = None if quota.absent or not quota.synced else tuple(quota.store.values())
            if changes.resources & _KUEUE_NAMES:
                copies["queues"] = (
                    tuple(tuple(r.store[k] for k in sorted(r.store)) for r in self._kueue_reflectors)
                    if self._kueue_known() else None
                )
            if changes.resources & _KSERVE_NAMES:
                copies["kserve"] = tuple(r.store[k] for r in self._kserve_reflectors for k in sorted(r.store))
            return nodes, synced, copies

    def _kueue_known(self) -> bool:
        """Whether the Kueue objects are all known: LocalQueues, ClusterQueues and ResourceFlavors
        listed, and Cohorts listed or not served (Kueue before Cohort objects).  Without one of them
        the queue rule would misjudge (a LocalQueue not seen is no LocalQueue), so it judges none."""
        *required, cohorts = self._kueue_reflectors
        if not all(r.synced and not r.absent for r in required):
            return False
        return cohorts.synced and not cohorts.forbidden

    def _publish(self) -> None:
        nodes, synced, copies = self._take()
        started = time.perf_counter()
        tokens = dict(self._tokens)
        if "dra" in copies:
            self._apply_dra(copies["dra"], tokens)
        if "classes" in copies:
            self._classes = copies["classes"]
            tokens[RUNTIME_CLASSES_ASPECT] = object()
        if "pools" in copies:
            self._pools = copies["pools"]
            tokens[POOLS] = object()
        if "quotas" in copies:
            taken = copies["quotas"]
            self._quotas = None if taken is None else QuotaFacts.of(taken)
            tokens[QUOTAS] = object()
        if "queues" in copies:
            taken = copies["queues"]
            self._queues = None if taken is None else QueueFacts.of(*taken)
            tokens[QUEUES] = object()
        if "kserve" in copies:
            served = kserve_objects(copies["kserve"])
            self._kserve = None if served.empty else served
            tokens[KSERVE] = object()
        changed = False
        for name, raw in nodes.items():
            if raw is None:
                if self._grouper.get(name) is not None:
                    self._grouper.remove(name)
                    changed = True
                continue
            node = node_capacity(raw, self._dra, self._served) if self._dra is not None and self._served else raw
            if self._grouper.get(name) != node:
                self._grouper.put(node)
                changed = True
        if changed:
            tokens[NODES_ASPECT] = object()
        node_list, groups = self._grouper.build()
        previous = self._facts
        # A snapshot nobody read has no memo to pass on: the last one read does.
        older = previous.basis
        basis = older if not previous.used and older is not None and older.used else previous
        facts = ClusterFacts(nodes=node_list, runtime_classes=self._classes, source="live", pools=self._pools,
                             dra=self._dra, quotas=self._quotas, queues=self._queues, kserve=self._kserve,
                             groups=groups, tokens=tokens, basis=basis, lender=previous)
        if self._served:
            mark_applied(facts)
        self._tokens = tokens
        self._facts = facts  # one reference assignment: readers see the old or the new snapshot
        build = time.perf_counter() - started
        self._last_build = build
        self._longest_build = max(self._longest_build, build)
        self._publishes += 1
        self._last_publish = time.monotonic()
        if synced:
            self._ready = True
        if self._on_update is not None:
            try:
                self._on_update(facts)
            except Exception:
                log.exception("facts update callback failed")

    def _apply_dra(self, taken: Any, tokens: dict[str, object]) -> None:
        previous = self._dra
        if taken is None:
            dra = None
        else:
            (device_classes, slices, claims, templates), classes_known = taken
            dra = DraFacts(DraObjects(device_classes, slices, claims, templates), classes_known)
            if previous is not None:
                dra.reuse_matches(previous)
        same_devices = (
            dra is not None and previous is not None and dra.same_devices(previous)
            and dra.classes_known == previous.classes_known
        )
        if not same_devices:
            tokens[DRA_DEVICES] = object()
            self._served = serving(dra)
        if previous is None or dra is None or previous.objects.claims is not dra.objects.claims:
            tokens[DRA_CLAIMS] = object()
        if previous is None or dra is None or previous.objects.templates is not dra.objects.templates:
            tokens[DRA_TEMPLATES] = object()
        if (previous is None) != (dra is None):
            tokens[NODES_ASPECT] = object()  # whether DRA is known at all is read through the nodes' view too
        self._dra = dra


def from_kubeconfig(path: str | None, in_cluster: bool, on_update: FactsCallback | None = None) -> LiveFacts:
    """LiveFacts for the in-cluster service account, or a kubeconfig (None: the default one)."""

    from kubernetes import client

    configuration = configuration_from(path, in_cluster)
    # One connection per watch (each reflector keeps one open) plus room for lists: with fewer, urllib3
    # discards connections ("Connection pool is full") and every watch restart opens a new one.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, len(WATCHED) + 4)

    def factory() -> Any:
        return client.ApiClient(configuration)

    return LiveFacts(factory, on_update)

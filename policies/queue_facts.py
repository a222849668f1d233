"""Kueue (``kueue.x-k8s.io``) queues as cluster facts: LocalQueues, ClusterQueues, ResourceFlavors,
Cohorts and Workloads, and the most quota a ClusterQueue can ever reach.

Read from kubernetes-sigs/kueue at commit ff69552e (2026-08-22; v0.19 and later):

* ``LocalQueue`` (namespaced) ``spec.clusterQueue``; a job names it with the label
  ``kueue.x-k8s.io/queue-name`` (pkg/controller/constants ``QueueLabel``).
* ``ClusterQueue`` (cluster-scoped) ``spec.resourceGroups[]`` (``coveredResources``, ``flavors[]``
  of ``name`` and ``resources[]`` of ``name``, ``nominalQuota``, optional ``borrowingLimit`` and
  ``lendingLimit``), ``spec.cohort`` in v1beta1 and ``spec.cohortName`` in v1beta2 (apis/kueue/
  v1beta{1,2}/clusterqueue_types.go), ``spec.namespaceSelector`` ("Defaults to null which is a
  nothing selector (no namespaces eligible)"; pkg/cache/scheduler/clusterqueue.go converts it with
  ``metav1.LabelSelectorAsSelector``, which maps nil to ``labels.Nothing()``), ``spec.stopPolicy``
  (anything but None stops admission).  ``status.flavorsReservation`` / ``flavorsUsage`` hold
  ``total`` and ``borrowed`` per flavor and resource.
* ``Cohort`` ``spec.parentName`` (v1beta1, v1beta2; ``spec.parent`` in v1alpha1) and its own
  ``spec.resourceGroups``; a cohort named by a ClusterQueue exists even without a Cohort object.
* ``ResourceFlavor`` ``spec.nodeLabels``, ``spec.nodeTaints``, ``spec.tolerations``
  (apis/kueue/v1beta2/resourceflavor_types.go).
* ``Workload`` ``spec.queueName``, ``spec.podSets[]`` (``name``, ``count``, ``minCount``,
  ``template``), ``status.conditions`` (``QuotaReserved``, ``Admitted``, ``Evicted``, ``PodsReady``,
  ``Finished``), ``status.admission`` (``clusterQueue``, ``podSetAssignments[].flavors``).

The most a ClusterQueue can ever use of one (flavor, resource), with nothing else admitted, is
Kueue's ``potentialAvailable`` (pkg/cache/scheduler/resource_node.go): a root node has its
``SubtreeQuota``; any other node has its ``localQuota`` plus its parent's potential, capped at its
``SubtreeQuota + borrowingLimit`` when a borrowing limit is set.  ``SubtreeQuota`` is a node's own
nominal quota plus, for a cohort, each child's ``SubtreeQuota - localQuota``; ``localQuota`` is
``max(0, SubtreeQuota - lendingLimit)`` when a lending limit is set, else 0.  The flavor assigner
refuses a pod set whose request exceeds it: "insufficient quota for %s in flavor %s, … > maximum
capacity (%s)" (pkg/scheduler/flavorassigner/flavorassigner.go ``fitsResourceQuota``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from policies.facts import Taint, parse_taints, str_map
from policies.quantity import try_parse
from policies.shapes import as_list, as_mapping

GROUP = "kueue.x-k8s.io"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KINDS = ("LocalQueue", "ClusterQueue", "ResourceFlavor", "Cohort", "Workload")
# Served versions, newest first (v1beta2 since Kueue v0.15; Cohort was v1alpha1 before that).
VERSIONS = ("v1beta2", "v1beta1")
COHORT_VERSIONS = ("v1beta2", "v1beta1", "v1alpha1")
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # set on every namespace by the API server


@dataclass(frozen=True, slots=True)
class ResourceQuotaSpec:
    nominal: Fraction
    borrowing_limit: Fraction | None = None
    lending_limit: Fraction | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str
    resources: Mapping[str, ResourceQuotaSpec]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class Usage:
    total: Fraction
    borrowed: Fraction = Fraction(0)


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    cohort: str
    resource_groups: tuple[ResourceGroup, ...]
    # None: the field is absent (a nothing selector); otherwise the LabelSelector as written.
    namespace_selector: Mapping[str, Any] | None = None
    stop_policy: str = "None"
    # (flavor, resource) -> reserved quota (status.flavorsReservation, else flavorsUsage)
    usage: Mapping[tuple[str, str], Usage] = field(default_factory=dict)
    pending: int = 0
    admitted: int = 0

    def group_of(self, resource: str) -> ResourceGroup | None:
        for group in self.resource_groups:
            if resource in group.covered:
                return group
        return None

    @property
    def stopped(self) -> bool:
        return self.stop_policy not in ("", "None")


@dataclass(frozen=True, slots=True)
class Cohort:
    name: str
    parent: str = ""
    resource_groups: tuple[ResourceGroup, ...] = ()


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = "None"


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class WorkloadPodSet:
    name: str
    count: int
    template: Mapping[str, Any]
    min_count: int | None = None


@dataclass(frozen=True, slots=True)
class Workload:
    namespace: str
    name: str
    queue_name: str
    pod_sets: tuple[WorkloadPodSet, ...]
    conditions: tuple[Condition, ...] = ()
    cluster_queue: str = ""  # status.admission.clusterQueue
    flavors: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # pod set -> resource -> flavor
    owner_kind: str = ""
    owner_name: str = ""
    active: bool = True

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def is_true(self, kind: str) -> bool:
        c = self.condition(kind)
        return c is not None and c.status == "True"

    @property
    def admitted(self) -> bool:
        return self.is_true("Admitted")

    @property
    def finished(self) -> bool:
        return self.is_true("Finished")


def _quantity(raw: Any) -> Fraction | None:
    return try_parse(raw) if raw is not None else None


def _groups(raw: Any) -> tuple[ResourceGroup, ...]:
    groups = []
    for g in as_list(raw):
        g = as_mapping(g)
        covered = tuple(str(r) for r in as_list(g.get("coveredResources")) if isinstance(r, str))
        flavors = []
        for f in as_list(g.get("flavors")):
            f = as_mapping(f)
            name = f.get("name")
            if not isinstance(name, str):
                continue
            resources = {}
            for r in as_list(f.get("resources")):
                r = as_mapping(r)
                rname = r.get("name")
                nominal = _quantity(r.get("nominalQuota"))
                if isinstance(rname, str):
                    resources[rname] = ResourceQuotaSpec(
                        nominal if nominal is not None else Fraction(0),
                        _quantity(r.get("borrowingLimit")),
                        _quantity(r.get("lendingLimit")),
                    )
            flavors.append(FlavorQuotas(name, resources))
        if covered:
            groups.append(ResourceGroup(covered, tuple(flavors)))
    return tuple(groups)


def _name(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = as_mapping(obj.get("metadata"))
    name, namespace = meta.get("name"), meta.get("namespace")
    return (namespace if isinstance(namespace, str) else ""), (name if isinstance(name, str) else "")


def _usage(status: Mapping[str, Any]) -> dict[tuple[str, str], Usage]:
    source = status.get("flavorsReservation") or status.get("flavorsUsage")
    out: dict[tuple[str, str], Usage] = {}
    for f in as_list(source):
        f = as_mapping(f)
        flavor = f.get("name")
        for r in as_list(f.get("resources")):
            r = as_mapping(r)
            total = _quantity(r.get("total"))
            if isinstance(flavor, str) and isinstance(r.get("name"), str) and total is not None:
                out[(flavor, r["name"])] = Usage(total, _quantity(r.get("borrowed")) or Fraction(0))
    return out


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def cluster_queue_from_object(obj: Mapping[str, Any]) -> ClusterQueue | None:
    _, name = _name(obj)
    if not name:
        return None
    spec = as_mapping(obj.get("spec"))
    status = as_mapping(obj.get("status"))
    cohort = spec.get("cohortName") or spec.get("cohort") or ""
    selector = spec.get("namespaceSelector")
    return ClusterQueue(
        name=name,
        cohort=cohort if isinstance(cohort, str) else "",
        resource_groups=_groups(spec.get("resourceGroups")),
        namespace_selector=selector if isinstance(selector, Mapping) else None,
        stop_policy=str(spec.get("stopPolicy") or "None"),
        usage=_usage(status),
        pending=_int(status.get("pendingWorkloads")),
        admitted=_int(status.get("admittedWorkloads")),
    )


def cohort_from_object(obj: Mapping[str, Any]) -> Cohort | None:
    _, name = _name(obj)
    if not name:
        return None
    spec = as_mapping(obj.get("spec"))
    parent = spec.get("parentName") or spec.get("parent") or ""
    return Cohort(name, parent if isinstance(parent, str) else "", _groups(spec.get("resourceGroups")))


def local_queue_from_object(obj: Mapping[str, Any]) -> LocalQueue | None:
    namespace, name = _name(obj)
    if not name or not namespace:
        return None
    spec = as_mapping(obj.get("spec"))
    cq = spec.get("clusterQueue")
    return LocalQueue(namespace, name, cq if isinstance(cq, str) else "", str(spec.get("stopPolicy") or "None"))


def resource_flavor_from_object(obj: Mapping[str, Any]) -> ResourceFlavor | None:
    _, name = _name(obj)
    if not name:
        return None
    spec = as_mapping(obj.get("spec"))
    tolerations = tuple(t for t in as_list(spec.get("tolerations")) if isinstance(t, Mapping))
    return ResourceFlavor(name, str_map(spec.get("nodeLabels")), parse_taints(spec.get("nodeTaints")), tolerations)


def _conditions(raw: Any) -> tuple[Condition, ...]:
    out = []
    for c in as_list(raw):
        c = as_mapping(c)
        if isinstance(c.get("type"), str):
            out.append(Condition(c["type"], str(c.get("status") or ""), str(c.get("reason") or ""),
                                 str(c.get("message") or "")))
    return tuple(out)


def workload_from_object(obj: Mapping[str, Any]) -> Workload | None:
    namespace, name = _name(obj)
    if not name or not namespace:
        return None
    spec = as_mapping(obj.get("spec"))
    status = as_mapping(obj.get("status"))
    pod_sets = []
    for ps in as_list(spec.get("podSets")):
        ps = as_mapping(ps)
        ps_name = ps.get("name")
        template = ps.get("template")
        minimum = ps.get("minCount")
        pod_sets.append(WorkloadPodSet(
            ps_name if isinstance(ps_name, str) else "main",
            max(0, _int(ps.get("count"), 1)),
            template if isinstance(template, Mapping) else {},
            minimum if isinstance(minimum, int) and not isinstance(minimum, bool) else None,
        ))
    admission = as_mapping(status.get("admission"))
    flavors: dict[str, Mapping[str, str]] = {}
    for psa in as_list(admission.get("podSetAssignments")):
        psa = as_mapping(psa)
        if isinstance(psa.get("name"), str):
            flavors[psa["name"]] = str_map(psa.get("flavors"))
    meta = as_mapping(obj.get("metadata"))
    refs = [r for r in as_list(meta.get("ownerReferences")) if isinstance(r, Mapping)]
    owner = next((r for r in refs if r.get("controller") is True), refs[0] if refs else {})
    queue = spec.get("queueName")
    cq = admission.get("clusterQueue")
    return Workload(
        namespace=namespace,
        name=name,
        queue_name=queue if isinstance(queue, str) else "",
        pod_sets=tuple(pod_sets),
        conditions=_conditions(status.get("conditions")),
        cluster_queue=cq if isinstance(cq, str) else "",
        flavors=flavors,
        owner_kind=str(owner.get("kind") or ""),
        owner_name=str(owner.get("name") or ""),
        active=spec.get("active") is not False,
    )


def is_kueue(obj: Mapping[str, Any]) -> bool:
    api_version = obj.get("apiVersion")
    return (isinstance(api_version, str) and api_version.rpartition("/")[0] == GROUP
            and obj.get("kind") in KINDS)


# --- the facts ---------------------------------------------------------------------------------

FlavorResource = tuple[str, str]


@dataclass(frozen=True)
class QueueFacts:
    """The Kueue objects of a cluster; present (not None on ClusterFacts) when Kueue is served."""

    local_queues: Mapping[tuple[str, str], LocalQueue] = field(default_factory=dict)
    cluster_queues: Mapping[str, ClusterQueue] = field(default_factory=dict)
    flavors: Mapping[str, ResourceFlavor] = field(default_factory=dict)
    cohorts: Mapping[str, Cohort] = field(default_factory=dict)
    workloads: Mapping[tuple[str, str], Workload] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_potential", {})
        object.__setattr__(self, "_subtree", {})

    @classmethod
    def of(
        cls,
        local_queues: Iterable[LocalQueue] = (),
        cluster_queues: Iterable[ClusterQueue] = (),
        flavors: Iterable[ResourceFlavor] = (),
        cohorts: Iterable[Cohort] = (),
        workloads: Iterable[Workload] = (),
    ) -> QueueFacts:
        return cls(
            {(q.namespace, q.name): q for q in local_queues},
            {q.name: q for q in cluster_queues},
            {f.name: f for f in flavors},
            {c.name: c for c in cohorts},
            {(w.namespace, w.name): w for w in workloads},
        )

    def local_queue(self, namespace: str, name: str) -> LocalQueue | None:
        return self.local_queues.get((namespace, name))

    # --- the cohort tree ---
    def _parent(self, node: tuple[str, str]) -> tuple[str, str] | None:
        kind, name = node
        if kind == "cq":
            cq = self.cluster_queues.get(name)
            return ("cohort", cq.cohort) if cq is not None and cq.cohort else None
        cohort = self.cohorts.get(name)
        return ("cohort", cohort.parent) if cohort is not None and cohort.parent else None

    def _quotas(self, node: tuple[str, str]) -> Mapping[FlavorResource, ResourceQuotaSpec]:
        kind, name = node
        groups: tuple[ResourceGroup, ...] = ()
        if kind == "cq":
            cq = self.cluster_queues.get(name)
            groups = cq.resource_groups if cq is not None else ()
        else:
            cohort = self.cohorts.get(name)
            groups = cohort.resource_groups if cohort is not None else ()
        return {(f.name, r): q for g in groups for f in g.flavors for r, q in f.resources.items()}

    def _children(self, cohort: str) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = [("cq", q.name) for q in self.cluster_queues.values() if q.cohort == cohort]
        found += [("cohort", c.name) for c in self.cohorts.values() if c.parent == cohort]
        return found

    def _subtree_quota(self, node: tuple[str, str], fr: FlavorResource, seen: frozenset[tuple[str, str]]) -> Fraction:
        memo: dict[Any, Fraction] = self._subtree  # type: ignore[attr-defined]
        key = (node, fr)
        if key in memo:
            return memo[key]
        own = self._quotas(node).get(fr)
        total = own.nominal if own is not None else Fraction(0)
        if node[0] == "cohort" and node not in seen:
            for child in self._children(node[1]):
                if child in seen:
                    continue
                sub = self._subtree_quota(child, fr, seen | {node})
                total += sub - self._local_quota(child, fr, sub)
        memo[key] = total
        return total

    def _local_quota(self, node: tuple[str, str], fr: FlavorResource, subtree: Fraction) -> Fraction:
        own = self._quotas(node).get(fr)
        if own is not None and own.lending_limit is not None:
            return max(Fraction(0), subtree - own.lending_limit)
        return Fraction(0)

    def potential(self, cluster_queue: str, flavor: str, resource: str) -> Fraction:
        """Kueue's ``potentialAvailable``: the most of (flavor, resource) the ClusterQueue can ever use."""
        memo: dict[Any, Fraction] = self._potential  # type: ignore[attr-defined]
        key = (cluster_queue, flavor, resource)
        if key not in memo:
            memo[key] = self._potential_of(("cq", cluster_queue), (flavor, resource), frozenset())
        return memo[key]

    def _potential_of(self, node: tuple[str, str], fr: FlavorResource, seen: frozenset[tuple[str, str]]) -> Fraction:
        subtree = self._subtree_quota(node, fr, frozenset())
        parent = self._parent(node)
        if parent is None or parent in seen or node in seen:  # a root (or a cycle, which Kueue refuses)
            return subtree
        available = self._local_quota(node, fr, subtree) + self._potential_of(parent, fr, seen | {node})
        own = self._quotas(node).get(fr)
        if own is not None and own.borrowing_limit is not None:
            available = min(available, subtree + own.borrowing_limit)
        return available

    def in_cycle(self, cluster_queue: str) -> bool:
        """Whether the ClusterQueue's cohort chain loops (Kueue refuses such trees: ErrCohortHasCycle)."""
        node: tuple[str, str] | None = ("cq", cluster_queue)
        seen: set[tuple[str, str]] = set()
        while node is not None:
            if node in seen:
                return True
            seen.add(node)
            node = self._parent(node)
        return False

    def cohort_members(self, cluster_queue: str) -> list[str]:
        """The other ClusterQueues of the cohort tree ``cluster_queue`` belongs to."""
        cq = self.cluster_queues.get(cluster_queue)
        if cq is None or not cq.cohort:
            return []
        root = ("cohort", cq.cohort)
        seen = {root}
        while (parent := self._parent(root)) is not None and parent not in seen:
            root = parent
            seen.add(root)
        members: list[str] = []
        stack = [root[1]]
        visited: set[str] = set()
        while stack:
            cohort = stack.pop()
            if cohort in visited:
                continue
            visited.add(cohort)
            for kind, name in self._children(cohort):
                if kind == "cq":
                    if name != cluster_queue:
                        members.append(name)
                else:
                    stack.append(name)
        return sorted(members)


def queue_facts_from_objects(objects: Iterable[Mapping[str, Any]]) -> QueueFacts | None:
    """QueueFacts of the Kueue objects among ``objects``; None when there is none (Kueue unknown)."""
    lqs, cqs, rfs, cohorts, wls = [], [], [], [], []
    found = False
    for obj in objects:
        if not is_kueue(obj):
            continue
        found = True
        kind = obj.get("kind")
        if kind == "LocalQueue" and (lq := local_queue_from_object(obj)) is not None:
            lqs.append(lq)
        elif kind == "ClusterQueue" and (cq := cluster_queue_from_object(obj)) is not None:
            cqs.append(cq)
        elif kind == "ResourceFlavor" and (rf := resource_flavor_from_object(obj)) is not None:
            rfs.append(rf)
        elif kind == "Cohort" and (co := cohort_from_object(obj)) is not None:
            cohorts.append(co)
        elif kind == "Workload" and (wl := workload_from_object(obj)) is not None:
            wls.append(wl)
    return QueueFacts.of(lqs, cqs, rfs, cohorts, wls) if found else None


# --- namespaceSelector -------------------------------------------------------------------------


def namespace_selected(selector: Mapping[str, Any] | None, namespace: str) -> bool | None:
    """Whether a ClusterQueue's namespaceSelector admits ``namespace``: None when it reads labels
    other than ``kubernetes.io/metadata.name`` (the one label every namespace is known to carry)."""
    if selector is None:
        return False  # a nothing selector
    labels = {NAMESPACE_NAME_LABEL: namespace}
    match_labels = as_mapping(selector.get("matchLabels"))
    exprs = [as_mapping(e) for e in as_list(selector.get("matchExpressions"))]
    keys = set(match_labels) | {e.get("key") for e in exprs}
    if keys - {NAMESPACE_NAME_LABEL}:
        return None
    for k, v in match_labels.items():
        if labels.get(k) != v:
            return False
    for e in exprs:
        value = labels.get(str(e.get("key")))
        values = [str(v) for v in as_list(e.get("values"))]
        op = e.get("operator")
        if op == "In" and value not in values:
            return False
        if op == "NotIn" and value in values:
            return False
        if op == "DoesNotExist" and value is not None:
            return False
        if op == "Exists" and value is None:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return None
    return True

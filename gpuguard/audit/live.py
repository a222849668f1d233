"""Audit a live cluster: every kind gpuguard reads that the cluster serves, listed read-only.

The kinds are ``policies.podspec.WORKLOADS`` plus the config's ``podTemplatePaths`` and DRA's
ResourceClaims and ResourceClaimTemplates (``policies.dra.objects.CLAIM_RESOURCES``); discovery
(``gpuguard.kube.discovery``) says which of them exist — CRDs only where they are installed — and
in which version.  Owners are listed before what they create and pods last, so an object whose
owner was audited already is counted through it without being judged.  Pods are listed without the terminal ones
(``status.phase!=Succeeded,status.phase!=Failed``, a field selector the pods API supports).

RBAC: ``list`` on each of those resources (cluster-wide), and on nodes, RuntimeClasses, Karpenter
NodePools and DRA's DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates for the
facts (the DRA objects are all or none: devices without the claims that hold them would misstate
what is free), and for the whole-job rules on ResourceQuotas and, where Kueue is served, its
LocalQueues, ClusterQueues, ResourceFlavors and Cohorts (all or none too: a LocalQueue not listed
would look missing); nothing is written (the webhook's periodic audit adds the
report verbs, see deploy/audit).  A kind the cluster serves but refuses to list is an input error
naming the RBAC it needs: the audit is incomplete and says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from gpuguard.audit.auditor import Auditor
from gpuguard.audit.model import LIVE, AuditResult
from gpuguard.kube.discovery import (
    PAGE_SIZE,
    ApiError,
    Discovery,
    RestClient,
    ServedResource,
    list_pages,
)
from gpuguard.kube.prune import decode_item
from gpuguard.kube.status import HTTP_FORBIDDEN
from gpuguard.sources.yamlsafe import InputError
from policies.config import Config
from policies.dra.objects import CLAIM_RESOURCES, SERVED_VERSIONS
from policies.dra.objects import GROUP as DRA_GROUP
from policies.facts import ClusterFacts
from policies.facts_build import facts_from_objects
from policies.podspec import Workload
from policies.queue_facts import COHORT_VERSIONS
from policies.queue_facts import GROUP as KUEUE_GROUP
from policies.queue_facts import VERSIONS as KUEUE_VERSIONS

NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"
# Kinds other controllers usually create (a Deployment's ReplicaSets, a CronJob's or JobSet's Jobs,
# a LeaderWorkerSet's StatefulSets, a RayJob's RayCluster, a Knative Service's Configuration and
# Revisions) are listed after the rest and pods last: an owner listed first spares its children
# from being judged (and, in a bounded audit, from crowding out other findings).
CHILD_KINDS = frozenset({("apps", "ReplicaSet"), ("batch", "Job"), ("apps", "StatefulSet"), ("ray.io", "RayCluster"),
                         ("serving.knative.dev", "Configuration"), ("serving.knative.dev", "Revision")})
_WHOLE = msgspec.json.Decoder()
PodSink = Callable[[bytes | msgspec.Raw], None]


def _rbac_hint(resource: ServedResource) -> str:
    return f"; grant `list` on {resource.resource} in API group {resource.group or 'core'!r} (all namespaces)"


def error_for(resource: ServedResource | str, exc: ApiError) -> InputError:
    path = resource.path if isinstance(resource, ServedResource) else resource
    hint = _rbac_hint(resource) if isinstance(resource, ServedResource) and exc.status == HTTP_FORBIDDEN else ""
    return InputError(path, 0, f"cannot list: {exc.message}{hint}")


def workload_resources(discovery: Discovery, config: Config) -> list[tuple[Workload, ServedResource]]:
    """The served resources of every kind gpuguard reads: owners first, kinds they create next, pods last."""
    found: list[tuple[Workload, ServedResource]] = []
    for workload in config.workload_index.values():
        served = discovery.find(workload.group, workload.resource, workload.versions)
        if served is None or served.kind != workload.kind:
            # a config podTemplatePaths entry may guess the plural wrong: look the kind up
            served = _by_kind(discovery, workload)
        if served is not None:
            found.append((workload, served))
    def tier(resource: ServedResource) -> int:
        if resource.kind == "Pod" and resource.group == "":
            return 2
        return 1 if (resource.group, resource.kind) in CHILD_KINDS else 0

    found.sort(key=lambda pair: tier(pair[1]))
    return found


def claim_resources(discovery: Discovery) -> list[ServedResource]:
    """ResourceClaims and ResourceClaimTemplates, judged like pod templates, where DRA is served."""
    found = (discovery.find(DRA_GROUP, plural, SERVED_VERSIONS) for _, plural in CLAIM_RESOURCES)
    return [r for r in found if r is not None]


def _by_kind(discovery: Discovery, workload: Workload) -> ServedResource | None:
    if workload.group not in discovery.groups():
        return None
    for version in workload.versions:
        for resource in discovery.resources(workload.group, version).values():
            if resource.kind == workload.kind:
                return resource
    return None


def _objects(client: RestClient, resource: ServedResource, field_selector: str | None = None,
             page_size: int = PAGE_SIZE) -> Any:
    """(raw, object) for every item; list items carry no kind or apiVersion, so they get them here."""
    for page in list_pages(client, resource.path, field_selector=field_selector, page_size=page_size):
        for raw in page:
            obj = _WHOLE.decode(raw)
            if isinstance(obj, dict):
                obj.setdefault("kind", resource.kind)
                obj.setdefault("apiVersion", resource.api_version)
                yield raw, obj


def audit_workloads(client: RestClient, discovery: Discovery, auditor: Auditor, pods: PodSink | None = None,
                    page_size: int = PAGE_SIZE) -> int:
    """Feed every object of every kind gpuguard reads to ``auditor``; returns the kinds listed."""
    try:
        resources = [r for _, r in workload_resources(discovery, auditor.config)]
        claims = claim_resources(discovery)
    except ApiError as exc:
        auditor.error(error_for(exc.path, exc))
        return 0
    pod_lists = [r for r in resources if r.kind == "Pod" and r.group == ""]
    resources = [r for r in resources if r not in pod_lists] + claims + pod_lists  # pods stay last
    listed = 0
    for resource in resources:
        if "list" not in resource.verbs:
            auditor.note(f"{resource.path} does not support list: not audited")
            continue
        is_pod = resource.kind == "Pod" and resource.group == ""
        try:
            for raw, obj in _objects(client, resource, NON_TERMINAL_PODS if is_pod else None, page_size):
                if is_pod and pods is not None:
                    pods(raw)
                auditor.feed(obj, LIVE)
        except ApiError as exc:
            auditor.error(error_for(resource, exc))
            continue
        listed += 1
    return listed


@dataclass(slots=True)
class LiveFacts:
    """What the audit reads of the cluster besides workloads: nodes (pruned), RuntimeClasses, NodePools,
    the DRA objects, ResourceQuotas and Kueue's queues."""

    facts: ClusterFacts
    nodes: list[Mapping[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _optional(client: RestClient, discovery: Discovery, group: str, resource: str, versions: tuple[str, ...],
              notes: list[str], pruned: bool) -> list[Mapping[str, Any]]:
    try:
        served = discovery.find(group, resource, versions)
        if served is None:
            return []
        out: list[Mapping[str, Any]] = []
        for raw, obj in _objects(client, served):
            item = decode_item(raw, served.kind) if pruned else obj
            if isinstance(item, dict):
                out.append(item)
        return out
    except ApiError as exc:
        notes.append(f"{resource}.{group} not listed ({exc.message}); judged without them")
        return []


def list_facts(client: RestClient, discovery: Discovery, page_size: int = PAGE_SIZE) -> LiveFacts:
    """Nodes (required: ApiError when they cannot be listed), RuntimeClasses, NodePools, the DRA
    objects, ResourceQuotas, Kueue's queues and KServe's ServingRuntimes and LLMInferenceServiceConfigs
    (what cannot be listed: notes)."""
    nodes: list[Mapping[str, Any]] = []
    for page in list_pages(client, "/api/v1/nodes", page_size=page_size):
        for raw in page:
            node = decode_item(raw, "Node")
            if isinstance(node, dict):
                nodes.append(node)
    notes: list[str] = []
    classes = _optional(client, discovery, "node.k8s.io", "runtimeclasses", ("v1",), notes, pruned=True)
    pools = _optional(client, discovery, "karpenter.sh", "nodepools", ("v1",), notes, pruned=False)
    dra = _dra_objects(client, discovery, notes)
    quotas = _optional(client, discovery, "", "resourcequotas", ("v1",), notes, pruned=False)
    kueue = _kueue_objects(client, discovery, notes)
    served = [obj for plural, versions in KSERVE_FACT_RESOURCES
              for obj in _optional(client, discovery, KSERVE_GROUP, plural, versions, notes, pruned=False)]
    facts = facts_from_objects([*nodes, *classes, *pools, *dra, *quotas, *kueue, *served],
                                      source="live cluster")
    return LiveFacts(facts, nodes, notes)


KUEUE_FACT_RESOURCES = (("localqueues", KUEUE_VERSIONS), ("clusterqueues", KUEUE_VERSIONS),
                        ("resourceflavors", KUEUE_VERSIONS), ("cohorts", COHORT_VERSIONS))


def _kueue_objects(client: RestClient, discovery: Discovery, notes: list[str]) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    before = len(notes)
    for plural, versions in KUEUE_FACT_RESOURCES:
        found += _optional(client, discovery, KUEUE_GROUP, plural, versions, notes, pruned=False)
    if len(notes) > before:
        notes.append(f"the {KUEUE_GROUP} queues are judged without any of them (one list failed)")
        return []
    return found


DRA_FACT_RESOURCES = ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")
# What KServe merges under its serving objects' pods (policies.kserve), where KServe is installed.
KSERVE_GROUP = "serving.kserve.io"
KSERVE_FACT_RESOURCES = (("servingruntimes", ("v1alpha1",)), ("clusterservingruntimes", ("v1alpha1",)),
                         ("llminferenceserviceconfigs", ("v1alpha2", "v1alpha1")))


def _dra_objects(client: RestClient, discovery: Discovery, notes: list[str]) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    before = len(notes)
    for plural in DRA_FACT_RESOURCES:
        found += _optional(client, discovery, DRA_GROUP, plural, SERVED_VERSIONS, notes, pruned=False)
    if len(notes) > before:
        notes.append(f"the {DRA_GROUP} objects are judged without any of them (one list failed)")
        return []
    return found


def audit_cluster(api_client: Any, config: Config, facts: ClusterFacts, *, limit_per_namespace: int | None = None,
                  cluster: str = "live cluster") -> AuditResult:
    """Audit every workload of the cluster against ``facts`` (the webhook's periodic audit)."""
    client = RestClient(api_client)
    auditor = Auditor(config, facts, limit_per_namespace=limit_per_namespace, cluster=cluster)
    audit_workloads(client, Discovery(client), auditor)
    return auditor.finish()

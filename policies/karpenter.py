"""Karpenter ``karpenter.sh/v1`` NodePools as capacity that can appear.

A NodePool describes the nodes Karpenter launches for pending pods (sigs.k8s.io/karpenter
pkg/apis/v1/nodepool.go, nodeclaim.go):

* ``spec.template.metadata.labels`` and single-valued requirements are labels of every node it
  creates; ``spec.template.spec.requirements`` constrain the others (policies.labeldomain);
  Karpenter adds ``karpenter.sh/nodepool: <name>`` and ``<nodeClassRef group>/<kind>: <name>``
  (pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go ``NewNodeClaimTemplate``);
* ``spec.template.spec.taints`` are on every node; ``startupTaints`` are removed once the node is
  initialised, so pods need not tolerate them;
* labels Karpenter knows (``WellKnownLabels``: pkg/apis/v1/labels.go, plus each provider's own)
  take a value the chosen instance type decides; a custom label the NodePool does not define is
  never on its nodes (pkg/scheduling/requirements.go ``Compatible``);
* ``spec.limits`` caps the pool's total resources, so a limit of 0 GPUs means none, and no node
  can hold more GPUs than the limit.  The limits are kept whole (``PoolTraits.limits``): a limit
  is compared with the total of every node the pool has created (pkg/apis/v1/nodepool.go
  ``Limits.ExceededBy``; ``limits.nodes`` counts nodes), so they bound how many pods of a gang
  the pool can ever hold (policies.gangfit).  A static NodePool (``spec.replicas``, alpha) keeps
  that many nodes.

GPU kind and count come from the provider's instance labels, which Karpenter requires like any
other label (``GPU_LABELS`` below, each row with its source).  A NodePool whose requirements leave
them open may launch a GPU instance of a shape nobody can know offline: it "may offer" the
provider's GPU resources.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from policies.aws_instances import aws_instance_table
from policies.facts import NodeFacts, PoolTraits, parse_taints, str_map
from policies.labeldomain import LabelDomain, domains_from_requirements
from policies.quantity import try_parse
from policies.shapes import as_list, as_mapping

NODEPOOL_GROUP = "karpenter.sh"
NODEPOOL_API_VERSION = "karpenter.sh/v1"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ARCH_LABEL = "kubernetes.io/arch"
ORIGIN = "Karpenter NodePool"

# sigs.k8s.io/karpenter pkg/apis/v1/labels.go WellKnownLabels, and the beta aliases Karpenter
# normalises pods' requirements from (NormalizedLabels).
CORE_WELL_KNOWN = frozenset(
    {
        NODEPOOL_LABEL,
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "karpenter.sh/capacity-type",
        "node.kubernetes.io/windows-build",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
    }
)


@dataclass(frozen=True, slots=True)
class GpuLabels:
    """One provider's GPU instance labels and the extended resources its instance types offer."""

    provider: str
    node_class_group: str
    count: str
    manufacturer: str | None  # None: the provider never sets it
    by_manufacturer: Mapping[str, str]  # label value -> resource name
    resources: frozenset[str]  # GPU resources its instance types can offer
    open_prefixes: tuple[str, ...]  # label domains whose keys the provider registers as well-known
    open_keys: frozenset[str] = frozenset()
    instance_table: bool = False  # the AWS instance-type table (policies/data) applies, under open_prefixes[0]


_NVIDIA_AMD = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}

GPU_LABELS: tuple[GpuLabels, ...] = (
    # aws/karpenter-provider-aws pkg/apis/v1/labels.go (LabelInstanceGPU*, WellKnownLabels),
    # pkg/providers/instancetype/types.go: the labels exist only on GPU instance types (else
    # DoesNotExist), manufacturer is lowerKabobCase("NVIDIA"|"AMD"), capacity nvidia.com/gpu and
    # amd.com/gpu (nvidiaGPUs/amdGPUs).
    GpuLabels(
        "AWS", "karpenter.k8s.aws", "karpenter.k8s.aws/instance-gpu-count",
        "karpenter.k8s.aws/instance-gpu-manufacturer", _NVIDIA_AMD, frozenset(_NVIDIA_AMD.values()),
        ("karpenter.k8s.aws/",), frozenset({"topology.k8s.aws/zone-id"}), instance_table=True,
    ),
    # EKS Auto Mode, the managed Karpenter: the same instance labels under eks.amazonaws.com
    # (awsdocs/amazon-eks-user-guide latest/ug/automode/create-node-pool.adoc, "supported labels").
    GpuLabels(
        "EKS Auto Mode", "eks.amazonaws.com", "eks.amazonaws.com/instance-gpu-count",
        "eks.amazonaws.com/instance-gpu-manufacturer", _NVIDIA_AMD, frozenset(_NVIDIA_AMD.values()),
        ("eks.amazonaws.com/",), frozenset({"topology.k8s.aws/zone-id"}), instance_table=True,
    ),
    # Azure/karpenter-provider-azure pkg/apis/v1beta1/labels.go (LabelSKUGPU*, ManufacturerNvidia
    # "nvidia", ManufacturerAMD "amd"), pkg/providers/instancetype/instancetype.go: sku-gpu-count
    # is "0" on SKUs without GPUs; capacity nvidia.com/gpu and amd.com/gpu (computeCapacity).
    GpuLabels(
        "Azure", "karpenter.azure.com", "karpenter.azure.com/sku-gpu-count",
        "karpenter.azure.com/sku-gpu-manufacturer", _NVIDIA_AMD, frozenset(_NVIDIA_AMD.values()),
        ("karpenter.azure.com/", "kubernetes.azure.com/"),
    ),
    # cloudpilot-ai/karpenter-provider-gcp pkg/apis/v1alpha1/labels.go, pkg/providers/instancetype/
    # types.go: instance-gpu-count on machine types with accelerators (else DoesNotExist), the
    # manufacturer label is never set, capacity is nvidia.com/gpu only.
    GpuLabels(
        "GCP", "karpenter.k8s.gcp", "karpenter.k8s.gcp/instance-gpu-count", None, {},
        frozenset({"nvidia.com/gpu"}), ("karpenter.k8s.gcp/",),
        frozenset({"topology.k8s.gcp/zone-id", "cloud.google.com/gke-accelerator"}),
    ),
)


def is_nodepool(obj: Mapping[str, Any]) -> bool:
    api_version = obj.get("apiVersion")
    return (
        obj.get("kind") == "NodePool"
        and isinstance(api_version, str)
        and api_version.rpartition("/")[0] == NODEPOOL_GROUP
    )


def _provider(node_class_group: str, keys: set[str]) -> GpuLabels | None:
    for labels in GPU_LABELS:
        if labels.node_class_group == node_class_group:
            return labels
    for labels in GPU_LABELS:  # no (or an unknown) nodeClassRef: go by the labels it uses
        if any(k.startswith(labels.open_prefixes) for k in keys):
            return labels
    return None


@dataclass(frozen=True, slots=True)
class GpuShape:
    allocatable: dict[str, Fraction]  # resources with a known largest count per node
    may_offer: frozenset[str]  # resources in a count nobody knows
    note: str
    # Instance labels narrowed to the values of the GPU instance types the pool admits: a GPU pod
    # lands on one of those, so a selector for another family matches none of its GPU nodes.
    domains: dict[str, LabelDomain] = dataclasses.field(default_factory=dict)


def _known_counts(domain: LabelDomain) -> list[int] | None:
    values = domain.possible_values()
    if values is None:
        return None
    return [int(v) for v in values if v.isdigit() and int(v) > 0]


def _table_shape(domain_of: Callable[[str], LabelDomain], prefix: str) -> GpuShape | None:
    """The GPUs of the AWS instance types the requirements admit, when they admit only known ones.

    None when the requirements leave room for instance types the table does not list (no
    restriction on family, category or instance type, or a value the table does not know).
    """
    table = aws_instance_table()
    families = domain_of(prefix + "instance-family").possible_values()
    categories = domain_of(prefix + "instance-category").possible_values()
    names = domain_of(INSTANCE_TYPE_LABEL).possible_values()
    closed = (
        (families is not None and families <= table.families)
        or (categories is not None and categories <= table.categories)
        or (names is not None and names <= table.instance_types)
    )
    if not closed:
        return None
    allocatable: dict[str, Fraction] = {}
    values: dict[str, set[str]] = {}
    for row in table.gpu_instance_types:
        labels = {prefix + k: v for k, v in row.labels.items() if k != "arch"}
        labels[INSTANCE_TYPE_LABEL] = row.instance_type
        labels[ARCH_LABEL] = row.labels["arch"]
        if all(domain_of(k).narrow("In", [v]) is not None for k, v in labels.items()):
            for resource, count in row.resources.items():
                allocatable[resource] = max(allocatable.get(resource, Fraction(0)), count)
            for k, v in labels.items():
                values.setdefault(k, set()).add(v)
    domains = {}
    for key, seen in values.items():
        narrowed = domain_of(key).narrow("In", sorted(seen))
        if narrowed is not None:
            domains[key] = narrowed
    return GpuShape(allocatable, frozenset(), "", domains)


def gpu_shape(domain_of: Callable[[str], LabelDomain], provider: GpuLabels | None) -> GpuShape:
    """The GPUs the pool's nodes may have: from the instance types it admits when they are all
    known, else from the provider's GPU count and manufacturer labels."""
    if provider is not None and provider.instance_table:
        known = _table_shape(domain_of, provider.open_prefixes[0])
        if known is not None:
            return known
    if provider is None:
        every = frozenset(r for p in GPU_LABELS for r in p.resources)
        return GpuShape({}, every, "its cloud provider is unknown, so its instance shapes are")
    resources = provider.resources
    if provider.manufacturer is not None:
        makers = domain_of(provider.manufacturer).possible_values()
        if makers is not None:
            resources = frozenset(provider.by_manufacturer[m] for m in makers if m in provider.by_manufacturer)
    counts = _known_counts(domain_of(provider.count))
    if not resources or counts == []:
        return GpuShape({}, frozenset(), "")
    if counts is None:
        return GpuShape({}, resources, f"its requirements leave {provider.count} open")
    largest = Fraction(max(counts))
    return GpuShape({r: largest for r in resources}, frozenset(), "")


def nodepool_from_object(obj: Mapping[str, Any]) -> NodeFacts | None:
    """The NodePool as a pool node, or None when it cannot create any node (contradictory requirements)."""
    meta = as_mapping(obj.get("metadata"))
    name = meta.get("name")
    if not isinstance(name, str):
        return None
    spec = as_mapping(obj.get("spec"))
    template = as_mapping(spec.get("template"))
    node_spec = as_mapping(template.get("spec"))
    labels = str_map(as_mapping(template.get("metadata")).get("labels"))
    requirements = [r for r in as_list(node_spec.get("requirements")) if isinstance(r, Mapping)]
    # Template labels are requirements too (NewLabelRequirements): a requirement must admit them.
    label_requirements = [{"key": k, "operator": "In", "values": [v]} for k, v in labels.items()]
    domains = domains_from_requirements([*requirements, *label_requirements])
    if any(d is None for d in domains.values()):
        return None
    ref = as_mapping(node_spec.get("nodeClassRef"))
    group, kind, class_name = ref.get("group"), ref.get("kind"), ref.get("name")
    fixed = dict(labels)
    fixed[NODEPOOL_LABEL] = name
    if isinstance(group, str) and isinstance(kind, str) and isinstance(class_name, str):
        fixed[f"{group}/{kind.lower()}"] = class_name
    open_domains: dict[str, LabelDomain] = {}
    for key, domain in domains.items():
        assert domain is not None
        values = domain.possible_values()
        if values is not None and len(values) == 1 and not domain.may_be_absent:
            fixed[key] = next(iter(values))
        elif key not in fixed:
            open_domains[key] = domain
    provider = _provider(group if isinstance(group, str) else "", set(domains))
    open_keys = CORE_WELL_KNOWN | (provider.open_keys if provider else frozenset())
    open_prefixes = provider.open_prefixes if provider else tuple(p for g in GPU_LABELS for p in g.open_prefixes)
    traits = PoolTraits(
        origin=ORIGIN,
        domains=tuple(sorted(open_domains.items())),
        open_keys=open_keys,
        open_prefixes=open_prefixes,
        startup_taints=parse_taints(node_spec.get("startupTaints")),
        limits=_limit_items(as_mapping(spec.get("limits"))),
        max_nodes=_replicas(spec.get("replicas")),
    )

    def domain_of(key: str) -> LabelDomain:
        return LabelDomain.exactly(fixed[key]) if key in fixed else traits.domain(key)

    shape = gpu_shape(domain_of, provider)
    allocatable, may_offer = _apply_limits(shape, as_mapping(spec.get("limits")))
    if shape.domains and allocatable:
        for key, domain in shape.domains.items():
            open_domains[key] = domain
        traits = dataclasses.replace(traits, domains=tuple(sorted(open_domains.items())))
    if shape.note and may_offer:
        traits = dataclasses.replace(traits, shape_note=shape.note)
    return NodeFacts(
        name=name,
        labels=fixed,
        taints=parse_taints(node_spec.get("taints")),
        allocatable=allocatable,
        may_offer=may_offer,
        pool=traits,
    )


def _limit_items(limits: Mapping[str, Any]) -> tuple[tuple[str, Fraction], ...]:
    items = []
    for resource, raw in limits.items():
        limit = try_parse(raw)
        if isinstance(resource, str) and limit is not None:
            items.append((resource, max(limit, Fraction(0))))
    return tuple(sorted(items))


def _replicas(raw: Any) -> int | None:
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else None


def _apply_limits(shape: GpuShape, limits: Mapping[str, Any]) -> tuple[dict[str, Fraction], frozenset[str]]:
    """``spec.limits`` bounds the pool's total: no node holds more than the limit, 0 means none."""
    allocatable = dict(shape.allocatable)
    may_offer = set(shape.may_offer)
    for resource, raw in limits.items():
        limit = try_parse(raw)
        if limit is None:
            continue
        if limit <= 0:
            allocatable.pop(resource, None)
            may_offer.discard(resource)
        elif resource in allocatable and allocatable[resource] > limit:
            allocatable[resource] = limit
    return allocatable, frozenset(may_offer)

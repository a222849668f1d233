"""gpu-resource-unknown: no node advertises the requested GPU resource.

The scheduler can place a pod only on a node whose ``status.allocatable`` lists every extended
resource it asks for, so a misspelt name (``nvidia.com/gpus``), a MIG profile no GPU is cut into,
or the wrong name for the node's device-plugin setup leaves the pod Pending forever
("Insufficient nvidia.com/gpus").  Resource names per device-plugin setup
(NVIDIA/k8s-device-plugin README, api/config/v1): whole GPUs and the MIG ``single`` strategy
advertise ``nvidia.com/gpu``; the MIG ``mixed`` strategy advertises one
``nvidia.com/mig-<slices>g.<memory>gb`` per profile; time-slicing or MPS with
``renameByDefault: true`` advertises ``nvidia.com/gpu.shared``.

Two cases are reported:

* no node of the cluster advertises the resource at all;
* the nodes the pod's nodeSelector / required node affinity / RuntimeClass picks are GPU nodes
  that advertise other GPU resources (e.g. the pod selects an A100 product label and asks for
  ``nvidia.com/gpu`` while those nodes run the MIG mixed strategy).

Suggestions are the closest advertised GPU resource names (difflib).  When this rule fires
for a resource, the capacity, selector, taint and unschedulable rules stay quiet about it.

Failing (the cluster advertises ``nvidia.com/gpu``)::

    resources:
      limits: {nvidia.com/gpus: 1}

Passing::

    resources:
      limits: {nvidia.com/gpu: 1}
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from policies.applicability import Applies
from policies.rule import NeedsFacts, Option, RuleContext
from policies.rulekit import with_diagnosis
from policies.scheduling import Diagnosis, GroupVerdict, UnknownResource, request_sites
from policies.types import Severity, Violation
from policies.wording import did_you_mean, suggest

ID = "gpu-resource-unknown"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = False  # judged on resource names/counts alone, so TrainJob/NIMService too
APPLIES: Applies = None
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "No node advertises the requested GPU resource (typo, absent MIG profile, MIG strategy or .shared mismatch)."
REMEDIATION = (
    "Request a resource name the target nodes advertise (see the suggestions), "
    "or fix the device plugin / MIG configuration on the nodes."
)
OPTIONS: tuple[Option, ...] = ()

SHARED_SUFFIX = ".shared"
MIG_PREFIX = "nvidia.com/mig-"
# NICs that NVIDIA's Network Operator advertises under the nvidia.com/ prefix: its SR-IOV device plugin's
# documented host-device resource (Mellanox/network-operator@b06827e
# example/crs/mellanox.com_v1alpha1_nicclusterpolicy_cr-full-ocp.yaml: sriovDevicePlugin resourceList
# ``"resourcePrefix": "nvidia.com", "resourceName": "hostdev"``; HostDeviceNetwork samples use
# ``resourceName: hostdev``).  Not a GPU name misspelt: no GPU resource is suggested for it.
NETWORK_RESOURCES = frozenset({"nvidia.com/hostdev"})


def _closest(name: str, candidates: Iterable[str]) -> list[str]:
    """The advertised names nearest to ``name``: those about as close as the best match."""
    vendor = name.partition("/")[0]
    pool = sorted(c for c in set(candidates) if c.partition("/")[0] == vendor)  # never suggest another vendor
    close = suggest(name, pool, limit=3, spread=0.05)
    if close:
        return close
    return pool if len(pool) <= 4 else []


def _hint(name: str, available: frozenset[str]) -> str:
    """Why a near-miss happens, for the device-plugin naming schemes."""
    if name + SHARED_SUFFIX in available:
        return "; shared GPUs (time-slicing/MPS with renameByDefault) are advertised with the .shared suffix"
    if name.endswith(SHARED_SUFFIX) and name[: -len(SHARED_SUFFIX)] in available:
        return "; GPU sharing here does not rename the resource, so it has no .shared suffix"
    has_mig = any(n.startswith(MIG_PREFIX) for n in available)
    if name.startswith(MIG_PREFIX):
        return "" if has_mig else "; no node exposes MIG devices under the mixed strategy"
    if name == "nvidia.com/gpu" and has_mig:
        return "; MIG GPUs under the mixed strategy are advertised as one resource per MIG profile"
    return ""


def _gpu_names(verdicts: Iterable[GroupVerdict], ctx: RuleContext) -> frozenset[str]:
    return frozenset(
        n
        for v in verdicts
        for n, q in v.group.representative.allocatable.items()
        if q > 0 and ctx.is_gpu(n)
    )


def _describe(verdicts: Iterable[GroupVerdict]) -> str:
    return "; ".join(v.describe() for v in verdicts)


def _message(container: str, unknown: UnknownResource, diagnosis: Diagnosis, ctx: RuleContext) -> str:
    name = unknown.name
    if name in NETWORK_RESOURCES:
        where = "no node in the cluster advertises" if not unknown.selected else (
            f"the nodes its nodeSelector/affinity selects ({_describe(unknown.selected)}) do not advertise")
        return (f"container {container!r} requests {name}, the NVIDIA Network Operator's host-device NIC "
                f"(SR-IOV/RDMA) resource, which {where}: the pod stays Pending until the Network Operator "
                "serves it on the GPU nodes (or drop the request where the nodes have no such NIC)")
    if not unknown.selected:
        available = frozenset(n for n in ctx.facts.resource_names() if ctx.is_gpu(n))
        text = f"container {container!r} requests {name}, which no node in the cluster advertises"
    else:
        available = _gpu_names(unknown.selected, ctx)
        text = (
            f"container {container!r} requests {name}, but the nodes its nodeSelector/affinity selects "
            f"({_describe(unknown.selected)}) advertise {', '.join(sorted(available))} instead"
        )
    text += _hint(name, available)
    suggestions = _closest(name, available)
    if unknown.selected:
        offering = [v for v in diagnosis.verdicts if v.group.representative.allocatable.get(name, 0) > 0]
        ask = f"request {' or '.join(suggestions)}, or " if suggestions else ""
        return text + f": {ask}select nodes that offer {name} ({_describe(offering)})"
    if suggestions:
        return text + f": {did_you_mean(suggestions)}"
    if not available:
        return text + ": no node advertises any GPU resource"
    listed = sorted(available)
    more = f" and {len(listed) - 6} more" if len(listed) > 6 else ""
    return text + f"; the cluster's GPU resources are {', '.join(listed[:6])}{more}"


@with_diagnosis
def check(ctx: RuleContext, diagnosis: Diagnosis) -> Iterator[Violation]:
    for name, unknown in diagnosis.unknown.items():
        for container, path, _ in request_sites(ctx.pod, name):
            yield Violation(message=_message(container.name, unknown, diagnosis, ctx), path=path)

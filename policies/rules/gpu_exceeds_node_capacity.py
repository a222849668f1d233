"""gpu-exceeds-node-capacity: the pod asks for more of a GPU resource than any single node has.

A pod runs on one node, so its effective request for each extended resource (the sum over app
containers and sidecars, or a larger init-container peak: policies.podresources) must fit in one
node's ``status.allocatable``.  Otherwise the scheduler reports "Insufficient nvidia.com/gpu" on
every node and the pod stays Pending, however many nodes the cluster has.  Only the largest
allocatable is compared: current usage is not known offline.  Resources no node advertises are
left to gpu-resource-unknown.

Failing (the largest GPU node has 8)::

    resources:
      limits: {nvidia.com/gpu: 16}

Passing::

    resources:
      limits: {nvidia.com/gpu: 8}      # or two pods of 8 each (e.g. more workers)
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.applicability import Applies
from policies.quantity import format_quantity
from policies.rule import NeedsFacts, Option, RuleContext
from policies.rulekit import with_diagnosis
from policies.scheduling import Diagnosis, request_sites
from policies.types import Severity, Violation

ID = "gpu-exceeds-node-capacity"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = False  # judged on resource names/counts alone, so TrainJob/NIMService too
APPLIES: Applies = None
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "The pod asks for more of a GPU resource than any single node has allocatable."
REMEDIATION = "Lower the per-pod GPU count to fit one node, or split the work across more pods (e.g. more workers)."
OPTIONS: tuple[Option, ...] = ()


@with_diagnosis
def check(ctx: RuleContext, diagnosis: Diagnosis) -> Iterator[Violation]:
    requests = diagnosis.requests
    for name, largest in diagnosis.too_large.items():
        sites = request_sites(ctx.pod, name)
        if not sites:
            continue
        want = format_quantity(requests[name])
        have = format_quantity(largest)
        biggest = [v.describe() for v in diagnosis.verdicts if v.group.representative.allocatable.get(name) == largest]
        if len(sites) > 1:
            parts = " + ".join(f"{c.name!r} {format_quantity(q)}" for c, _, q in sites)
            asks = f"the pod requests {want} {name} (containers {parts})"
        else:
            asks = f"container {sites[0][0].name!r} requests {want} {name}"
        # Point at the container asking for the most: that is where the count is most likely lowered.
        _, path, _ = max(sites, key=lambda site: site[2])
        yield Violation(
            message=(
                f"{asks}, but no single node has more than {have} allocatable "
                f"({'; '.join(biggest)}); a pod must fit on one node: ask for at most {have} per pod "
                f"and spread the rest over more pods"
            ),
            path=path,
        )

"""gpu-unschedulable: no node passes every scheduler filter at once.

Each filter alone is satisfiable — some node offers the GPU resource, some has enough of it,
some matches the nodeSelector/affinity (with the RuntimeClass nodeSelector), some tolerated —
but no node is all of these together, or every candidate is cordoned (``spec.unschedulable``).
Typical: the pod selects the H100 pool but tolerates only the A100 pool's taint; it asks for 8
GPUs but selects the 1-GPU T4 pool; it asks for ``nvidia.com/gpu`` and a MIG profile that no one
node offers together.  The finding lists, per node group, why each was excluded (static filters
only: current usage is unknown offline).  When a single filter already excludes every node,
the rule for that filter reports instead (resource-unknown, exceeds-node-capacity,
node-selector-mismatch, taint-not-tolerated).

Failing (A100 nodes tainted ``nvidia.com/gpu``, H100 nodes also tainted ``dedicated=training``)::

    nodeSelector: {pool: h100}
    tolerations: [{key: nvidia.com/gpu, operator: Exists}]

Passing::

    nodeSelector: {pool: h100}
    tolerations: [{key: nvidia.com/gpu, operator: Exists}, {key: dedicated, value: training}]
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.applicability import Applies
from policies.rule import NeedsFacts, Option, RuleContext
from policies.rulekit import with_diagnosis
from policies.scheduling import Diagnosis, GroupVerdict, request_sites
from policies.types import Severity, Violation

ID = "gpu-unschedulable"
DEFAULT_SEVERITY = Severity.ERROR
NEEDS_FACTS: NeedsFacts = "yes"
NEEDS_SCHEDULING: bool = True
APPLIES: Applies = None
FIXABLE = False
MUTATION_SAFE = False
SUMMARY = "No node passes all scheduler filters together, although each filter alone is satisfiable somewhere."
REMEDIATION = "Make one node group satisfy every constraint at once; see the per-group reasons."
OPTIONS: tuple[Option, ...] = ()

MAX_GROUPS_LISTED = 8


def _offers_any(verdict: GroupVerdict, names: list[str]) -> bool:
    return len(verdict.missing) < len(names)


@with_diagnosis
def check(ctx: RuleContext, diagnosis: Diagnosis) -> Iterator[Violation]:
    requests = diagnosis.requests
    if not diagnosis.unschedulable:
        return
    names = sorted(requests)
    gpu = [v for v in diagnosis.verdicts if _offers_any(v, names)]
    others = [v for v in diagnosis.verdicts if not _offers_any(v, names)]
    lines = [f"{v.describe()}: {', '.join(v.reasons())}" for v in gpu[:MAX_GROUPS_LISTED]]
    if len(gpu) > MAX_GROUPS_LISTED:
        lines.append(f"{len(gpu) - MAX_GROUPS_LISTED} more node groups")
    if others:
        count = sum(v.size for v in others)
        nodes = "1 other node offers" if count == 1 else f"{count} other nodes offer"
        lines.append(f"{nodes} no {' or '.join(names)}")
    sites = [site for name in names for site in request_sites(ctx.pod, name)]
    if not sites:
        return
    yield Violation(
        message=(
            f"no node can run this pod: each of its constraints is met by some node, but no node "
            f"meets all of them together ({'; '.join(lines)}); change the nodeSelector/affinity, "
            "tolerations or GPU count so that one node group satisfies every constraint"
        ),
        path=sites[0][1],
    )

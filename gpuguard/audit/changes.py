"""Sort one object's findings before and after a planned cluster change.

A finding is the same finding in both when ``policies.identity.finding_key`` matches (rule and
field, list indices replaced by element names; the message is not part of it).  Then:

* introduced — only after the change, or present in both but more severe after (a warning that
  becomes an error is what the change breaks); the earlier severity is kept as ``previous``;
* resolved — only before the change;
* unchanged — in both, as severe or less severe after.

Both evaluations judge the same object, so the keys differ only where the findings do.

The planned snapshot is judged with today's ResourceQuotas and Kueue queues where it holds none
(:func:`planned_facts`): a plan is usually nodes (a pool drained, a driver rolled out), and without
this every quota finding of today would read as resolved by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuguard.audit.model import Change
from policies.facts import ClusterFacts
from policies.identity import FindingKey, finding_key
from policies.types import Finding, Severity


@dataclass(frozen=True, slots=True)
class Sorted:
    finding: Finding
    change: Change
    previous: Severity | None = None


def classify(obj: Any, before: Sequence[Finding], after: Sequence[Finding]) -> list[Sorted]:
    earlier: dict[FindingKey, list[Finding]] = {}
    for f in before:
        earlier.setdefault(finding_key(obj, f), []).append(f)
    out: list[Sorted] = []
    for f in after:
        matches = earlier.get(finding_key(obj, f))
        if not matches:
            out.append(Sorted(f, "introduced"))
            continue
        old = matches.pop(0)
        previous = old.severity if old.severity != f.severity else None
        out.append(Sorted(f, "introduced" if f.severity > old.severity else "unchanged", previous))
    out.extend(Sorted(f, "resolved") for rest in earlier.values() for f in rest)
    return out


def planned_facts(after: ClusterFacts, today: ClusterFacts) -> tuple[ClusterFacts, list[str]]:
    """``after`` with today's ResourceQuotas and Kueue queues where it has none, and what was kept."""
    quotas, queues = after.quotas, after.queues
    kept = []
    if quotas is None and today.quotas is not None:
        quotas = today.quotas
        kept.append("ResourceQuotas")
    if queues is None and today.queues is not None:
        queues = today.queues
        kept.append("Kueue queues")
    if not kept:
        return after, []
    facts = ClusterFacts(nodes=after.nodes, runtime_classes=after.runtime_classes, source=after.source,
                         pools=after.pools, extended_resource_toleration=after.extended_resource_toleration,
                         dra=after.dra, quotas=quotas, queues=queues, groups=after.node_groups)
    return facts, kept

"""Sort one object's findings before and after a planned cluster change.

A finding is the same finding in both when ``policies.identity.finding_key`` matches (rule and
field, list indices replaced by element names; the message is not part of it).  Then:

* introduced — only after the change, or present in both but more severe after (a warning that
  becomes an error is what the change breaks); the earlier severity is kept as ``previous``;
* resolved — only before the change;
* unchanged — in both, as severe or less severe after.

Both evaluations judge the same object, so the keys differ only where the findings do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuguard.audit.model import Change
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

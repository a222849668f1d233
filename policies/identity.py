"""Which findings of two versions of an object are the same finding.

An UPDATE is denied only for findings the new object has and the old one did not (Kyverno's
``allowExistingViolations``), and ``gpuguard audit --cluster-after`` sorts findings into
introduced, resolved and unchanged.  A finding is identified by its rule and its field, with list
indices replaced by the ``name`` of the element where the element has one: reordering containers,
volumes or env variables, or inserting one before another, does not make an old finding new.  The
message is not part of the identity: the same problem stated with other numbers (8 GPUs asked
where 4 were) is still the same problem.  But a finding whose ``scope`` grew (a device variable
changed from ``"0"`` to ``"all"``) is new: the update makes it worse.
"""

from __future__ import annotations

from typing import Any

from policies import pointer
from policies.shapes import index_of
from policies.types import Finding

FindingKey = tuple[str, str]


def stable_path(obj: Any, ptr: str) -> str:
    """``ptr`` with each list index whose element has a string ``name`` replaced by ``[name]``."""
    out: list[str] = []
    node: Any = obj
    for token in pointer.split(ptr):
        if isinstance(node, list) and (index := index_of(token, len(node))) is not None:
            element = node[index]
            name = element.get("name") if isinstance(element, dict) else None
            out.append(f"[{name}]" if isinstance(name, str) else token)
            node = element
        elif isinstance(node, dict) and token in node:
            out.append(pointer.escape(token))
            node = node[token]
        else:
            out.append(pointer.escape(token))
            node = None
    return "/" + "/".join(out) if out else ""


def finding_key(obj: Any, finding: Finding) -> FindingKey:
    return finding.rule, stable_path(obj, finding.path)


def new_findings(new_obj: Any, new: list[Finding], old_obj: Any, old: list[Finding]) -> list[Finding]:
    """The findings of ``new`` that ``old`` does not have (matched by ``finding_key``), or had with a
    smaller scope."""
    before: dict[FindingKey, int] = {}
    for f in old:
        key = finding_key(old_obj, f)
        before[key] = max(before.get(key, f.scope), f.scope)
    out = []
    for f in new:
        scope = before.get(finding_key(new_obj, f))
        if scope is None or f.scope > scope:
            out.append(f)
    return out

"""Which findings of two versions of an object are the same finding.

An UPDATE is denied only for findings the new object has and the old one did not (Kyverno's
``allowExistingViolations``), and ``gpuguard audit --cluster-after`` sorts findings into
introduced, resolved and unchanged.  A finding is identified by its rule and its field, with list
indices replaced by the ``name`` of the element where the element has one: reordering containers,
volumes or env variables, or inserting one before another, does not make an old finding new.  The
message is not part of the identity: the same problem stated with other numbers (8 GPUs asked
where 4 were) is still the same problem.
"""

from __future__ import annotations

from typing import Any

from policies import pointer
from policies.types import Finding

FindingKey = tuple[str, str]


def stable_path(obj: Any, ptr: str) -> str:
    """``ptr`` with each list index whose element has a string ``name`` replaced by ``[name]``."""
    out: list[str] = []
    node: Any = obj
    for token in pointer.split(ptr):
        if isinstance(node, list) and token.isdigit() and int(token) < len(node):
            element = node[int(token)]
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
    """The findings of ``new`` that ``old`` does not have (matched by ``finding_key``)."""
    before = {finding_key(old_obj, f) for f in old}
    return [f for f in new if finding_key(new_obj, f) not in before]

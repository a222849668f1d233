"""Core value types shared by the engine and its adapters."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

JSONValue = Any
Segment = str | int
RelPath = tuple[Segment, ...]


class Severity(enum.IntEnum):
    """Ordered: info < warning < error.  ``off`` is handled by config, not here."""

    INFO = 0
    WARNING = 1
    ERROR = 2

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls[text.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown severity {text!r}: expected error, warning or info") from None

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class PatchOp:
    """One RFC 6902 operation with an absolute RFC 6901 pointer."""

    op: str
    path: str
    value: JSONValue = None

    def to_dict(self) -> dict[str, JSONValue]:
        if self.op == "remove":
            return {"op": "remove", "path": self.path}
        return {"op": self.op, "path": self.path, "value": self.value}


@dataclass(frozen=True, slots=True)
class RelOp:
    """A patch operation a rule proposes, relative to the pod spec (or its metadata)."""

    op: str
    path: RelPath
    value: JSONValue = None
    anchor: str = "spec"  # "spec" or "metadata" of the pod template


@dataclass(frozen=True, slots=True)
class Violation:
    """What a rule reports: a message and a path relative to the pod spec (or metadata).

    ``severity`` overrides the configured severity only for rules whose severity depends
    on what they found (documented per rule); ``None`` means "use the configured one".
    """

    message: str
    path: RelPath = ()
    fix: tuple[RelOp, ...] = ()
    anchor: str = "spec"  # "spec" or "metadata" of the pod template; "object" for object rules
    severity: Severity | None = None
    remediation: str | None = None
    # How much the problem grants, for rules where an update can make it worse in place (a device
    # variable from "0" to "all"): an UPDATE is denied when a finding's scope grows
    # (policies.identity).  0: the finding has no degrees.
    scope: int = 0
    # For the whole-job rules: what a scale-up of the cluster (more nodes, a larger pool) could
    # change, said in the webhook's warnings, which keep only a message's first clause ("" : none).
    scale_up: str = ""


# C0 and C1 controls (escape sequences, carriage returns, newlines), and the Unicode line
# separators and bidirectional overrides that make text display other than it reads.
_UNSAFE = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))} | {
    c: f"\\u{c:04x}" for c in (0x200E, 0x200F, 0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
}


def printable(text: str) -> str:
    """``text`` with control characters, line separators and bidi overrides escaped (``\\x1b``)."""
    return text.translate(_UNSAFE)


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    severity: Severity
    message: str
    path: str
    remediation: str
    kind: str
    name: str
    namespace: str
    fix: tuple[PatchOp, ...] = field(default=())
    scope: int = 0  # Violation.scope
    scale_up: str = ""  # Violation.scale_up

    def __post_init__(self) -> None:
        # Messages and names carry strings from objects; a terminal, a log or kubectl must show
        # them as text, never run an escape sequence or reorder a line with them.
        for name in ("message", "name", "namespace", "kind", "scale_up"):
            value = getattr(self, name)
            if not value.isprintable():
                object.__setattr__(self, name, printable(value))

    def fix_dicts(self) -> list[dict[str, JSONValue]] | None:
        return [op.to_dict() for op in self.fix] if self.fix else None

    def to_dict(self) -> dict[str, JSONValue]:
        return {
            "rule": self.rule,
            "severity": str(self.severity),
            "message": self.message,
            "remediation": self.remediation,
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
            "path": self.path,
            "fix": self.fix_dicts(),
        }

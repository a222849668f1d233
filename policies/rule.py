"""What a rule module provides and what it receives."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import ModuleType
from typing import Any, Protocol

from policies.facts import ClusterFacts
from policies.images import ImageFacts, NoImageFacts
from policies.podresources import pod_requests
from policies.podspec import PodTemplate
from policies.resources import is_gpu_share_resource
from policies.scheduling import Diagnosis, diagnosis_cached
from policies.types import Severity, Violation


@dataclass(frozen=True, slots=True)
class Option:
    """One rule option: its name, accepted Python type(s), default and documentation."""

    name: str
    types: tuple[type, ...]
    default: Any
    doc: str
    choices: tuple[Any, ...] = ()
    check: Callable[[Any], list[str]] | None = None  # deeper validation: problem descriptions

    def validate(self, value: Any) -> str | None:
        if isinstance(value, bool) and bool not in self.types:
            return f"expected {self.type_names()}, got a boolean"
        if not isinstance(value, self.types):
            return f"expected {self.type_names()}, got {type(value).__name__}"
        if self.choices and value not in self.choices:
            return f"expected one of {', '.join(map(str, self.choices))}, got {value!r}"
        if self.check is not None:
            problems = self.check(value)
            if problems:
                return "; ".join(problems)
        return None

    def type_names(self) -> str:
        return " or ".join({"str": "string", "int": "integer", "list": "list", "dict": "mapping",
                            "bool": "boolean", "NoneType": "null"}.get(t.__name__, t.__name__)
                           for t in self.types)


@dataclass(slots=True)
class RuleContext:
    obj: dict[str, Any]
    pod: PodTemplate
    facts: ClusterFacts
    has_facts: bool
    options: Mapping[str, Any]
    is_gpu: Callable[[str], bool]
    cache: dict[str, Any] = field(default_factory=dict)
    images: ImageFacts = field(default_factory=NoImageFacts)

    def diagnosis(self) -> Diagnosis | None:
        """The scheduling diagnosis of a GPU pod against the facts; None without either."""
        requests = self.gpu_requests()
        if not requests or not self.facts.nodes:
            return None
        return diagnosis_cached(self.cache, self.pod, requests, self.facts, self.is_gpu)

    def gpu_requests(self) -> dict[str, Fraction]:
        """Effective pod requests of GPU devices (quota-like share resources excluded)."""
        key = "gpu_requests:" + self.pod.spec_pointer
        if key not in self.cache:
            is_gpu = self.is_gpu
            self.cache[key] = pod_requests(self.pod, lambda n: is_gpu(n) and not is_gpu_share_resource(n))
        result: dict[str, Fraction] = self.cache[key]
        return result


class RuleModule(Protocol):
    ID: str
    DEFAULT_SEVERITY: Severity
    NEEDS_FACTS: str  # "no" | "yes" | "partly"
    REMEDIATION: str
    SUMMARY: str
    OPTIONS: tuple[Option, ...]
    FIXABLE: bool

    def check(self, ctx: RuleContext) -> Iterable[Violation]: ...


def rule_doc(module: ModuleType) -> str:
    return (module.__doc__ or "").strip()

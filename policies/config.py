"""The engine's configuration: ``Config``, frozen, with the defaults of every setting.

The document it is read from (``.gpuguard.yaml``) is declared once, outside the engine: by the
model in ``gpuguard.sources.configmodel`` (``gpuguard config schema`` prints its JSON Schema),
which validates a document and builds ``Config`` with the helpers here.  What a key means for the
engine (severities, which fixes the webhook may apply, pod template locations) stays here.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from policies import pointer
from policies.facts import NodeFacts
from policies.podspec import Location, Shape, Workload, index_workloads
from policies.registry import RULES
from policies.registry_config import RegistrySettings
from policies.resources import GpuResourceNames
from policies.types import Severity

# Namespaces no tenant can create: kube-system always exists, and gpuguard's own is made by its
# install.  An exemption by any other name is one a tenant who may create namespaces (OpenShift
# projects, Capsule, HNC) could claim by creating a namespace of that name; GPU infrastructure
# (GPU Operator, device plugin, DRA driver) is judged instead, and its device access reported as
# info in gpu-device-access-bypass's infrastructureNamespaces (the webhook's installs exempt such
# namespaces by an admin-set label, gpuguard.io/exempt=true).
DEFAULT_EXEMPT_NAMESPACES = frozenset({"kube-system", "gpuguard"})
# The namespace label an administrator sets to exempt a namespace from the webhooks (their
# namespaceSelector leaves such namespaces out); only those who may update namespaces can set it.
EXEMPT_LABEL = "gpuguard.io/exempt"

# Rules that guard GPU allocation: a tenant who may annotate a pod must not be able to switch them
# off with gpuguard.io/ignore ("all" included), unless the config lists them in allowIgnoreRules.
ALLOCATION_GUARDS = frozenset({"gpu-device-access-bypass"})

Enforcement = Literal["enforce", "warn"]
FailureMode = Literal["allow", "deny"]


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key."""


@dataclass(frozen=True)
class RuleSettings:
    severity: Severity | None  # None = off
    options: Mapping[str, Any]
    explicit: bool = False  # severity set in config: it overrides a rule's own grading


@dataclass(frozen=True)
class Config:
    rules: Mapping[str, RuleSettings] = field(default_factory=dict)
    mutate: tuple[str, ...] = ()
    mutate_templates: bool = False
    exempt_namespaces: frozenset[str] = DEFAULT_EXEMPT_NAMESPACES
    enforcement: Enforcement = "enforce"
    warn_namespaces: tuple[str, ...] = ()
    ignore_annotation: bool | frozenset[str] = True  # True/False, or the namespaces where it is honoured
    ignore_rules: frozenset[str] = frozenset()  # ALLOCATION_GUARDS the annotation may skip
    gpu_resource_names: tuple[str, ...] = ()
    extra_workloads: tuple[Workload, ...] = ()
    failure_mode: FailureMode = "allow"
    registry: RegistrySettings = field(default_factory=RegistrySettings)
    node_pools: tuple[NodeFacts, ...] = ()
    extended_resource_toleration: bool | None = None  # None: as detected from the nodes

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", index_workloads(self.extra_workloads))
        object.__setattr__(self, "_is_gpu", GpuResourceNames(self.gpu_resource_names))
        resolved = {
            rule_id: self.rules.get(rule_id)
            or RuleSettings(module.DEFAULT_SEVERITY, {o.name: o.default for o in module.OPTIONS})
            for rule_id, module in RULES.items()
        }
        object.__setattr__(self, "_settings", resolved)

    @property
    def workload_index(self) -> dict[tuple[str, str], Workload]:
        index: dict[tuple[str, str], Workload] = self._index  # type: ignore[attr-defined]
        return index

    @property
    def is_gpu(self) -> GpuResourceNames:
        fn: GpuResourceNames = self._is_gpu  # type: ignore[attr-defined]
        return fn

    def settings(self, rule_id: str) -> RuleSettings:
        resolved: dict[str, RuleSettings] = self._settings  # type: ignore[attr-defined]
        return resolved[rule_id]

    def enforcement_in(self, namespace: str) -> Enforcement:
        """``warn`` everywhere under ``enforcement: warn``, else in namespaces matching ``warnNamespaces``."""
        if self.enforcement == "warn" or any(fnmatch.fnmatchcase(namespace, p) for p in self.warn_namespaces):
            return "warn"
        return "enforce"

    def honours_ignore_annotation(self, namespace: str) -> bool:
        if isinstance(self.ignore_annotation, bool):
            return self.ignore_annotation
        return namespace in self.ignore_annotation

    def skipped_by_annotation(self, names: frozenset[str] | set[str]) -> frozenset[str]:
        """The rule ids an honoured ``gpuguard.io/ignore`` naming ``names`` (``all`` for every rule)
        skips: never an allocation guard the config does not list in allowIgnoreRules."""
        wanted = set(RULES) if "all" in names else {n for n in names if n in RULES}
        return frozenset(n for n in wanted if n not in ALLOCATION_GUARDS or n in self.ignore_rules)


def parse_severity(text: str | bool) -> Severity | None:
    """A configured severity: ``error``, ``warning`` or ``info`` (any case), or None for ``off``
    (also ``false``: YAML 1.1 readers, Helm's among them, read a bare ``off`` as false)."""
    if text is False or (isinstance(text, str) and text.strip().lower() == "off"):
        return None
    if not isinstance(text, str):
        raise ValueError(f"unknown severity {text!r}: expected error, warning, info or off")
    return Severity.parse(text)


def mutation_problem(rule_id: str) -> str | None:
    """Why the mutating webhook may not apply ``rule_id``'s fix, or None when it may."""
    if rule_id not in RULES:
        return f"unknown rule id {rule_id!r}"
    if not RULES[rule_id].FIXABLE:
        return f"rule {rule_id!r} has no automatic fix"
    if not RULES[rule_id].MUTATION_SAFE:
        return (
            f"rule {rule_id!r} has a fix that changes what the pod gets; "
            "the webhook does not guess it (gpuguard lint --fix offers it for review)"
        )
    return None


def custom_workload(
    api_version: str, kind: str, template: str | None, pod_spec: str | None, resource: str | None
) -> Workload:
    """The pod template locations of a kind of one's own (``podTemplatePaths``): JSON pointers to a
    pod template (``template``) and/or a pod spec (``podSpec``), ``*`` for every key or item."""
    locations = []
    shape: Shape
    for shape, path in (("template", template), ("podspec", pod_spec)):
        if path is not None:
            parts = tuple(pointer.split(path))
            locations.append(Location(shape, parts, wildcard="any" if "*" in parts else None))
    if not locations:
        raise ValueError("needs template or podSpec")
    group, _, version = api_version.rpartition("/")
    return Workload(group, kind, resource or kind.lower() + "s", (version,), tuple(locations))

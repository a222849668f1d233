"""gpuguard configuration, validated from a plain mapping (adapters do the YAML loading).

    rules:
      <rule-id>: {severity: error|warning|info|off, options: {...}}
    mutate: [<rule-id>, ...]          # fixes the mutating webhook applies (to Pods, on CREATE)
    mutateTemplates: false            # also patch controller/CRD pod templates (GitOps sees drift)
    exemptNamespaces: [kube-system]   # objects in these namespaces are not checked (replaces the default)
    enforcement: enforce | warn       # warn: admit what would be denied, with warnings
    warnNamespaces: [team-*]          # namespaces (shell patterns) where enforcement is warn
    allowIgnoreAnnotation: true       # false, or a list of namespaces where gpuguard.io/ignore is honoured
    allowIgnoreRules: []              # rules guarding GPU allocation the annotation may skip (none by default)
    gpuResourceNames: [example.com/accel]
    podTemplatePaths:                 # pod templates of other CRDs
      - {apiVersion: example.com/v1, kind: Trainer, template: /spec/workers/*/template}
      - {apiVersion: example.com/v1, kind: Server, podSpec: /spec/pod}
    failureMode: allow | deny         # webhook answer when the engine itself fails
    registry: {enabled: true, ...}    # image config lookups (see policies.registry_config)
    nodePools: [{name, labels, taints, resources, gpuProduct, driverVersion, maxNodes}]  # policies.declared_pools
    extendedResourceToleration: true | false   # default: detected from the nodes (policies.managed)
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from policies import pointer
from policies.declared_pools import PoolConfigError, parse_node_pools
from policies.facts import NodeFacts
from policies.podspec import Location, Shape, Workload, index_workloads
from policies.registry import RULES
from policies.registry_config import RegistryConfigError, RegistrySettings, parse_registry_settings
from policies.resources import GpuResourceNames
from policies.types import Severity

TOP_LEVEL_KEYS = (
    "rules",
    "mutate",
    "mutateTemplates",
    "exemptNamespaces",
    "enforcement",
    "warnNamespaces",
    "allowIgnoreAnnotation",
    "allowIgnoreRules",
    "gpuResourceNames",
    "podTemplatePaths",
    "failureMode",
    "registry",
    "nodePools",
    "extendedResourceToleration",
)

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


def _expect(value: Any, typ: type | tuple[type, ...], key: str, what: str) -> Any:
    if not isinstance(value, typ) or isinstance(value, bool):
        raise ConfigError(f"{key}: expected {what}, got {type(value).__name__}")
    return value


def _rule_settings(rule_id: str, raw: Any) -> RuleSettings:
    key = f"rules.{rule_id}"
    if rule_id not in RULES:
        known = ", ".join(sorted(RULES))
        raise ConfigError(f"{key}: unknown rule id {rule_id!r} (known rules: {known})")
    module = RULES[rule_id]
    if raw is None:
        raw = {}
    if isinstance(raw, str):  # shorthand: `gpu-shared-memory: off`
        raw = {"severity": raw}
    _expect(raw, Mapping, key, "a mapping with severity and/or options")
    for k in raw:
        if k not in ("severity", "options"):
            raise ConfigError(f"{key}.{k}: unknown key (expected severity or options)")
    severity: Severity | None = module.DEFAULT_SEVERITY
    explicit = "severity" in raw
    if "severity" in raw:
        text = raw["severity"]
        if text is False:  # YAML 1.1 reads a bare `off` as false
            text = "off"
        _expect(text, str, f"{key}.severity", "error, warning, info or off")
        if text == "off":
            severity = None
        else:
            try:
                severity = Severity.parse(text)
            except ValueError as exc:
                raise ConfigError(f"{key}.severity: {exc}") from None
    options = {o.name: o.default for o in module.OPTIONS}
    given = raw.get("options") or {}
    _expect(given, Mapping, f"{key}.options", "a mapping")
    specs = {o.name: o for o in module.OPTIONS}
    for name, value in given.items():
        if name not in specs:
            known = ", ".join(sorted(specs)) or "none"
            raise ConfigError(f"{key}.options.{name}: unknown option (this rule's options: {known})")
        problem = specs[name].validate(value)
        if problem:
            raise ConfigError(f"{key}.options.{name}: {problem}")
        options[name] = value
    return RuleSettings(severity, options, explicit)


def _template_path(i: int, raw: Any) -> Workload:
    key = f"podTemplatePaths[{i}]"
    _expect(raw, Mapping, key, "a mapping with apiVersion, kind and template or podSpec")
    for k in raw:
        if k not in ("apiVersion", "kind", "template", "podSpec", "resource"):
            raise ConfigError(f"{key}.{k}: unknown key")
    api_version = _expect(raw.get("apiVersion"), str, f"{key}.apiVersion", "a string")
    kind = _expect(raw.get("kind"), str, f"{key}.kind", "a string")
    locations = []
    shape: Shape
    for shape, field_name in (("template", "template"), ("podspec", "podSpec")):
        if field_name in raw:
            path = _expect(raw[field_name], str, f"{key}.{field_name}", "a JSON pointer string")
            try:
                parts = tuple(pointer.split(path))
                locations.append(Location(shape, parts, wildcard="any" if "*" in parts else None))
            except ValueError as exc:
                raise ConfigError(f"{key}.{field_name}: {exc}") from None
    if not locations:
        raise ConfigError(f"{key}: needs template or podSpec")
    group, _, version = api_version.rpartition("/")
    resource = raw.get("resource") or kind.lower() + "s"
    return Workload(group, kind, str(resource), (version,), tuple(locations))


def _or_default(value: Any, default: Any) -> Any:
    return default if value is None else value


def _boolean(value: Any, key: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    return value


def _strings(value: Any, key: str, what: str) -> list[str]:
    _expect(value, list, key, f"a list of {what}")
    for i, item in enumerate(value):
        if not isinstance(item, str) or not item:
            raise ConfigError(f"{key}[{i}]: expected a non-empty string, got {item!r}")
    return list(value)


def load_config(raw: Any) -> Config:
    """Validate a parsed config document; raise ConfigError naming the offending key."""
    if raw is None:
        return Config()
    _expect(raw, Mapping, "config", "a mapping")
    for k in raw:
        if k not in TOP_LEVEL_KEYS:
            raise ConfigError(f"{k}: unknown key (expected one of {', '.join(TOP_LEVEL_KEYS)})")
    rules_raw = _or_default(raw.get("rules"), {})
    _expect(rules_raw, Mapping, "rules", "a mapping of rule id to settings")
    rules = {str(rid): _rule_settings(str(rid), settings) for rid, settings in rules_raw.items()}
    mutate_raw = _or_default(raw.get("mutate"), [])
    _expect(mutate_raw, list, "mutate", "a list of rule ids")
    for i, rid in enumerate(mutate_raw):
        if rid not in RULES:
            raise ConfigError(f"mutate[{i}]: unknown rule id {rid!r}")
        if not RULES[rid].FIXABLE:
            raise ConfigError(f"mutate[{i}]: rule {rid!r} has no automatic fix")
        if not RULES[rid].MUTATION_SAFE:
            raise ConfigError(
                f"mutate[{i}]: rule {rid!r} has a fix that changes what the pod gets; "
                "the webhook does not guess it (gpuguard lint --fix offers it for review)"
            )
    mutate_templates = _boolean(raw.get("mutateTemplates", False), "mutateTemplates")
    exempt = _or_default(raw.get("exemptNamespaces"), sorted(DEFAULT_EXEMPT_NAMESPACES))
    _expect(exempt, list, "exemptNamespaces", "a list of namespace names")
    enforcement = raw.get("enforcement", "enforce")
    if enforcement not in ("enforce", "warn"):
        raise ConfigError(f"enforcement: expected enforce or warn, got {enforcement!r}")
    warn_namespaces = _strings(_or_default(raw.get("warnNamespaces"), []), "warnNamespaces", "namespace patterns")
    ignore_raw = raw.get("allowIgnoreAnnotation", True)
    ignore: bool | frozenset[str]
    if isinstance(ignore_raw, bool):
        ignore = ignore_raw
    elif isinstance(ignore_raw, list):
        ignore = frozenset(_strings(ignore_raw, "allowIgnoreAnnotation", "namespace names"))
    else:
        raise ConfigError(
            f"allowIgnoreAnnotation: expected true, false or a list of namespaces, got {type(ignore_raw).__name__}"
        )
    ignore_rules = _strings(_or_default(raw.get("allowIgnoreRules"), []), "allowIgnoreRules", "rule ids")
    for i, rid in enumerate(ignore_rules):
        if rid not in RULES:
            raise ConfigError(f"allowIgnoreRules[{i}]: unknown rule id {rid!r}")
    extra = _or_default(raw.get("gpuResourceNames"), [])
    _expect(extra, list, "gpuResourceNames", "a list of resource names")
    paths = _or_default(raw.get("podTemplatePaths"), [])
    _expect(paths, list, "podTemplatePaths", "a list")
    failure = raw.get("failureMode", "allow")
    if failure not in ("allow", "deny"):
        raise ConfigError(f"failureMode: expected allow or deny, got {failure!r}")
    try:
        registry = parse_registry_settings(raw.get("registry"))
    except RegistryConfigError as exc:
        raise ConfigError(str(exc)) from None
    try:
        node_pools = parse_node_pools(raw.get("nodePools"))
    except PoolConfigError as exc:
        raise ConfigError(str(exc)) from None
    ert = raw.get("extendedResourceToleration")
    if ert is not None and not isinstance(ert, bool):
        raise ConfigError(f"extendedResourceToleration: expected true or false, got {ert!r}")
    return Config(
        rules=rules,
        mutate=tuple(mutate_raw),
        mutate_templates=mutate_templates,
        exempt_namespaces=frozenset(str(n) for n in exempt),
        enforcement=enforcement,
        warn_namespaces=tuple(warn_namespaces),
        ignore_annotation=ignore,
        ignore_rules=frozenset(ignore_rules),
        gpu_resource_names=tuple(str(n) for n in extra),
        extra_workloads=tuple(_template_path(i, p) for i, p in enumerate(paths)),
        failure_mode=failure,
        registry=registry,
        node_pools=node_pools,
        extended_resource_toleration=ert,
    )

"""The ``.gpuguard.yaml`` document, declared once: every key, its type, its default and its meaning.

This pydantic model is the one description of the config's shape.  ``gpuguard config schema``
prints its JSON Schema (``deploy/gpuguard-config.schema.json`` and the ``config`` of the Helm
chart's ``values.schema.json`` are generated from it, see ``deploy/generate_config_schema.py``),
and ``load_config`` validates a document with it and builds the engine's frozen
``policies.config.Config``.  Nothing is restated: rule ids come from the registry
(``policies.registry.RULES``), each rule's options from its module's ``OPTIONS``, the engine's
defaults from ``Config`` and ``RegistrySettings``, and what only the engine knows (JSON pointer
syntax, CUDA image rules, which fixes the webhook may apply, quantities, driver versions) is
checked by the engine's own functions, called from the validators here.

A problem is reported as (path, message): the path is the keys and indexes of the document, so a
config file's problems point at the file, line and column of the offending key
(``gpuguard.sources.configfile``), and unknown keys, rule ids, options and values get the nearest
valid one ("did you mean …?").

Imported only when a config is read: ``gpuguard lint`` without a config never loads pydantic.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticCustomError

from policies import pointer
from policies.config import (
    DEFAULT_EXEMPT_NAMESPACES,
    Config,
    ConfigError,
    Enforcement,
    FailureMode,
    RuleSettings,
    custom_workload,
    mutation_problem,
    parse_severity,
)
from policies.declared_pools import declared_pool, driver_labels
from policies.facts import NodeFacts, Taint
from policies.podspec import Workload
from policies.quantity import try_parse
from policies.registry import RULES
from policies.registry_config import RegistryConfigError, RegistrySettings, normalise_insecure
from policies.rule import Option, RuleModule
from policies.types import Severity
from policies.wording import did_you_mean, suggest

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_TITLE = "gpuguard policy config (.gpuguard.yaml)"

# --- problems ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem of a config document: where (keys and indexes from the top) and what."""

    path: tuple[str | int, ...]
    message: str

    @property
    def key(self) -> str:
        """The path as messages write it: ``rules.gpu-limit-missing.severity``, ``nodePools[0].name``."""
        text = ""
        for step in self.path:
            text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
        return text or "config"

    def __str__(self) -> str:
        # "(quote it)" and the like qualify the key itself
        return f"{self.key} {self.message}" if self.message.startswith("(") else f"{self.key}: {self.message}"


class ConfigProblems(ConfigError):
    """The problems of a config document, in document order; the first is the error's message."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        super().__init__(str(problems[0]))
        self.problems = tuple(problems)


def _problem(message: str, *at: str | int) -> PydanticCustomError:
    """A validation error with gpuguard's message, about ``at`` (keys below the validated value)."""
    return PydanticCustomError("gpuguard", "{message}", {"message": message, "at": at})


def _got(value: Any) -> str:
    """A document value as a message shows it, in YAML's words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value if len(value) <= 80 else value[:79] + "…")
    if isinstance(value, int | float):
        return str(value) if abs(value) < 1e30 else "a huge number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def _choices(names: Sequence[str], literal: bool = False) -> str:
    """``a or b``; ``one of a, b, c`` for a fixed set of values; ``a, b or c`` for alternatives."""
    if len(names) <= 2:
        return " or ".join(names)
    if literal:
        return "one of " + ", ".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]


def _did_you_mean(name: Any, known: Sequence[str]) -> str:
    close = suggest(str(name), known)
    return f"; {did_you_mean(close, quote=True)}" if close else ""


# --- value types -------------------------------------------------------------------------------

NonEmptyStr = Annotated[StrictStr, StringConstraints(min_length=1)]

# A namespace name is a DNS-1123 label (Kubernetes validates it so); others can never match one.
NAMESPACE_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
NamespaceName = Annotated[StrictStr, StringConstraints(pattern=NAMESPACE_PATTERN, max_length=63)]
_PATTERN_NAMES = {NAMESPACE_PATTERN: "a namespace name (lowercase letters, digits and '-')"}


def _known_rule(value: str) -> str:
    if value not in RULES:
        hint = _did_you_mean(value, list(RULES)) or " (`gpuguard rules` lists them)"
        raise _problem(f"unknown rule id {value!r}{hint}")
    return value


def _mutable_rule(value: str) -> str:
    _known_rule(value)
    problem = mutation_problem(value)
    if problem is not None:
        raise _problem(problem)
    return value


RuleId = Annotated[StrictStr, AfterValidator(_known_rule), WithJsonSchema({"type": "string", "enum": list(RULES)})]
MutableRuleId = Annotated[
    StrictStr,
    AfterValidator(_mutable_rule),
    WithJsonSchema({"type": "string", "enum": [r for r in RULES if mutation_problem(r) is None]}),
]

SeverityName = Literal["error", "warning", "info", "off"]


def _severity_text(value: Any) -> Any:
    if value is False:  # YAML 1.1 readers (Helm's among them) read a bare `off` as false
        return "off"
    return value.strip().lower() if isinstance(value, str) else value


SEVERITIES: tuple[str, ...] = get_args(SeverityName)
# The schema says what is accepted: the names (editors offer them), in any case, and false.
_ANY_CASE = "^\\s*(" + "|".join("".join(f"[{c.upper()}{c}]" for c in n) for n in SEVERITIES) + ")\\s*$"
SEVERITY_SCHEMA = {"anyOf": [{"type": "string", "enum": list(SEVERITIES)}, {"const": False},
                             {"type": "string", "pattern": _ANY_CASE}]}
SeverityInput = Annotated[SeverityName, WithJsonSchema(SEVERITY_SCHEMA)]
SeverityField = Annotated[SeverityName, BeforeValidator(_severity_text), WithJsonSchema(SEVERITY_SCHEMA)]


def _pointer(value: str) -> str:
    try:
        pointer.split(value)
    except ValueError as exc:
        raise _problem(str(exc)) from None
    return value


Pointer = Annotated[StrictStr, AfterValidator(_pointer), WithJsonSchema({"type": "string", "pattern": "^(/.*)?$"})]


def _host_port(value: str) -> str:
    try:
        return normalise_insecure(value)
    except RegistryConfigError as exc:
        raise _problem(str(exc)) from None


HostPort = Annotated[StrictStr, AfterValidator(_host_port)]


def _file_path(value: str) -> str:
    if not value.strip():
        raise _problem("expected a file path")
    return value


FilePath = Annotated[StrictStr, StringConstraints(min_length=1), AfterValidator(_file_path)]


def _label_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise _problem(f"expected a label value (a string), got {_got(value)}")


LabelValue = Annotated[str, PlainValidator(_label_value, json_schema_input_type=str | int | float | bool)]


def _quantity(value: Any) -> Any:
    parsed = None if isinstance(value, bool) else try_parse(value)
    if parsed is None or parsed < 0:
        raise _problem(f"expected a non-negative quantity (such as 8 or \"500m\"), got {_got(value)}")
    return parsed


Quantity = Annotated[Any, PlainValidator(_quantity, json_schema_input_type=str | int | float)]


def _driver_version(value: Any) -> str:
    if not isinstance(value, str):
        raise _problem(f"(quote it): expected a string such as \"550.90.07\", got {_got(value)} "
                       "(YAML reads an unquoted 550.90 as a number)")
    try:
        driver_labels(value)
    except ValueError as exc:
        raise _problem(str(exc)) from None
    return value


DriverVersion = Annotated[str, PlainValidator(_driver_version, json_schema_input_type=str)]


# --- the engine's defaults, as a document writes them ------------------------------------------


def _default(cls: type, attr: str) -> Any:
    """The default of ``cls.attr`` (a dataclass of the engine), with sets and tuples as lists."""
    spec = {f.name: f for f in dataclasses.fields(cls)}[attr]
    factory: Any = spec.default_factory
    value = spec.default if spec.default is not dataclasses.MISSING else factory()
    if isinstance(value, frozenset | set):
        return sorted(value)
    return list(value) if isinstance(value, tuple) else value


class _Model(BaseModel):
    """Strict: what YAML wrote is what is checked (no "true" for true, no 1 for true, no "10" for 10),
    and a key the model does not declare is an error."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, defer_build=True)


# --- rules: one entry per rule id, options from each rule's OPTIONS ----------------------------

_TYPES: dict[type, Any] = {
    str: StrictStr,
    int: StrictInt,
    float: StrictFloat,
    bool: StrictBool,
    list: list[Any],
    dict: dict[Any, Any],
    type(None): None,
}


def _check_with(check: Callable[[Any], list[str]]) -> Callable[[Any], Any]:
    def validate(value: Any) -> Any:
        problems = check(value)
        if problems:
            raise _problem("; ".join(problems))
        return value

    return validate


def _option_type(option: Option) -> Any:
    """A rule option's type, from its declaration: its choices, else its Python types."""
    if option.choices:
        base: Any = Literal.__getitem__(tuple(option.choices))  # type: ignore[attr-defined]
    else:
        members = tuple(_TYPES[t] for t in option.types)
        base = members[0] if len(members) == 1 else Union.__getitem__(members)  # type: ignore[attr-defined]
    return Annotated[base, AfterValidator(_check_with(option.check))] if option.check else base


def _field_name(name: str) -> str:
    return "f_" + "".join(c if c.isalnum() else "_" for c in name)


def _none_is_empty(value: Any) -> Any:
    return {} if value is None else value


def _options_model(rule_id: str, options: tuple[Option, ...]) -> type[BaseModel]:
    fields: dict[str, Any] = {
        _field_name(o.name): (_option_type(o), Field(default=o.default, alias=o.name, description=o.doc))
        for o in options
    }
    return create_model(  # type: ignore[no-any-return, call-overload]
        f"{rule_id} options" if options else "no options",
        __base__=_Model,
        __doc__=f"`gpuguard rules {rule_id}` documents them." if options else "This rule has no options.",
        **fields,
    )


_SHARED: dict[Severity, type[BaseModel]] = {}


def _settings_model(module: RuleModule) -> type[BaseModel]:
    """``{severity, options}`` of a rule: the severity's default is the rule's own.  Rules without
    options share one model per default severity."""
    default = module.DEFAULT_SEVERITY
    if not module.OPTIONS and default in _SHARED:
        return _SHARED[default]
    rule_id = module.ID if module.OPTIONS else ""
    model = _options_model(rule_id, module.OPTIONS)
    settings: type[BaseModel] = create_model(  # type: ignore[call-overload]
        f"{rule_id or default} settings",
        __base__=_Model,
        __doc__="A rule's severity and options.",
        severity=(
            SeverityField,
            Field(default=str(default), description="error, warning, info or off (the rule does not run)"),
        ),
        options=(_options_field(model), Field(default=None, description=model.__doc__)),
    )
    if not module.OPTIONS:
        _SHARED[default] = settings
    return settings


def _options_field(model: type[BaseModel]) -> Any:
    """The options model; null is no options given."""
    return Annotated[model, BeforeValidator(_none_is_empty, json_schema_input_type=model | None)]


def _settings_input(value: Any) -> Any:
    """``rule: off`` (any severity) is short for ``rule: {severity: off}``; ``rule:`` alone, its defaults."""
    if value is None:
        return {}
    if isinstance(value, str) or value is False:
        return {"severity": value}
    return value


def _rule_field(module: RuleModule) -> Any:
    settings = _settings_model(module)
    shorthand = settings | SeverityInput | None
    return (
        Annotated[settings, BeforeValidator(_settings_input, json_schema_input_type=shorthand)],
        Field(default=None, alias=module.ID, description=f"{module.SUMMARY} (default: {module.DEFAULT_SEVERITY})"),
    )


RulesDocument: type[BaseModel] = create_model(  # type: ignore[call-overload]
    "rules",
    __base__=_Model,
    __doc__="Per rule id: its severity and options; `gpuguard rules` lists the rules, `gpuguard rules ID` "
    "documents one.",
    **{_field_name(rule_id): _rule_field(module) for rule_id, module in RULES.items()},
)


def _rule_settings(rules: BaseModel | None) -> dict[str, RuleSettings]:
    settings: dict[str, RuleSettings] = {}
    if rules is None:
        return settings
    for name, field in type(rules).model_fields.items():  # in the registry's order
        if name not in rules.model_fields_set:
            continue
        rule_id = field.alias
        assert rule_id is not None
        module, given = RULES[rule_id], getattr(rules, name)
        explicit = "severity" in given.model_fields_set
        options = {o.name: o.default for o in module.OPTIONS}
        if given.options is not None:
            options.update(given.options.model_dump(by_alias=True, exclude_unset=True))
        severity = parse_severity(given.severity) if explicit else module.DEFAULT_SEVERITY
        settings[rule_id] = RuleSettings(severity, options, explicit)
    return settings


# --- podTemplatePaths, registry, nodePools -----------------------------------------------------


class TemplatePathDocument(_Model):
    """Where the pod templates of a kind of one's own are (`*` in a pointer: every key or item)."""

    api_version: NonEmptyStr = Field(alias="apiVersion", description="e.g. example.com/v1")
    kind: NonEmptyStr = Field(description="e.g. Trainer")
    template: Pointer | None = Field(
        default=None, description="JSON pointer to a pod template ({metadata, spec}), e.g. /spec/workers/*/template"
    )
    pod_spec: Pointer | None = Field(default=None, alias="podSpec", description="JSON pointer to a pod spec")
    resource: NonEmptyStr | None = Field(
        default=None, description="the kind's plural resource name (default: the kind, lower case, plus s)"
    )

    @model_validator(mode="after")
    def _located(self) -> TemplatePathDocument:
        if self.template is None and self.pod_spec is None:
            raise _problem("needs template or podSpec")
        return self

    def workload(self) -> Workload:
        return custom_workload(self.api_version, self.kind, self.template, self.pod_spec, self.resource)


def _registry_default(attr: str, scale: float = 1) -> Any:
    value = _default(RegistrySettings, attr)
    return value * scale if scale != 1 else value


def _seconds(attr: str, alias: str, minimum: float, doc: str) -> Any:
    return Field(default=_registry_default(attr), alias=alias, ge=minimum, description=doc)


class RegistryDocument(_Model):
    """Image config lookups in registries (CUDA_VERSION, NVIDIA_REQUIRE_CUDA of the image itself)."""

    enabled: StrictBool = Field(
        default=_registry_default("enabled"),
        description="lookups on (the linter's --registry; the webhook's only switch)",
    )
    ca: FilePath | None = Field(default=None, description="an extra CA to trust (a relative path: to the config file)")
    insecure: list[HostPort] | None = Field(
        default=None, description="hosts (HOST or HOST:PORT, exactly as in image names) read over plain HTTP"
    )
    connect_timeout: StrictFloat = _seconds("connect_timeout", "connectTimeoutSeconds", 0.001, "seconds")
    read_timeout: StrictFloat = _seconds("read_timeout", "readTimeoutSeconds", 0.001, "seconds")
    timeout: StrictFloat = _seconds(
        "timeout", "timeoutSeconds", 0.001, "one image's whole lookup (tokens, manifests, config blob), in seconds"
    )
    review_budget: StrictFloat = Field(
        default=_registry_default("review_budget", 1000), alias="reviewBudgetMilliseconds", ge=0,
        description="webhook: the longest a review waits for lookups, in milliseconds",
    )
    tag_ttl: StrictFloat = _seconds("tag_ttl", "tagTTLSeconds", 0, "how long a tag → digest answer is trusted")
    negative_ttl: StrictFloat = _seconds(
        "negative_ttl", "negativeTTLSeconds", 0, "how long a failed lookup is remembered"
    )
    max_manifest_bytes: StrictInt = Field(
        default=_registry_default("max_manifest_bytes"), alias="maxManifestBytes", ge=1024
    )
    max_config_bytes: StrictInt = Field(default=_registry_default("max_config_bytes"), alias="maxConfigBytes", ge=1024)
    cache_entries: StrictInt = Field(
        default=_registry_default("cache_entries"), alias="cacheEntries", ge=1,
        description="webhook: images kept in memory",
    )

    def settings(self) -> RegistrySettings:
        return RegistrySettings(
            enabled=self.enabled,
            ca=self.ca,
            insecure=tuple(self.insecure or ()),
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            timeout=self.timeout,
            review_budget=self.review_budget / 1000.0,
            tag_ttl=self.tag_ttl,
            negative_ttl=self.negative_ttl,
            max_manifest_bytes=self.max_manifest_bytes,
            max_config_bytes=self.max_config_bytes,
            cache_entries=self.cache_entries,
        )


class TaintDocument(_Model):
    key: NonEmptyStr
    value: LabelValue | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class PoolDocument(_Model):
    """A node pool the cluster API does not describe (scaled to zero): its nodes as they would be."""

    name: NonEmptyStr
    labels: dict[StrictStr, LabelValue] | None = Field(default=None, description="the labels of its nodes")
    taints: list[TaintDocument] | None = Field(default=None, description="the taints of its nodes")
    resources: dict[StrictStr, Quantity] | None = Field(
        default=None, description="allocatable resources of one node, e.g. {nvidia.com/gpu: 8}"
    )
    gpu_product: NonEmptyStr | None = Field(
        default=None, alias="gpuProduct", description="the GFD nvidia.com/gpu.product label, e.g. NVIDIA-A100-SXM4-40GB"
    )
    driver_version: DriverVersion | None = Field(
        default=None, alias="driverVersion", description="the NVIDIA driver, e.g. \"550.90.07\" (quoted)"
    )
    max_nodes: StrictInt | None = Field(
        default=None, alias="maxNodes", ge=0,
        description="the most nodes the pool can have (gangs that need more get an error; unknown: a warning)",
    )

    def facts(self) -> NodeFacts:
        taints = tuple(Taint(t.key, t.value or "", t.effect) for t in self.taints or ())
        return declared_pool(self.name, self.labels or {}, taints, self.resources or {}, self.gpu_product,
                             self.driver_version, self.max_nodes)


def _unique_names(pools: list[PoolDocument] | None) -> list[PoolDocument] | None:
    seen: set[str] = set()
    for i, pool in enumerate(pools or ()):
        if pool.name in seen:
            raise _problem(f"{pool.name!r} is declared twice", i, "name")
        seen.add(pool.name)
    return pools


# --- the document ------------------------------------------------------------------------------

if TYPE_CHECKING:
    RulesField = Any
else:
    RulesField = RulesDocument | None


def _config_default(attr: str) -> Any:
    return _default(Config, attr)


class ConfigDocument(_Model):
    """gpuguard's policy config (`--config FILE`, else .gpuguard.yaml upward); every key is optional."""

    # Field names are Config's; aliases are the document's keys.
    rules: RulesField = Field(default=None, description=RulesDocument.__doc__)
    mutate: list[MutableRuleId] | None = Field(
        default=_config_default("mutate"),
        description="rules whose fixes the mutating webhook applies (to Pods, on CREATE); only fixes that keep "
        "what the pod gets",
    )
    mutate_templates: StrictBool = Field(
        default=_config_default("mutate_templates"), alias="mutateTemplates",
        description="also patch controller and CRD pod templates (GitOps tools then show drift)",
    )
    exempt_namespaces: list[NamespaceName] | None = Field(
        default=_config_default("exempt_namespaces"), alias="exemptNamespaces",
        description="namespaces whose objects are not checked (replaces the default); name only namespaces no "
        "tenant can create, and exempt GPU infrastructure by the gpuguard.io/exempt=true namespace label instead",
    )
    enforcement: Enforcement = Field(
        default=_config_default("enforcement"),
        description="warn: admit, with warnings, what enforce would deny",
    )
    warn_namespaces: list[NonEmptyStr] | None = Field(
        default=_config_default("warn_namespaces"), alias="warnNamespaces",
        description="namespaces (shell patterns, e.g. team-*) where enforcement is warn",
    )
    ignore_annotation: StrictBool | list[NonEmptyStr] = Field(
        default=_config_default("ignore_annotation"), alias="allowIgnoreAnnotation",
        description="whether the gpuguard.io/ignore annotation is honoured: true, false, or the namespaces "
        "where it is",
    )
    ignore_rules: list[RuleId] | None = Field(
        default=_config_default("ignore_rules"), alias="allowIgnoreRules",
        description="rules guarding GPU allocation (gpu-device-access-bypass) the annotation may skip; none by "
        "default",
    )
    gpu_resource_names: list[NonEmptyStr] | None = Field(
        default=_config_default("gpu_resource_names"), alias="gpuResourceNames",
        description="extended resources to treat as GPUs, beside nvidia.com/*, amd.com/gpu and gpu.intel.com/*",
    )
    extra_workloads: list[TemplatePathDocument] | None = Field(
        default=None, alias="podTemplatePaths", description="pod templates of CRDs of one's own"
    )
    failure_mode: FailureMode = Field(
        default=_config_default("failure_mode"), alias="failureMode",
        description="the webhook's answer when the engine itself fails on an object",
    )
    registry: RegistryDocument | None = Field(default=None, description=RegistryDocument.__doc__)
    node_pools: Annotated[list[PoolDocument] | None, AfterValidator(_unique_names)] = Field(
        default=None, alias="nodePools",
        description="node pools that scale up from zero and that no Node or Karpenter NodePool describes",
    )
    extended_resource_toleration: StrictBool | None = Field(
        default=_config_default("extended_resource_toleration"), alias="extendedResourceToleration",
        description="whether the API server adds GPU tolerations (ExtendedResourceToleration: GKE, AKS, EKS, OKE); "
        "default: detected from the nodes",
    )

    @field_validator("rules", mode="before")
    @classmethod
    def _no_rules(cls, value: Any) -> Any:
        return _none_is_empty(value)

    def to_config(self) -> Config:
        exempt = DEFAULT_EXEMPT_NAMESPACES if self.exempt_namespaces is None else frozenset(self.exempt_namespaces)
        given = self.ignore_annotation
        ignore = given if isinstance(given, bool) else frozenset(given)
        return Config(
            rules=_rule_settings(self.rules),
            mutate=tuple(self.mutate or ()),
            mutate_templates=self.mutate_templates,
            exempt_namespaces=exempt,
            enforcement=self.enforcement,
            warn_namespaces=tuple(self.warn_namespaces or ()),
            ignore_annotation=ignore,
            ignore_rules=frozenset(self.ignore_rules or ()),
            gpu_resource_names=tuple(self.gpu_resource_names or ()),
            extra_workloads=tuple(p.workload() for p in self.extra_workloads or ()),
            failure_mode=self.failure_mode,
            registry=self.registry.settings() if self.registry is not None else RegistrySettings(),
            node_pools=tuple(p.facts() for p in self.node_pools or ()),
            extended_resource_toleration=self.extended_resource_toleration,
        )


TOP_LEVEL_KEYS: tuple[str, ...] = tuple(f.alias or name for name, f in ConfigDocument.model_fields.items())


def load_config(raw: Any) -> Config:
    """Validate a config document (plain data, as YAML loads it) and build the engine's Config;
    raise ConfigProblems (a ConfigError) naming each offending key."""
    if raw is None:
        return Config()
    try:
        document = ConfigDocument.model_validate(raw)
    except ValidationError as exc:
        raise ConfigProblems(problems(exc, raw)) from None
    return document.to_config()


# --- the JSON Schema ---------------------------------------------------------------------------


class _Generator(GenerateJsonSchema):
    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _inline(node: Any, defs: Mapping[str, Any]) -> Any:
    """The schema with every ``$ref`` replaced by its definition (the models are not recursive), so
    it can be embedded anywhere (the Helm chart's values schema); model titles dropped."""
    if isinstance(node, list):
        return [_inline(n, defs) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[1]]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key == "properties":
            out[key] = {name: _inline(sub, defs) for name, sub in value.items()}
        else:
            out[key] = _inline(value, defs)
    return out


@functools.cache
def _schema() -> dict[str, Any]:
    generated = ConfigDocument.model_json_schema(by_alias=True, schema_generator=_Generator)
    defs = generated.pop("$defs", {})
    body: dict[str, Any] = _inline(generated, defs)
    return {"$schema": SCHEMA_DIALECT, "title": SCHEMA_TITLE, **body}


def config_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of a config document, every definition inline."""
    import copy

    return copy.deepcopy(_schema())


def json_text(value: Any, width: int = 110) -> str:
    """JSON as people write schemas: what fits on a line on one line, the rest indented by two."""
    import json

    def dump(item: Any, indent: int, lead: int) -> str:
        flat = json.dumps(item, ensure_ascii=False)
        if not isinstance(item, dict | list) or not item or indent + lead + len(flat) <= width:
            return flat
        pad = " " * (indent + 2)
        if isinstance(item, dict):
            parts = []
            for key, sub in item.items():
                name = json.dumps(key, ensure_ascii=False) + ": "
                parts.append(pad + name + dump(sub, indent + 2, len(name)))
            return "{\n" + ",\n".join(parts) + "\n" + " " * indent + "}"
        return "[\n" + ",\n".join(pad + dump(sub, indent + 2, 0) for sub in item) + "\n" + " " * indent + "]"

    return dump(value, 0, 0) + "\n"


def schema_text() -> str:
    """``gpuguard config schema``: the JSON Schema as deploy/gpuguard-config.schema.json holds it."""
    return json_text(config_schema())


def _branches(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = [node]
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key, ()):
            found.extend(_branches(branch))
    return found


def _subschema(path: Sequence[str | int]) -> Mapping[str, Any]:
    """The schema of the value at ``path`` ({} where the schema says nothing)."""
    node: Mapping[str, Any] = _schema()
    for step in path:
        for branch in _branches(node):
            if isinstance(step, int) and isinstance(branch.get("items"), dict):
                node = branch["items"]
                break
            if isinstance(step, str) and step in branch.get("properties", {}):
                node = branch["properties"][step]
                break
            if isinstance(branch.get("additionalProperties"), dict):
                node = branch["additionalProperties"]
                break
        else:
            return {}
    return node


def _names(node: Mapping[str, Any]) -> list[str]:
    """The keys a mapping schema declares."""
    return [name for branch in _branches(node) for name in branch.get("properties", {})]


def _expected(node: Mapping[str, Any]) -> list[str]:
    """What a schema accepts, in words, as alternatives (null, the default of an optional key, left out)."""
    if "enum" in node or "const" in node:
        return [_got(v).strip("'") for v in node.get("enum", [node.get("const")])]
    kind = node.get("type")
    if kind == "string":
        pattern = node.get("pattern")
        if pattern in _PATTERN_NAMES:
            return [_PATTERN_NAMES[pattern]]
        return ["a non-empty string" if node.get("minLength", 0) >= 1 else "a string"]
    words = {"boolean": ["true", "false"], "integer": ["an integer"], "number": ["a number"],
             "array": ["a list"], "object": ["a mapping"], "null": []}
    if isinstance(kind, str):
        return words.get(kind, [kind])
    alternatives: list[str] = []
    for key in ("anyOf", "oneOf"):
        for branch in node.get(key, ()):
            alternatives.extend(a for a in _expected(branch) if a not in alternatives)
    return alternatives


# --- pydantic's errors in the document's words -------------------------------------------------

_TYPE_WORDS = {
    "string_type": ["a string"],
    "int_type": ["an integer"],
    "float_type": ["a number"],
    "bool_type": ["true", "false"],
    "list_type": ["a list"],
    "dict_type": ["a mapping"],
    "model_type": ["a mapping"],
    "model_attributes_type": ["a mapping"],
    "none_required": ["null"],
}


def _doc_path(raw: Any, loc: Sequence[str | int], missing: bool) -> tuple[tuple[str | int, ...], bool]:
    """The keys and indexes of ``loc`` that are the document's (pydantic adds the names of union
    members and ``[key]``); and whether any were left out."""
    path: list[str | int] = []
    here, skipped = raw, False
    for i, step in enumerate(loc):
        if isinstance(here, Mapping) and _has(here, step):
            path.append(str(step))  # a key (YAML may write a number), never an index
            here = here[step]
        elif isinstance(here, list) and isinstance(step, int) and 0 <= step < len(here):
            path.append(step)
            here = here[step]
        elif missing and i == len(loc) - 1:
            path.append(step)  # the key that is missing
        else:
            skipped = True
    return tuple(path), skipped


def _has(mapping: Mapping[Any, Any], key: Any) -> bool:
    try:
        return key in mapping
    except TypeError:
        return False


def _message(error: Mapping[str, Any], path: tuple[str | int, ...], expected: list[str], literal: bool) -> str:
    kind = error["type"]
    ctx = error.get("ctx") or {}
    value = error.get("input")
    if kind == "gpuguard":
        return str(ctx["message"])
    if kind in ("extra_forbidden", "invalid_key"):
        return _unknown(path)
    if kind == "missing":
        return f"expected {_choices(_expected(_subschema(path)) or ['a value'])} (required), got nothing"
    if expected:
        hint = _did_you_mean(value, expected) if literal and isinstance(value, str) else ""
        return f"expected {_choices(expected, literal)}, got {_got(value)}{hint}"
    if kind == "string_too_short":
        return f"expected a non-empty string, got {_got(value)}"
    if kind == "string_too_long":
        return f"expected at most {ctx['max_length']} characters, got {len(str(value))}"
    if kind == "greater_than_equal":
        return f"must be at least {ctx['ge']:g}, got {_got(value)}"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return str(error["msg"])


def _unknown(path: tuple[str | int, ...]) -> str:
    parent, name = path[:-1], path[-1]
    known = _names(_subschema(parent))
    if parent == ("rules",):
        return "unknown rule id" + (_did_you_mean(name, known) or " (`gpuguard rules` lists them)")
    if len(parent) == 3 and parent[0] == "rules" and parent[2] == "options":
        listing = f"this rule's options: {', '.join(known)}" if known else "this rule has no options"
        return "unknown option" + (_did_you_mean(name, known) or f" ({listing})")
    return "unknown key" + (_did_you_mean(name, known) or f" (expected {_choices(known, literal=True)})")


_TYPED = (*_TYPE_WORDS, "literal_error", "enum", "string_pattern_mismatch")


def _accepted(error: Mapping[str, Any], path: tuple[str | int, ...]) -> tuple[list[str], bool]:
    """What a type or value error says was expected, in words; and whether those are a fixed set
    of values (a Literal) rather than kinds of value."""
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind in _TYPE_WORDS:
        return _TYPE_WORDS[kind], False
    if kind == "string_pattern_mismatch":
        return [_PATTERN_NAMES.get(ctx["pattern"], f"a string matching {ctx['pattern']}")], False
    quoted = re.findall(r"'((?:[^'\\]|\\.)*)'", str(ctx.get("expected", "")))
    return quoted or _expected(_subschema(path)) or [str(error["msg"])], True


def problems(exc: ValidationError, raw: Any) -> list[Problem]:
    """The problems of a ValidationError of ``ConfigDocument``, in the document's words: one per
    offending key (the members of a union that failed at one key are one problem)."""
    located: list[tuple[tuple[str | int, ...], bool, Mapping[str, Any]]] = []
    for details in exc.errors(include_url=False):
        path, skipped = _doc_path(raw, details["loc"], details["type"] == "missing")
        if details["type"] == "gpuguard":
            path += tuple((details.get("ctx") or {}).get("at", ()))
        located.append((path, skipped, details))
    # A union member that failed on the type of a value another member took further is no problem.
    deeper = {p[:i] for p, _, _ in located for i in range(len(p))}
    grouped: dict[tuple[str | int, ...], list[Mapping[str, Any]]] = {}
    for path, skipped, error in located:
        if not (skipped and path in deeper and error["type"] in _TYPE_WORDS):
            grouped.setdefault(path, []).append(error)
    found: list[Problem] = []
    for path, errors in grouped.items():
        typed = [e for e in errors if e["type"] in _TYPED]
        if typed:  # one problem: what every member of the union expected
            expected: list[str] = []
            literal = True
            for error in typed:
                words, is_literal = _accepted(error, path)
                expected.extend(w for w in words if w not in expected)
                literal = literal and is_literal
            found.append(Problem(path, _message(typed[0], path, expected, literal)))
        found.extend(Problem(path, _message(e, path, [], False)) for e in errors if e["type"] not in _TYPED)
    return found

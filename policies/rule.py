"""The rule contract: what a rule module provides (``RuleModule``) and what it receives (``RuleContext``).

Every module under ``policies/rules/`` is checked against ``RuleModule`` by mypy through the typed
registry (``policies.registry.RULES``), so a missing constant or a misspelt ``NEEDS_FACTS`` value
is a type error, not a runtime surprise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import ModuleType
from typing import Any, Literal, Protocol

from policies.applicability import Applies
from policies.dra.facts import DraView
from policies.facts import ClusterFacts
from policies.images import ImageFacts, NoImageFacts
from policies.memo import TemplateAnalysis
from policies.podspec import PodTemplate
from policies.scheduling import Diagnosis, GroupVerdict
from policies.template_inputs import ObjectInputs, TemplateInputs
from policies.types import Severity, Violation

# "no": judged on the object alone; "yes": skipped (with a note) without cluster facts;
# "partly": runs without facts and checks more with them.
NeedsFacts = Literal["no", "yes", "partly"]


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
    """What a template rule sees: one template's ``TemplateInputs`` (policies.template_inputs), the
    facts and its own options — never the raw object or pod, so its results are a function of what
    the rule-results memo key holds."""

    inputs: TemplateInputs
    facts: ClusterFacts
    has_facts: bool
    options: Mapping[str, Any]
    is_gpu: Callable[[str], bool]
    analysis: TemplateAnalysis
    images: ImageFacts = field(default_factory=NoImageFacts)
    # The cluster's DRA facts and the input's DeviceClasses, claims and templates (policies.dra.facts).
    dra: DraView = field(default_factory=lambda: DraView(None))

    @property
    def pod(self) -> PodTemplate:
        """The template as projected for rules (policies.template_inputs.project)."""
        return self.inputs.pod

    @property
    def object(self) -> ObjectInputs:
        """What rules read of the object that holds the template."""
        return self.inputs.of_object

    @property
    def namespace(self) -> str:
        """The object's namespace ("" when it names none)."""
        return self.inputs.of_object.namespace_name

    def gpu_requests(self) -> dict[str, Fraction]:
        """Effective pod requests of GPU devices (quota-like share resources excluded)."""
        return self.analysis.gpu_requests()

    def verdicts(self) -> list[GroupVerdict]:
        """The scheduler model's verdict for each node group (read-only)."""
        return self.analysis.verdicts()

    def diagnosis(self) -> Diagnosis | None:
        """The scheduling diagnosis of a GPU pod against the facts; None without either."""
        return self.analysis.diagnosis()


class RuleModule(Protocol):
    """A module under ``policies/rules/``; its docstring documents it with failing and passing examples."""

    ID: str
    DEFAULT_SEVERITY: Severity
    NEEDS_FACTS: NeedsFacts
    # False: the rule needs no scheduling fields (nodeSelector, tolerations…), so it also judges
    # components whose pod an operator builds (TrainJob trainer, NIMService).
    NEEDS_SCHEDULING: bool
    # None, or a predicate over the template's profile (policies.applicability) that holds whenever
    # ``check`` could find anything; where it is false the engine does not run the rule.
    APPLIES: Applies
    FIXABLE: bool
    # The fix keeps what the pod gets (GPU counts, reserved pools), so the mutating webhook may
    # apply it; False for fixes that need a person's judgement (offered by lint --fix only).
    MUTATION_SAFE: bool
    SUMMARY: str
    REMEDIATION: str
    OPTIONS: tuple[Option, ...]

    def check(self, ctx: RuleContext) -> Iterable[Violation]: ...


@dataclass(slots=True)
class ObjectContext:
    """What an object rule sees: a whole object of a kind gpuguard extracts no pod template from."""

    obj: dict[str, Any]
    is_gpu: Callable[[str], bool]
    options: Mapping[str, Any]
    facts: ClusterFacts = field(default_factory=ClusterFacts.empty)
    has_facts: bool = False
    dra: DraView = field(default_factory=lambda: DraView(None))


class ObjectRuleModule(RuleModule, Protocol):
    """A rule about whole objects of kinds without a known pod template (its ``check`` judges no
    pod template); its violations' paths are relative to the object."""

    def check_object(self, ctx: ObjectContext) -> Iterable[Violation]: ...


@dataclass(slots=True)
class WorkloadContext:
    """What a workload rule sees: a whole object with every pod template extracted from it.

    ``namespace`` is the object's (the webhook fills in the request's when the object names none);
    "" when unknown (a manifest without one), in which case rules about a namespace stay silent.
    """

    obj: dict[str, Any]
    templates: tuple[PodTemplate, ...]
    facts: ClusterFacts
    has_facts: bool
    options: Mapping[str, Any]
    is_gpu: Callable[[str], bool]
    namespace: str = ""


class WorkloadRuleModule(RuleModule, Protocol):
    """A rule about a whole workload object (a gang, its namespace's quotas, its Kueue queue): it
    runs once per object that has GPU pod templates, after the template rules; its ``check`` judges
    no pod template, and its violations' paths are relative to the object."""

    def relevant(self, ctx: WorkloadContext) -> bool:
        """Whether the rule has anything to judge here (for the "skipped without facts" note)."""
        ...

    def check_workload(self, ctx: WorkloadContext) -> Iterable[Violation]: ...


@dataclass(frozen=True, slots=True)
class NodeProblem:
    """A misconfiguration of a node itself, whatever runs on it: said once for the cluster (a note in
    lint, a finding on the Node in audit), while each workload hears only what is specific to it."""

    node: str
    problem: str  # what is wrong there, as a sentence that does not name the node
    path: tuple[str, ...]  # in the Node object
    key: str = ""  # problems with the same key are one problem on several nodes, said together

    def message(self) -> str:
        return f"node {self.node}: {self.problem}"


class ClusterRuleModule(RuleModule, Protocol):
    """A rule that also judges the nodes themselves (``check_cluster``, from the facts alone): the
    faces say each problem once — lint in its notes, audit as a finding on each Node — and the rule's
    per-workload findings say only what the problem means for that workload."""

    def check_cluster(self, facts: ClusterFacts) -> Iterable[NodeProblem]: ...


def rule_doc(module: RuleModule | ModuleType) -> str:
    return (module.__doc__ or "").strip()

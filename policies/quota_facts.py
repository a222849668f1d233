"""Namespace ResourceQuotas as cluster facts, and which of them count a pod.

The API server's ResourceQuota admission refuses a pod whose requests would take a namespace past
``spec.hard``; a controller that creates pods (the Job controller, the training operators) then
records ``FailedCreate`` and retries, so a job never gets all its pods
(kubernetes/website content/en/docs/concepts/policy/resource-quotas.md).  What the pod evaluator
counts (kubernetes/kubernetes pkg/quota/v1/evaluator/core/pods.go, commit 05e7cb29):

* extended resources only as ``requests.<name>`` (``isExtendedResourceNameForQuota``: "only quota
  objects in format of "requests.resourceName" is allowed"); a ``limits.nvidia.com/gpu`` or bare
  ``nvidia.com/gpu`` item is accepted by validation (names with a ``/`` skip the standard-name
  check) but matches no resource the evaluator tracks, so it never refuses a pod;
* ``pods`` (pods not in a terminal phase) and ``count/pods`` (every pod object), one per pod;
* scopes (``podMatchesScopeFunc``): ``Terminating`` / ``NotTerminating`` by
  ``spec.activeDeadlineSeconds >= 0``, ``BestEffort`` / ``NotBestEffort`` by QoS class (only cpu
  and memory requests and limits decide it: pkg/apis/core/v1/helper/qos/qos.go), ``PriorityClass``
  by ``spec.priorityClassName`` (In, NotIn, Exists, DoesNotExist), ``CrossNamespacePodAffinity`` by
  pod (anti-)affinity terms that name namespaces or a namespaceSelector; any other scope matches no
  pod.  A quota counts a pod only when every scope and every ``scopeSelector`` expression matches.

Some answers are not in a pod template: admission may still change them.  A template without a
``priorityClassName`` gets the global default PriorityClass's name (the Priority plugin runs
before quota), and one without cpu/memory requests may get them from a LimitRange (changing its
QoS class); ``scope_match`` answers None ("cannot tell") there, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from policies.podspec import PodTemplate
from policies.quantity import try_parse
from policies.shapes import as_dict, as_list, as_mapping

REQUESTS_PREFIX = "requests."
POD_COUNTS = ("pods", "count/pods")
KNOWN_SCOPES = frozenset(
    {"Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity"}
)
QOS_RESOURCES = ("cpu", "memory")


@dataclass(frozen=True, slots=True)
class ScopeRequirement:
    """One ``scopes`` entry (operator Exists) or ``scopeSelector.matchExpressions`` entry."""

    scope: str
    operator: str = "Exists"
    values: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.operator == "Exists" and not self.values:
            return self.scope
        shown = f" [{', '.join(self.values)}]" if self.values else ""
        return f"{self.scope} {self.operator}{shown}"


@dataclass(frozen=True, slots=True)
class Quota:
    namespace: str
    name: str
    hard: Mapping[str, Fraction]
    used: Mapping[str, Fraction] = field(default_factory=dict)
    scopes: tuple[ScopeRequirement, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def gpu_limit(self, resource: str) -> Fraction | None:
        """The hard limit on ``resource`` requests this quota enforces, or None."""
        return self.hard.get(REQUESTS_PREFIX + resource)

    def pod_limit(self) -> tuple[str, Fraction] | None:
        """The tightest pod-count item (``pods`` or ``count/pods``), or None."""
        found = [(name, self.hard[name]) for name in POD_COUNTS if name in self.hard]
        return min(found, key=lambda item: item[1]) if found else None

    def describe_scopes(self) -> str:
        return ", ".join(s.describe() for s in self.scopes)


@dataclass(frozen=True)
class QuotaFacts:
    """Every namespace's quotas: ``namespace -> quotas`` (in name order)."""

    by_namespace: Mapping[str, tuple[Quota, ...]] = field(default_factory=dict)

    def in_namespace(self, namespace: str) -> tuple[Quota, ...]:
        return self.by_namespace.get(namespace, ())

    @property
    def count(self) -> int:
        return sum(len(q) for q in self.by_namespace.values())

    @classmethod
    def of(cls, quotas: Iterable[Quota]) -> QuotaFacts:
        by: dict[str, list[Quota]] = {}
        for q in quotas:
            by.setdefault(q.namespace, []).append(q)
        return cls({ns: tuple(sorted(qs, key=lambda q: q.name)) for ns, qs in sorted(by.items())})


def _quantities(raw: Any) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, value in as_mapping(raw).items():
        parsed = try_parse(value)
        if isinstance(name, str) and parsed is not None:
            out[name] = parsed
    return out


def _strings(raw: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in as_list(raw) if isinstance(v, str | int) and not isinstance(v, bool))


def quota_from_object(obj: Mapping[str, Any]) -> Quota | None:
    """A ResourceQuota object (API shape) as a Quota; None without a name and namespace."""
    meta = as_mapping(obj.get("metadata"))
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not name or not isinstance(namespace, str) or not namespace:
        return None
    spec = as_mapping(obj.get("spec"))
    scopes = [ScopeRequirement(str(s)) for s in as_list(spec.get("scopes")) if isinstance(s, str)]
    for expr in as_list(as_mapping(spec.get("scopeSelector")).get("matchExpressions")):
        if isinstance(expr, Mapping) and isinstance(expr.get("scopeName"), str):
            operator = str(expr.get("operator") or "")
            scopes.append(ScopeRequirement(expr["scopeName"], operator, _strings(expr.get("values"))))
    return Quota(
        namespace=namespace,
        name=name,
        hard=_quantities(spec.get("hard")),
        used=_quantities(as_mapping(obj.get("status")).get("used")),
        scopes=tuple(scopes),
    )


def is_resource_quota(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == "ResourceQuota" and obj.get("apiVersion") in ("v1", None)


def quota_facts_from_objects(objects: Iterable[Mapping[str, Any]]) -> QuotaFacts | None:
    """QuotaFacts of the ResourceQuota objects among ``objects``; None when there is none."""
    quotas = [q for q in (quota_from_object(o) for o in objects if is_resource_quota(o)) if q is not None]
    return QuotaFacts.of(quotas) if quotas else None


# --- which quotas count a pod -------------------------------------------------------------------


def _has_qos_resources(pod: PodTemplate) -> bool:
    spec_resources = as_dict(pod.spec.get("resources"))
    if any(as_dict(spec_resources.get(w)).get(r) is not None for w in ("requests", "limits") for r in QOS_RESOURCES):
        return True
    for c in pod.containers:
        if c.kind == "ephemeralContainer":
            continue
        for which in ("requests", "limits"):
            for r in QOS_RESOURCES:
                q = try_parse(c.resource_map(which).get(r))
                if q is not None and q > 0:
                    return True
    return False


def _terminating(pod: PodTemplate) -> bool:
    deadline = pod.spec.get("activeDeadlineSeconds")
    return isinstance(deadline, int) and not isinstance(deadline, bool) and deadline >= 0


def _cross_namespace_affinity(pod: PodTemplate) -> bool:
    affinity = as_dict(pod.spec.get("affinity"))
    for kind in ("podAffinity", "podAntiAffinity"):
        section = as_dict(affinity.get(kind))
        terms = list(as_list(section.get("requiredDuringSchedulingIgnoredDuringExecution")))
        preferred = as_list(section.get("preferredDuringSchedulingIgnoredDuringExecution"))
        terms += [as_dict(w).get("podAffinityTerm") for w in preferred]
        for term in terms:
            term = as_dict(term)
            if as_list(term.get("namespaces")) or term.get("namespaceSelector") is not None:
                return True
    return False


def _priority_matches(requirement: ScopeRequirement, name: str) -> bool:
    op = requirement.operator
    if op == "Exists":
        return bool(name)
    if op == "DoesNotExist":
        return not name
    if op == "In":
        return bool(name) and name in requirement.values
    if op == "NotIn":
        return not name or name not in requirement.values
    return False


def scope_match(requirement: ScopeRequirement, pod: PodTemplate) -> tuple[bool | None, str]:
    """Whether the requirement counts pods of ``pod`` (None: cannot tell), and why not known."""
    scope = requirement.scope
    if scope in ("Terminating", "NotTerminating"):
        return _terminating(pod) == (scope == "Terminating"), ""
    if scope in ("BestEffort", "NotBestEffort"):
        if _has_qos_resources(pod):
            return scope == "NotBestEffort", ""
        return None, "the pod sets no cpu or memory, so its QoS class depends on LimitRange defaults"
    if scope == "PriorityClass":
        name = pod.spec.get("priorityClassName")
        if isinstance(name, str) and name:
            return _priority_matches(requirement, name), ""
        return None, "the pod names no PriorityClass, so it gets the global default one (if any) at admission"
    if scope == "CrossNamespacePodAffinity":
        return _cross_namespace_affinity(pod), ""
    return False, ""  # VolumeAttributesClass and unknown scopes count no pod


def counts_pod(quota: Quota, pod: PodTemplate) -> tuple[bool | None, str]:
    """Whether ``quota`` counts pods of ``pod``: True, False, or None (cannot tell) with why."""
    unknown = ""
    for requirement in quota.scopes:
        matched, why = scope_match(requirement, pod)
        if matched is False:
            return False, ""
        if matched is None:
            unknown = unknown or f"scope {requirement.describe()}: {why}"
    return (None, unknown) if unknown else (True, "")

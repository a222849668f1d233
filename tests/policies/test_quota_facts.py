"""policies.quota_facts: ResourceQuotas as facts, and which quotas count a pod (kubernetes/kubernetes
pkg/quota/v1/evaluator/core/pods.go ``podMatchesScopeFunc``, ``isExtendedResourceNameForQuota``)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from policies.facts_build import facts_from_objects
from policies.podspec import extract
from policies.quota_facts import ScopeRequirement, counts_pod, quota_from_object, scope_match


def _quota(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "ml"}, "spec": spec}


def _pod(**spec: Any) -> Any:
    spec.setdefault("containers", [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}])
    (pod,) = extract({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    return pod


def test_quota_items_and_scopes_are_read() -> None:
    quota = quota_from_object(_quota(
        hard={"requests.nvidia.com/gpu": "16", "limits.nvidia.com/gpu": "4", "pods": "10", "count/pods": "20"},
        scopes=["NotTerminating"],
        scopeSelector={"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["low"]}]},
    ))
    assert quota is not None
    assert quota.gpu_limit("nvidia.com/gpu") == 16  # limits.<gpu> limits nothing for pods
    assert quota.pod_limit() == ("pods", Fraction(10))
    assert [s.describe() for s in quota.scopes] == ["NotTerminating", "PriorityClass In [low]"]


def test_quotas_without_name_or_namespace_are_skipped_and_lists_load() -> None:
    no_namespace = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {}}
    assert quota_from_object(no_namespace) is None
    listed = {"apiVersion": "v1", "kind": "ResourceQuotaList", "items": [
        {"metadata": {"name": "b", "namespace": "ml"}, "spec": {"hard": {"requests.nvidia.com/gpu": 2}}},
        {"metadata": {"name": "a", "namespace": "ml"}, "spec": {"hard": {"requests.nvidia.com/gpu": 1}}},
    ]}
    quotas = facts_from_objects([listed]).quotas
    assert quotas is not None and [q.name for q in quotas.in_namespace("ml")] == ["a", "b"]
    assert facts_from_objects([]).quotas is None


@pytest.mark.parametrize(("scope", "spec", "expected"), [
    ("Terminating", {"activeDeadlineSeconds": 60}, True),
    ("Terminating", {}, False),
    ("NotTerminating", {}, True),
    ("NotBestEffort", {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}, True),
    ("BestEffort", {"containers": [{"name": "c", "resources": {"limits": {"memory": "1Gi"}}}]}, False),
    ("BestEffort", {}, None),  # GPU only: a LimitRange may still give it cpu/memory
    ("CrossNamespacePodAffinity", {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "namespaces": ["other"]}]}}}, True),
    ("CrossNamespacePodAffinity", {}, False),
    ("VolumeAttributesClass", {}, False),
])
def test_scopes(scope: str, spec: dict[str, Any], expected: bool | None) -> None:
    assert scope_match(ScopeRequirement(scope), _pod(**spec))[0] is expected


@pytest.mark.parametrize(("operator", "values", "name", "expected"), [
    ("In", ("low",), "low", True),
    ("In", ("low",), "high", False),
    ("NotIn", ("low",), "high", True),
    ("Exists", (), "high", True),
    ("DoesNotExist", (), "high", False),
    ("In", ("low",), "", None),  # the default PriorityClass decides
])
def test_priority_class_scope(operator: str, values: tuple[str, ...], name: str, expected: bool | None) -> None:
    pod = _pod(priorityClassName=name) if name else _pod()
    assert scope_match(ScopeRequirement("PriorityClass", operator, values), pod)[0] is expected


def test_every_scope_must_match() -> None:
    quota = quota_from_object(_quota(hard={"requests.nvidia.com/gpu": "1"}, scopes=["NotTerminating", "Terminating"]))
    assert quota is not None
    assert counts_pod(quota, _pod())[0] is False
    unsure = quota_from_object(_quota(hard={}, scopes=["NotTerminating", "BestEffort"]))
    assert unsure is not None
    matched, why = counts_pod(unsure, _pod())
    assert matched is None and "LimitRange" in why

"""The Helm chart grants the webhook the same read-only cluster-fact permissions as deploy/rbac.yaml,
DRA's resource.k8s.io objects, ResourceQuotas and Kueue's queues included (rendered with the real helm)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deploy.test_deploy import DOCS as KUSTOMIZE_DOCS
from tests.support.helm_chart import only, render

pytestmark = pytest.mark.integration


def grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def test_the_chart_role_reads_what_the_kustomize_role_reads(tmp_path: Path) -> None:
    chart = grants(only(render(tmp_path), "ClusterRole"))
    kustomize = grants(only(KUSTOMIZE_DOCS, "ClusterRole"))
    assert chart == kustomize
    assert {r for g, r, _ in chart if g == "resource.k8s.io"} == {
        "deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"}
    assert {r for g, r, _ in chart if g == "kueue.x-k8s.io"} == {
        "localqueues", "clusterqueues", "resourceflavors", "cohorts"}
    assert {(g, r, v) for g, r, v in chart if r == "resourcequotas"} == {
        ("", "resourcequotas", v) for v in ("get", "list", "watch")}

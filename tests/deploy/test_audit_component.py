"""deploy/audit: the periodic audit as a kustomize Component, with exactly the RBAC it needs and off by default."""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from tests.support.paths import ROOT, load_yaml_docs
from tests.support.tools import tool
from webhook import cmd_serve
from webhook.periodic_audit import parse_interval

AUDIT = ROOT / "deploy" / "audit"
KUBERNETES_VERSION = "1.33.0"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("generate_rbac", AUDIT / "generate_rbac.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


def test_rbac_yaml_is_generated() -> None:
    assert (AUDIT / "rbac.yaml").read_text() == _generator().render(), "run: python deploy/audit/generate_rbac.py"


def test_the_audit_lists_every_kind_it_reads_and_writes_only_reports() -> None:
    role, binding = load_yaml_docs(AUDIT / "rbac.yaml")
    workloads = {(w.group, w.resource) for w in load_config(None).workload_index.values()}
    expected = {(g, r, "list") for g, r in workloads}
    expected |= {("resource.k8s.io", r, "list") for r in ("resourceclaims", "resourceclaimtemplates")}  # DRA claims
    expected |= {("wgpolicyk8s.io", r, v) for r in ("policyreports", "clusterpolicyreports")
                 for v in ("get", "list", "create", "update")}
    assert grants(role) == expected
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpuguard", "namespace": "gpuguard"}]


@pytest.mark.parametrize("doc", load_yaml_docs(AUDIT / "rbac.yaml"), ids=lambda d: d["kind"])
def test_manifests_are_valid(doc: dict[str, Any]) -> None:
    import kubernetes_validate

    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def build(kubectl: Path, directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run([str(kubectl), "kustomize", str(directory)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.mark.integration
def test_the_component_turns_the_audit_on_and_the_base_leaves_it_off(tmp_path: Path) -> None:
    kubectl = tool("kubectl")
    shutil.copytree(ROOT / "deploy", tmp_path / "deploy")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("resources: [../deploy]\ncomponents: [../deploy/audit]\n")
    base, audited = build(kubectl, tmp_path / "deploy"), build(kubectl, overlay)

    def deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
        (found,) = [d for d in docs if d["kind"] == "Deployment"]
        return found

    def roles(docs: list[dict[str, Any]]) -> set[str]:
        return {d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRole"}

    assert roles(base) == {"gpuguard-cluster-facts"} and roles(audited) == {"gpuguard-cluster-facts", "gpuguard-audit"}
    args = deployment(audited)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--audit-interval" not in deployment(base)["spec"]["template"]["spec"]["containers"][0]["args"]
    parser = argparse.ArgumentParser()
    cmd_serve.add_arguments(parser)
    parsed = parser.parse_args(args[1:])
    assert parsed.in_cluster and parse_interval(parsed.audit_interval) == 3600
    assert parsed.audit_reports == "policyreport"
    assert len(audited) == len(base) + 2

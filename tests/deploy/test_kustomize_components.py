"""The kustomize install built by the real kubectl (kustomize v5): the base in deploy/ and its
optional components (cert-manager, ServiceMonitor, NetworkPolicy), every object valid, and the same
objects as the Helm chart renders for the same choice."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.crd_schema import load_crds, manifest_problems
from tests.support.helm_chart import documents, only, render
from tests.support.paths import ROOT
from tests.support.tools import tool

pytestmark = pytest.mark.integration

DEPLOY = ROOT / "deploy"
COMPONENTS = DEPLOY / "components"
CRDS = load_crds()
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def kustomize(directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(tool("kubectl")), "kustomize", str(directory)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return documents(done.stdout)


def overlay(tmp: Path, *components: str) -> list[dict[str, Any]]:
    """Build a kustomization beside nothing of ours: the base and the named components, referenced by
    relative paths (kustomize refuses absolute ones)."""
    base = os.path.relpath(DEPLOY, tmp)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [base],
        "components": [f"{base}/components/{c}" for c in components],
    }
    (tmp / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return kustomize(tmp)


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    """An object without what Helm adds to a release's objects (labels and the instance selector)."""
    out: dict[str, Any] = yaml.safe_load(yaml.safe_dump(obj))
    out["metadata"].pop("labels", None)
    for holder in (out.get("spec", {}), out.get("spec", {}).get("selector", {}), out.get("spec", {}).get("podSelector", {})):
        if isinstance(holder, dict):
            for key in ("matchLabels", "selector"):
                if isinstance(holder.get(key), dict):
                    holder[key].pop("app.kubernetes.io/instance", None)
    return out


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


COMBINATIONS = {
    "base": (),
    "cert-manager": ("cert-manager",),
    "service-monitor": ("service-monitor",),
    "network-policy": ("network-policy",),
    "network-policy-registries": ("network-policy", "network-policy-registries"),
    "all": ("cert-manager", "service-monitor", "network-policy", "network-policy-registries"),
}


@pytest.mark.parametrize("name", COMBINATIONS)
def test_every_built_object_is_valid(tmp_path: Path, name: str) -> None:
    docs = overlay(tmp_path, *COMBINATIONS[name])
    problems = {f"{d['kind']}/{d['metadata']['name']}": manifest_problems(d, CRDS) for d in docs}
    assert {k: v for k, v in problems.items() if v} == {}


def test_components_add_only_their_objects(tmp_path: Path) -> None:
    def names(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
        return {(d["kind"], d["metadata"]["name"]) for d in docs}

    base = names(kustomize(DEPLOY))
    added = {
        "cert-manager": {("Issuer", "gpuguard-selfsigned"), ("Issuer", "gpuguard-ca"),
                         ("Certificate", "gpuguard-ca"), ("Certificate", "gpuguard-serving")},
        "service-monitor": {("Service", "gpuguard-metrics"), ("ServiceMonitor", "gpuguard")},
        "network-policy": {("NetworkPolicy", "gpuguard")},
    }
    for component, objects in added.items():
        target = tmp_path / component
        target.mkdir()
        assert names(overlay(target, component)) == base | objects, component


def test_base_runs_with_the_priority_class_its_quota_allows() -> None:
    docs = kustomize(DEPLOY)
    pod = only(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    quota = only(docs, "ResourceQuota")
    assert quota["metadata"]["namespace"] == only(docs, "Deployment")["metadata"]["namespace"]
    (scope,) = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert scope == {"scopeName": "PriorityClass", "operator": "In", "values": [pod["priorityClassName"]]}
    assert int(quota["spec"]["hard"]["pods"]) >= 2 * only(docs, "Deployment")["spec"]["replicas"]


def test_cert_manager_component(tmp_path: Path) -> None:
    docs = overlay(tmp_path, "cert-manager")
    serving = only(docs, "Certificate", "gpuguard-serving")
    namespace = serving["metadata"]["namespace"]
    for config in (d for d in docs if d["kind"] in WEBHOOK_KINDS):
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{namespace}/gpuguard-serving"
        (webhook,) = config["webhooks"]
        service = webhook["clientConfig"]["service"]
        assert f"{service['name']}.{service['namespace']}.svc" in serving["spec"]["dnsNames"]
    volumes = {v["name"]: v for v in only(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == serving["spec"]["secretName"]
    ca_issuer = only(docs, "Issuer", serving["spec"]["issuerRef"]["name"])
    ca = only(docs, "Certificate", "gpuguard-ca")
    assert ca_issuer["spec"]["ca"]["secretName"] == ca["spec"]["secretName"] and ca["spec"]["isCA"] is True
    assert only(docs, "Issuer", ca["spec"]["issuerRef"]["name"])["spec"] == {"selfSigned": {}}


def test_cert_manager_component_matches_the_chart(tmp_path: Path) -> None:
    chart = render(tmp_path, {"certificates": {"mode": "certManager"}})
    built = overlay(tmp_path, "cert-manager")
    for kind in ("Certificate", "Issuer"):
        ours = sorted((_strip(d) for d in chart if d["kind"] == kind), key=lambda d: d["metadata"]["name"])
        theirs = sorted((_strip(d) for d in built if d["kind"] == kind), key=lambda d: d["metadata"]["name"])
        assert ours == theirs, kind
    for kind in WEBHOOK_KINDS:
        assert only(chart, kind)["metadata"]["annotations"] == only(built, kind)["metadata"]["annotations"]


def test_service_monitor_component_matches_the_chart(tmp_path: Path) -> None:
    chart = render(tmp_path, {"serviceMonitor": {"enabled": True}})
    built = overlay(tmp_path, "service-monitor")
    assert _strip(only(chart, "ServiceMonitor")) == _strip(only(built, "ServiceMonitor"))
    assert _strip(only(chart, "Service", "gpuguard-metrics")) == _strip(only(built, "Service", "gpuguard-metrics"))
    monitor = only(built, "ServiceMonitor")
    metrics = only(built, "Service", "gpuguard-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= metrics["metadata"]["labels"].items()
    assert not monitor["spec"]["selector"]["matchLabels"].items() <= only(built, "Service", "gpuguard")["metadata"][
        "labels"
    ].items()


def test_network_policy_components_match_the_chart(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    chart = only(render(tmp_path, {"networkPolicy": {"enabled": True}}), "NetworkPolicy")
    built = only(overlay(tmp_path / "a", "network-policy"), "NetworkPolicy")
    assert _strip(chart) == _strip(built)

    with_registries = only(
        render(tmp_path, {"networkPolicy": {"enabled": True}, "config": {"registry": {"enabled": True}}}), "NetworkPolicy"
    )
    policies = [d for d in overlay(tmp_path / "b", "network-policy", "network-policy-registries") if d["kind"] == "NetworkPolicy"]
    egress = [rule for p in policies for rule in p["spec"].get("egress", [])]  # NetworkPolicies add up
    assert sorted(map(_canonical, egress)) == sorted(map(_canonical, with_registries["spec"]["egress"]))
    selectors = {_canonical(_strip(p)["spec"]["podSelector"]) for p in policies}
    assert selectors == {_canonical(_strip(with_registries)["spec"]["podSelector"])}


def test_readme_overlay_builds(tmp_path: Path) -> None:
    """The README's cert-manager overlay, with its path to the checkout made relative to here."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"# gpuguard-cert-manager/kustomization\.yaml\n(.*?)```", readme, re.DOTALL)
    assert block, "the README shows the cert-manager overlay"
    base = os.path.relpath(DEPLOY, tmp_path)
    text = block.group(1).replace("../gpuguard/deploy", base)
    (tmp_path / "kustomization.yaml").write_text(text)
    docs = kustomize(tmp_path)
    assert {d["kind"] for d in docs} >= {"Certificate", "Issuer", "Deployment", "MutatingWebhookConfiguration"}
    for config in (d for d in docs if d["kind"] in WEBHOOK_KINDS):
        assert "cert-manager.io/inject-ca-from" in config["metadata"]["annotations"]

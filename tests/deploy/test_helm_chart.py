"""The Helm chart in deploy/helm/gpuguard, rendered by the real helm: lint, valid manifests for every
option, parity with the kustomize install, and the webhook configurations of the same generator."""

from __future__ import annotations

import base64
import copy
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuguard.sources.configmodel import load_config
from gpuguard.sources.yamlsafe import load_all_plain
from tests.deploy.test_deploy import DOCS as KUSTOMIZE_DOCS
from tests.deploy.test_deploy import WEBHOOK_KINDS
from tests.support.crd_schema import load_crds, manifest_problems
from tests.support.helm_chart import CHART, documents, helm, kinds, only, render, template, values_file
from tests.support.paths import ROOT
from webhook.configuration import render as render_webhooks

pytestmark = pytest.mark.integration

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
CRDS = load_crds()
PEM_CA = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ2E=\n-----END CERTIFICATE-----\n"

# Each option the chart has, enabled (the default values are the first case).
OPTIONS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "cert-manager": {"certificates": {"mode": "certManager"}},
    "cert-manager-own-issuer": {
        "certificates": {"mode": "certManager", "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}}
    },
    "existing-secret": {"certificates": {"mode": "secret", "secret": {"name": "my-tls", "caBundle": PEM_CA}}},
    "service-monitor": {"serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}}},
    "network-policy": {"networkPolicy": {"enabled": True}},
    "network-policy-registries": {
        "networkPolicy": {
            "enabled": True,
            "webhookFrom": [{"ipBlock": {"cidr": "10.0.0.0/24"}}],
            "healthFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
            "apiServer": {"cidrs": ["10.0.0.10/32"]},
            "registries": {"ports": [443, 5000], "cidrs": ["0.0.0.0/0"]},
        },
        "config": {"registry": {"enabled": True}},
    },
    "one-replica-no-priority": {"replicaCount": 1, "priorityClassName": ""},
    "fail-closed": {"failurePolicy": "Fail", "timeoutSeconds": 10},
    "custom-image": {"image": {"repository": "registry.example.com/gpuguard", "tag": "dev"}},
    "scheduling": {
        "topologySpread": {"enabled": False},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}]}
        ]}}},
        "imagePullSecrets": [{"name": "pull"}],
        "podAnnotations": {"example.com/a": "b"},
        "registryAuthSecret": "",
    },
}


def _webhooks(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs if d["kind"] in WEBHOOK_KINDS}


def _policy(docs: list[dict[str, Any]]) -> dict[str, Any]:
    text = only(docs, "ConfigMap")["data"][".gpuguard.yaml"]
    (raw,) = list(load_all_plain(text, ".gpuguard.yaml"))
    assert isinstance(raw, dict)
    return raw


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = only(docs, "Deployment")["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize("name", OPTIONS)
def test_helm_lint_passes(tmp_path: Path, name: str) -> None:
    args = ["lint", "--strict", str(CHART), "--namespace", "gpuguard"]
    if OPTIONS[name]:
        args += ["--values", str(values_file(tmp_path, OPTIONS[name]))]
    done = helm(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


@pytest.mark.parametrize("name", OPTIONS)
def test_every_rendered_manifest_is_valid(tmp_path: Path, name: str) -> None:
    docs = render(tmp_path, OPTIONS[name])
    problems = {f"{d['kind']}/{d['metadata']['name']}": manifest_problems(d, CRDS) for d in docs}
    assert {k: v for k, v in problems.items() if v} == {}
    assert all(d["metadata"].get("namespace", "gpuguard") == "gpuguard" for d in docs)


def test_each_option_renders_its_objects(tmp_path: Path) -> None:
    base = kinds(render(tmp_path, OPTIONS["defaults"]))
    assert base == sorted([
        "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "MutatingWebhookConfiguration",
        "PodDisruptionBudget", "ResourceQuota", "Secret", "Service", "ServiceAccount", "ValidatingWebhookConfiguration",
    ])
    no_secret = sorted(k for k in base if k != "Secret")
    assert kinds(render(tmp_path, OPTIONS["cert-manager"])) == sorted([*no_secret, "Certificate", "Certificate",
                                                                        "Issuer", "Issuer"])
    assert kinds(render(tmp_path, OPTIONS["cert-manager-own-issuer"])) == sorted([*no_secret, "Certificate"])
    assert kinds(render(tmp_path, OPTIONS["existing-secret"])) == no_secret
    assert kinds(render(tmp_path, OPTIONS["service-monitor"])) == sorted([*base, "Service", "ServiceMonitor"])
    assert kinds(render(tmp_path, OPTIONS["network-policy"])) == sorted([*base, "NetworkPolicy"])
    single = kinds(render(tmp_path, OPTIONS["one-replica-no-priority"]))
    assert single == sorted(k for k in base if k not in ("PodDisruptionBudget", "ResourceQuota"))


# --- the webhook configurations: the generator's, with the release's values -------------------


def test_rules_and_match_conditions_are_the_kustomize_ones(tmp_path: Path) -> None:
    chart = _webhooks(render(tmp_path))
    kustomize = {d["kind"]: d for d in KUSTOMIZE_DOCS if d["kind"] in WEBHOOK_KINDS}
    assert set(chart) == set(kustomize) == set(WEBHOOK_KINDS)
    for kind in WEBHOOK_KINDS:
        (ours,), (theirs,) = chart[kind]["webhooks"], kustomize[kind]["webhooks"]
        assert ours["rules"] == theirs["rules"]
        assert ours["matchConditions"] == theirs["matchConditions"]
        # with the release named and placed like the kustomize install, everything but the CA agrees
        ours = {k: v for k, v in ours.items()}
        ours["clientConfig"] = {k: v for k, v in ours["clientConfig"].items() if k != "caBundle"}
        assert ours == theirs


def test_exempt_namespaces_flow_into_the_config_and_the_namespace_selector(tmp_path: Path) -> None:
    docs = render(tmp_path, {"config": {"exemptNamespaces": ["kube-system", "infra"]}}, namespace="platform")
    expected = ["infra", "kube-system", "platform"]  # the release namespace is always exempt
    assert load_config(_policy(docs)).exempt_namespaces == frozenset(expected)
    for config in _webhooks(docs).values():
        (webhook,) = config["webhooks"]
        label, expr = webhook["namespaceSelector"]["matchExpressions"]
        assert label == {"key": "gpuguard.io/exempt", "operator": "NotIn", "values": ["true"]}
        assert expr == {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": expected}
        assert webhook["clientConfig"]["service"]["namespace"] == "platform"


def test_gpu_resource_names_flow_into_the_match_condition(tmp_path: Path) -> None:
    names = ["example.com/fpga", "nvidia.com/gpu", "habana.ai/gaudi"]
    docs = render(tmp_path, {"config": {"gpuResourceNames": names}})
    expected = yaml.safe_load(render_webhooks(load_config({"gpuResourceNames": names})).split("---\n")[1])
    (webhook,) = _webhooks(docs)["ValidatingWebhookConfiguration"]["webhooks"]
    assert webhook["matchConditions"] == expected["webhooks"][0]["matchConditions"]
    assert "n in ['example.com/fpga', 'habana.ai/gaudi']" in webhook["matchConditions"][2]["expression"]
    assert load_config(_policy(docs)).gpu_resource_names == tuple(names)


def test_names_that_cel_cannot_quote_are_refused(tmp_path: Path) -> None:
    done = template(tmp_path, {"config": {"gpuResourceNames": ["example.com/it's"]}})
    assert done.returncode != 0
    assert "config.gpuResourceNames: \"example.com/it's\" cannot be quoted in CEL" in done.stderr


def test_pod_template_paths_are_refused_with_the_way_out(tmp_path: Path) -> None:
    done = template(tmp_path, {"config": {"podTemplatePaths": [
        {"apiVersion": "example.com/v1", "kind": "Trainer", "template": "/spec/template"}
    ]}})
    assert done.returncode != 0
    assert "config.podTemplatePaths" in done.stderr and "gpuguard webhook-config" in done.stderr
    # one gpuguard itself would refuse is refused by the schema, at its key
    done = template(tmp_path, {"config": {"podTemplatePaths": [
        {"apiVersion": "example.com/v1", "kind": "Trainer", "paths": ["spec/template"]}
    ]}})
    assert done.returncode != 0 and "at '/config/podTemplatePaths/0'" in done.stderr


def test_failure_policy_and_timeout(tmp_path: Path) -> None:
    webhooks = _webhooks(render(tmp_path, OPTIONS["fail-closed"]))
    (validating,) = webhooks["ValidatingWebhookConfiguration"]["webhooks"]
    (mutating,) = webhooks["MutatingWebhookConfiguration"]["webhooks"]
    assert (validating["failurePolicy"], validating["timeoutSeconds"]) == ("Fail", 10)
    assert (mutating["failurePolicy"], mutating["timeoutSeconds"]) == ("Ignore", 10)  # fixes are optional


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"failurePolicy": "Deny"}, "at '/failurePolicy'"),
        ({"timeoutSeconds": 31}, "at '/timeoutSeconds': maximum: got 31, want 30"),
        ({"timeoutSeconds": 0}, "at '/timeoutSeconds': minimum: got 0, want 1"),
        ({"replicas": 3}, "additional properties 'replicas' not allowed"),
        ({"certificates": {"mode": "acme"}}, "at '/certificates/mode'"),
        ({"config": {"exemptNamespaces": ["Kube_System"]}}, "at '/config/exemptNamespaces/0'"),
        ({"certificates": {"mode": "secret"}}, "certificates.secret.name: certificates.mode secret needs"),
        ({"certificates": {"mode": "secret", "secret": {"name": "t"}}}, "certificates.secret.caBundle: certificates.mode"),
        ({"certificates": {"mode": "secret", "secret": {"name": "t", "caBundle": "bm90IGEgY2VydA=="}}},
         "certificates.secret.caBundle: neither a PEM certificate"),
    ],
)
def test_bad_values_are_refused_with_a_precise_message(tmp_path: Path, values: dict[str, Any], message: str) -> None:
    done = template(tmp_path, values)
    assert done.returncode != 0
    assert message in done.stderr
    assert "panic" not in done.stderr and "goroutine" not in done.stderr


def test_the_schema_knows_the_policy_keys() -> None:
    import json

    from gpuguard.sources.configmodel import TOP_LEVEL_KEYS

    schema = json.loads((CHART / "values.schema.json").read_text())["properties"]["config"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == set(TOP_LEVEL_KEYS)


@pytest.mark.parametrize(
    ("key", "value"),
    [("enforcement", "enforce"), ("enforcement", "warn"), ("enforcement", "audit"),
     ("failureMode", "allow"), ("failureMode", "deny"), ("failureMode", "ignore"), ("enforcment", "warn"),
     ("rules", {"gpu-shared-memory": False}), ("rules", {"gpu-shared-memory": {"severity": "Warning"}}),
     ("rules", {"gpu-shared-memorry": "off"}), ("rules", {"gpu-runtime-class": {"options": {"required": "nvidia"}}}),
     ("rules", {"gpu-runtime-class": {"options": {"requird": "nvidia"}}}),
     ("rules", {"gpu-topology-alignment": {"options": {"gpusPerNumaNode": "4"}}}),
     ("mutate", ["gpu-shared-memory"]), ("mutate", ["gpu-whole-number"]),
     ("registry", {"enabled": True, "timeoutSeconds": 2.5}), ("registry", {"timeoutSeconds": 0}),
     ("nodePools", [{"name": "l4", "resources": {"nvidia.com/gpu": 2}}]), ("nodePools", [{"labels": {}}])],
)
def test_the_chart_accepts_a_policy_value_when_gpuguard_does(tmp_path: Path, key: str, value: Any) -> None:
    """The chart's config schema is gpuguard's (deploy/generate_config_schema.py): helm refuses at
    install what the pods would refuse at start."""
    from policies.config import ConfigError

    try:
        load_config({key: value})
        accepted = True
    except ConfigError:
        accepted = False
    done = template(tmp_path, {"config": {key: value}})
    assert (done.returncode == 0) is accepted, done.stderr
    if not accepted:
        assert "/config" in done.stderr


# --- certificates ------------------------------------------------------------------------------


def test_self_signed_secret_and_ca_bundle_agree(tmp_path: Path) -> None:
    docs = render(tmp_path)
    secret = only(docs, "Secret")
    assert secret["type"] == "kubernetes.io/tls"
    assert secret["metadata"]["name"] == "gpuguard-tls"
    for config in _webhooks(docs).values():
        (webhook,) = config["webhooks"]
        assert webhook["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
        assert "annotations" not in config["metadata"]
    volumes = {v["name"]: v for v in _pod(docs)["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "gpuguard-tls"


def test_cert_manager_issues_the_mounted_secret_and_injects_its_ca(tmp_path: Path) -> None:
    docs = render(tmp_path, OPTIONS["cert-manager"], release="gg", namespace="gpu-policy")
    serving = only(docs, "Certificate", "gg-gpuguard-serving")
    ca = only(docs, "Certificate", "gg-gpuguard-ca")
    ca_issuer = only(docs, "Issuer", "gg-gpuguard-ca")
    selfsigned = only(docs, "Issuer", "gg-gpuguard-selfsigned")
    assert selfsigned["spec"] == {"selfSigned": {}}
    assert ca["spec"]["isCA"] is True and ca["spec"]["issuerRef"]["name"] == "gg-gpuguard-selfsigned"
    assert ca_issuer["spec"] == {"ca": {"secretName": ca["spec"]["secretName"]}}
    assert serving["spec"]["issuerRef"] == {"group": "cert-manager.io", "kind": "Issuer", "name": "gg-gpuguard-ca"}
    # the API server dials SERVICE.NAMESPACE.svc; the certificate names it
    service = only(docs, "Service")["metadata"]["name"]
    assert f"{service}.gpu-policy.svc" in serving["spec"]["dnsNames"]
    assert "server auth" in serving["spec"]["usages"]
    volumes = {v["name"]: v for v in _pod(docs)["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == serving["spec"]["secretName"]
    for config in _webhooks(docs).values():
        assert config["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": "gpu-policy/gg-gpuguard-serving"}
        (webhook,) = config["webhooks"]
        assert "caBundle" not in webhook["clientConfig"]  # the CA injector writes it
    assert not [d for d in docs if d["kind"] == "Secret"]


def test_cert_manager_with_an_issuer_of_yours(tmp_path: Path) -> None:
    docs = render(tmp_path, OPTIONS["cert-manager-own-issuer"])
    serving = only(docs, "Certificate")
    assert serving["spec"]["issuerRef"] == {"name": "corp-ca", "kind": "ClusterIssuer"}
    assert not [d for d in docs if d["kind"] == "Issuer"]


@pytest.mark.parametrize("encoded", [False, True])
def test_existing_secret_and_its_ca(tmp_path: Path, encoded: bool) -> None:
    ca = base64.b64encode(PEM_CA.encode()).decode() if encoded else PEM_CA
    docs = render(tmp_path, {"certificates": {"mode": "secret", "secret": {"name": "my-tls", "caBundle": ca}}})
    volumes = {v["name"]: v for v in _pod(docs)["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "my-tls"
    for config in _webhooks(docs).values():
        (webhook,) = config["webhooks"]
        assert base64.b64decode(webhook["clientConfig"]["caBundle"]).decode() == PEM_CA
    assert not [d for d in docs if d["kind"] in ("Secret", "Certificate", "Issuer")]


# --- the rest of the install -------------------------------------------------------------------


def test_default_config_is_the_kustomize_config(tmp_path: Path) -> None:
    kustomize_text = next(d for d in KUSTOMIZE_DOCS if d["kind"] == "ConfigMap")["data"][".gpuguard.yaml"]
    (kustomize_raw,) = list(load_all_plain(kustomize_text, "deploy/gpuguard-config.yaml"))
    assert _policy(render(tmp_path)) == kustomize_raw
    assert load_config(_policy(render(tmp_path))) == load_config(kustomize_raw)


def test_pods_roll_when_the_config_changes_and_only_then(tmp_path: Path) -> None:
    def checksum(values: dict[str, Any]) -> str:
        pod = only(render(tmp_path, values), "Deployment")["spec"]["template"]
        value: str = pod["metadata"]["annotations"]["checksum/config"]
        return value

    base = checksum({})
    assert checksum({}) == base
    assert checksum({"replicaCount": 3, "resources": {"requests": {"cpu": "200m"}}}) == base
    assert checksum({"config": {"enforcement": "enforce"}}) != base
    assert checksum({"config": {"exemptNamespaces": ["kube-system", "ml-platform"]}}) != base
    enforced = render(tmp_path, {"config": {"enforcement": "enforce"}})
    assert _policy(enforced)["enforcement"] == "enforce"


def test_deployment_matches_the_kustomize_one(tmp_path: Path) -> None:
    """Same pod apart from the names and labels Helm gives a release."""
    chart = only(render(tmp_path), "Deployment")
    kustomize = copy.deepcopy(next(d for d in KUSTOMIZE_DOCS if d["kind"] == "Deployment"))
    chart_spec, kustomize_spec = chart["spec"], kustomize["spec"]
    for key in ("replicas", "revisionHistoryLimit", "strategy"):
        assert chart_spec[key] == kustomize_spec[key], key
    ours, theirs = copy.deepcopy(chart_spec["template"]["spec"]), kustomize_spec["template"]["spec"]
    for spread in (*ours["topologySpreadConstraints"], *theirs["topologySpreadConstraints"]):
        spread.pop("labelSelector")
    for volume in (*ours["volumes"], *theirs["volumes"]):
        if volume["name"] == "config":
            volume["configMap"]["name"] = "<generated>"
    assert ours == theirs
    assert chart_spec["selector"]["matchLabels"].items() <= chart_spec["template"]["metadata"]["labels"].items()
    for spread in chart_spec["template"]["spec"]["topologySpreadConstraints"]:
        assert spread["labelSelector"]["matchLabels"] == chart_spec["selector"]["matchLabels"]


def test_same_objects_as_the_kustomize_install(tmp_path: Path) -> None:
    def summary(docs: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for d in docs:
            if d["kind"] in ("ClusterRole", "Service", "PodDisruptionBudget", "ResourceQuota"):
                spec = copy.deepcopy(d.get("spec") or {"rules": d.get("rules")})
                for key in ("selector",):
                    spec.pop(key, None)
                out[d["kind"]] = spec
        return out

    chart = render(tmp_path)
    assert summary(chart) == summary(KUSTOMIZE_DOCS)
    # the Namespace is the one object Helm leaves to `--create-namespace` (see the README)
    kustomize_kinds = sorted(d["kind"] for d in KUSTOMIZE_DOCS if d["kind"] != "Namespace")
    assert sorted(k for k in kinds(chart) if k != "Secret") == kustomize_kinds


def test_priority_class_and_its_quota(tmp_path: Path) -> None:
    docs = render(tmp_path, {"replicaCount": 8})
    assert _pod(docs)["priorityClassName"] == "system-cluster-critical"
    quota = only(docs, "ResourceQuota")
    assert quota["spec"]["scopeSelector"]["matchExpressions"] == [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["system-cluster-critical"]}
    ]
    assert int(quota["spec"]["hard"]["pods"]) == 16  # room for a rollout's surge whatever the replicas
    other = render(tmp_path, {"priorityClassName": "gpu-infra-critical"})
    assert _pod(other)["priorityClassName"] == "gpu-infra-critical"
    assert only(other, "ResourceQuota")["spec"]["scopeSelector"]["matchExpressions"][0]["values"] == ["gpu-infra-critical"]
    none = render(tmp_path, OPTIONS["one-replica-no-priority"])
    assert "priorityClassName" not in _pod(none)


def test_image_tag_defaults_to_the_app_version(tmp_path: Path) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == VERSION  # .ci/release bumps both
    (container,) = _pod(render(tmp_path))["containers"]
    assert container["image"] == f"ghcr.io/gpuguard/gpuguard:{VERSION}"
    (custom,) = _pod(render(tmp_path, OPTIONS["custom-image"]))["containers"]
    assert custom["image"] == "registry.example.com/gpuguard:dev"


def test_resources_and_replicas(tmp_path: Path) -> None:
    resources = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "2", "memory": "1Gi"}}
    docs = render(tmp_path, {"replicaCount": 3, "resources": resources})
    assert only(docs, "Deployment")["spec"]["replicas"] == 3
    (container,) = _pod(docs)["containers"]
    assert container["resources"] == resources


def test_service_monitor_scrapes_the_health_port(tmp_path: Path) -> None:
    docs = render(tmp_path, OPTIONS["service-monitor"])
    monitor = only(docs, "ServiceMonitor")
    metrics = only(docs, "Service", "gpuguard-metrics")
    webhook_service = only(docs, "Service", "gpuguard")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= metrics["metadata"]["labels"].items()
    assert not selector.items() <= webhook_service["metadata"]["labels"].items()
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (endpoint,) = monitor["spec"]["endpoints"]
    (port,) = metrics["spec"]["ports"]
    assert (endpoint["port"], endpoint["path"], endpoint["scheme"]) == (port["name"], "/metrics", "http")
    (container,) = _pod(docs)["containers"]
    named = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert named[port["targetPort"]] == 8081
    assert metrics["spec"]["selector"].items() <= only(docs, "Deployment")["spec"]["template"]["metadata"]["labels"].items()


def test_network_policy(tmp_path: Path) -> None:
    docs = render(tmp_path, OPTIONS["network-policy"])
    policy = only(docs, "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"] == only(docs, "Deployment")["spec"]["selector"]["matchLabels"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    ingress = {rule["ports"][0]["port"]: rule for rule in policy["ingress"]}
    assert set(ingress) == {8443, 8081} and all("from" not in r for r in ingress.values())  # from anywhere
    (api_server,) = policy["egress"]  # registry lookups are off by default: no DNS, no registries
    assert [p["port"] for p in api_server["ports"]] == [443, 6443] and "to" not in api_server

    custom = only(render(tmp_path, OPTIONS["network-policy-registries"]), "NetworkPolicy")["spec"]
    ingress = {rule["ports"][0]["port"]: rule for rule in custom["ingress"]}
    assert ingress[8443]["from"] == [{"ipBlock": {"cidr": "10.0.0.0/24"}}]
    assert ingress[8081]["from"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    api_server, dns, registries = custom["egress"]
    assert api_server["to"] == [{"ipBlock": {"cidr": "10.0.0.10/32"}}]
    assert sorted((p["protocol"], p["port"]) for p in dns["ports"]) == [("TCP", 53), ("UDP", 53)]
    assert [p["port"] for p in registries["ports"]] == [443, 5000]
    assert registries["to"] == [{"ipBlock": {"cidr": "0.0.0.0/0"}}]


def test_optional_pieces_off(tmp_path: Path) -> None:
    docs = render(tmp_path, OPTIONS["scheduling"])
    pod = _pod(docs)
    assert "topologySpreadConstraints" not in pod
    assert pod["tolerations"] == OPTIONS["scheduling"]["tolerations"]
    assert pod["imagePullSecrets"] == [{"name": "pull"}]
    assert "registry-auth" not in {v["name"] for v in pod["volumes"]}
    (container,) = pod["containers"]
    assert "env" not in container
    annotations = only(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["example.com/a"] == "b" and "checksum/config" in annotations


def test_lint_of_the_rendered_chart_finds_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gpuguard.cli import main as gpuguard

    done = template(tmp_path)
    assert done.returncode == 0, done.stderr
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(done.stdout)
    assert gpuguard(["lint", str(rendered)]) == 0
    assert "0 errors" in capsys.readouterr().out


def test_the_readme_helm_commands_render(tmp_path: Path) -> None:
    """Every `helm install` of the README's Helm section, run as `helm template` with its flags."""
    import shlex

    from gpuguard.cli import main as gpuguard

    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Install with Helm", 1)[1].split("\n### ", 1)[0]
    commands = [
        " ".join(line.strip().rstrip("\\") for line in block.splitlines())
        for block in re.findall(r"^ *(helm install (?:.*\\\n)*.*)$", section, re.MULTILINE)
    ]
    assert len(commands) == 3, commands
    assert gpuguard(["certs", "--service", "gpuguard", "--namespace", "gpuguard",
                     "--out-dir", str(tmp_path / "gpuguard-tls")]) == 0  # the README's secret-mode step
    for command in commands:
        args = shlex.split(command)
        assert args[:3] == ["helm", "install", "gpuguard"] and args[3] == "deploy/helm/gpuguard", command
        args = ["template", "gpuguard", str(CHART), *(a for a in args[4:] if a != "--create-namespace")]
        done = helm(*args, cwd=tmp_path)
        assert done.returncode == 0, f"{command}: {done.stderr}"
        assert only(documents(done.stdout), "Deployment")["metadata"]["namespace"] == "gpuguard"

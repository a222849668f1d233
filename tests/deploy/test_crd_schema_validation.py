"""The CRD validator the deploy tests rely on refuses what the API server would (it can fail)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.crd_schema import load_crds, manifest_problems

CRDS = load_crds()

CERTIFICATE: dict[str, Any] = {
    "apiVersion": "cert-manager.io/v1",
    "kind": "Certificate",
    "metadata": {"name": "gpuguard-serving", "namespace": "gpuguard", "labels": {"app.kubernetes.io/name": "gpuguard"}},
    "spec": {
        "secretName": "gpuguard-tls",
        "dnsNames": ["gpuguard.gpuguard.svc"],
        "usages": ["server auth"],
        "privateKey": {"algorithm": "ECDSA", "size": 256},
        "issuerRef": {"group": "cert-manager.io", "kind": "Issuer", "name": "gpuguard-ca"},
    },
}
VENAFI_ISSUER: dict[str, Any] = {
    "apiVersion": "cert-manager.io/v1",
    "kind": "Issuer",
    "metadata": {"name": "v", "namespace": "gpuguard"},
    "spec": {"venafi": {"zone": "z", "tpp": {"url": "https://tpp.example.com/vedsdk", "credentialsRef": {"name": "c"}}}},
}
SERVICE_MONITOR: dict[str, Any] = {
    "apiVersion": "monitoring.coreos.com/v1",
    "kind": "ServiceMonitor",
    "metadata": {"name": "gpuguard", "namespace": "gpuguard"},
    "spec": {"selector": {"matchLabels": {"a": "b"}}, "endpoints": [{"port": "health", "interval": "30s"}]},
}


def _with(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return out


@pytest.mark.parametrize("obj", [CERTIFICATE, VENAFI_ISSUER, SERVICE_MONITOR], ids=lambda o: o["kind"])
def test_valid_objects_pass(obj: dict[str, Any]) -> None:
    assert manifest_problems(obj, CRDS) == []


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (_with(CERTIFICATE, "spec.dnsName", ["x"]), "Additional properties are not allowed ('dnsName' was unexpected)"),
        (_with(CERTIFICATE, "spec.privateKey.size", "256"), "spec.privateKey.size: '256' is not of type 'integer'"),
        (_with(CERTIFICATE, "spec.usages", ["server-auth"]), "spec.usages.0: 'server-auth' is not one of"),
        (_with(CERTIFICATE, "spec.secretName", None), "'secretName' is a required property"),
        (_with(CERTIFICATE, "metadata.namespace", None), "metadata.namespace: a namespaced kind needs one"),
        (_with(CERTIFICATE, "metadata.labels", {"a": 1}), "metadata.labels.a: 1 is not of type 'string'"),
        (_with(CERTIFICATE, "apiVersion", "cert-manager.io/v1alpha2"), "version 'v1alpha2' is not served"),
        (_with(VENAFI_ISSUER, "spec.venafi.cloud", {"apiTokenSecretRef": {"name": "t", "key": "k"}}),
         "spec.venafi: x-kubernetes-validations rule failed"),
        (_with(SERVICE_MONITOR, "spec.endpoints.0.interval", "30 seconds"), "spec.endpoints.0.interval: '30 seconds' does not match"),
        ({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}, "Couldn't find schema for kind Widget"),
        ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"port": 1}}, "'port' was unexpected"),
    ],
)
def test_invalid_objects_are_refused(obj: dict[str, Any], message: str) -> None:
    problems = manifest_problems(obj, CRDS)
    assert any(message in p for p in problems), problems

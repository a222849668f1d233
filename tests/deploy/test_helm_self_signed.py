"""certificates.mode self: the chart's CA and serving certificate work as the API server checks them,
and an upgrade keeps them (Helm's lookup, answered by an in-process API server) until they near
their end."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import socket
import ssl
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from certs.tls import Bundle
from tests.support.helm_chart import documents, only, template
from tests.support.kubeconfig import write_kubeconfig
from tests.support.lookup_apiserver import LookupApiServer, serving
from tests.support.webhook_server import start_server, stop_server

pytestmark = pytest.mark.integration

RELEASE, NAMESPACE = "gg", "gpu-policy"
SERVICE_HOST = "gg-gpuguard.gpu-policy.svc"  # what the API server dials for the webhook's Service


def _tls(docs: list[dict[str, Any]]) -> tuple[dict[str, bytes], str]:
    """The Secret's data (decoded) and its not-after annotation; the caBundle of both webhooks is
    its ca.crt."""
    data, not_after, bundle = _tls_and_bundle(docs)
    assert bundle == data["ca.crt"]
    return data, not_after


def _tls_and_bundle(docs: list[dict[str, Any]]) -> tuple[dict[str, bytes], str, bytes]:
    secret = only(docs, "Secret")
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    bundles = {
        w["clientConfig"]["caBundle"]
        for d in docs if d["kind"].endswith("WebhookConfiguration") for w in d["webhooks"]
    }
    (bundle,) = bundles
    return data, secret["metadata"]["annotations"]["gpuguard.io/not-after"], base64.b64decode(bundle)


def _get_healthz(port: int, ca: bytes, hostname: str) -> bytes:
    """GET /healthz over TLS, verifying the server as the API server does: the caBundle as the only
    trust anchor, and the Service's DNS name."""
    ctx = ssl.create_default_context(cadata=ca.decode())
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, ctx.wrap_socket(
        raw, server_hostname=hostname
    ) as tls:
        tls.sendall(f"GET /healthz HTTP/1.1\r\nHost: {hostname}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    return answer


def test_the_generated_certificate_serves_the_webhook(tmp_path: Path) -> None:
    done = template(tmp_path, {"certificates": {"self": {"validityDays": 30}}}, release=RELEASE, namespace=NAMESPACE)
    assert done.returncode == 0, done.stderr
    data, not_after = _tls(documents(done.stdout))
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert SERVICE_HOST in sans and f"{SERVICE_HOST}.cluster.local" in sans
    expected_end = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)
    assert abs(cert.not_valid_after_utc - expected_end) < dt.timedelta(minutes=5)
    assert abs(dt.datetime.fromisoformat(not_after) - cert.not_valid_after_utc) < dt.timedelta(minutes=5)

    for name in ("ca.crt", "tls.crt", "tls.key"):
        (tmp_path / name).write_bytes(data[name])
    bundle = Bundle(tmp_path / "ca.crt", tmp_path / "tls.crt", tmp_path / "tls.key")
    unchecked_name = ssl.create_default_context(cafile=str(bundle.ca_crt))
    unchecked_name.check_hostname = False  # the readiness wait dials localhost; the name is checked below
    server = start_server(tmp_path / "serve", bundle, health_ctx=unchecked_name)
    try:
        assert _get_healthz(server.port, data["ca.crt"], SERVICE_HOST).startswith(b"HTTP/1.1 200")
        with pytest.raises(ssl.SSLCertVerificationError):
            _get_healthz(server.port, data["ca.crt"], "gg-gpuguard.other-namespace.svc")
        other_ca = documents(template(tmp_path, release=RELEASE, namespace=NAMESPACE).stdout)
        with pytest.raises(ssl.SSLCertVerificationError):  # a CA of another render does not trust it
            _get_healthz(server.port, _tls(other_ca)[0]["ca.crt"], SERVICE_HOST)
    finally:
        stop_server(server)


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _installed(secret: dict[str, Any]) -> dict[str, Any]:
    """The Secret as `helm install` leaves it in the cluster: with Helm's ownership annotations."""
    annotations = secret["metadata"].setdefault("annotations", {})
    annotations.update({"meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": NAMESPACE})
    return secret


def _upgrade(tmp_path: Path, kubeconfig: Path) -> list[dict[str, Any]]:
    done = template(
        tmp_path, {"certificates": {"self": {"renewBeforeDays": 30}}},
        "--dry-run=server", "--disable-openapi-validation", "--kubeconfig", str(kubeconfig),
        release=RELEASE, namespace=NAMESPACE,
    )
    assert done.returncode == 0, done.stderr
    return documents(done.stdout)


def test_upgrades_keep_the_certificate_until_it_nears_its_end(tmp_path: Path) -> None:
    api = LookupApiServer()
    secret_path = f"/api/v1/namespaces/{NAMESPACE}/secrets/gg-gpuguard-tls"
    with serving(api) as url:
        kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
        first_docs = _upgrade(tmp_path, kubeconfig)  # install: no Secret yet
        assert secret_path in api.requests  # lookup asked the API server
        first, _ = _tls(first_docs)

        api.put_secret(_installed(copy.deepcopy(only(first_docs, "Secret"))))  # what the install created
        kept, _ = _tls(_upgrade(tmp_path, kubeconfig))
        assert kept == first

        near_end = _installed(copy.deepcopy(only(first_docs, "Secret")))
        soon = dt.datetime.now(dt.UTC) + dt.timedelta(days=29)
        near_end["metadata"]["annotations"]["gpuguard.io/not-after"] = soon.strftime("%Y-%m-%dT%H:%M:%SZ")
        api.put_secret(near_end)
        renewal = _upgrade(tmp_path, kubeconfig)
        renewed, renewed_until, bundle = _tls_and_bundle(renewal)
        assert renewed["ca.crt"] != first["ca.crt"] and renewed["tls.key"] != first["tls.key"]
        assert dt.datetime.fromisoformat(renewed_until) > dt.datetime.now(dt.UTC) + dt.timedelta(days=3000)
        # Until the pods reload the Secret they serve the old certificate: the caBundle trusts both.
        trusted = x509.load_pem_x509_certificates(bundle)
        assert [c.public_bytes(serialization.Encoding.PEM) for c in trusted] == [renewed["ca.crt"], first["ca.crt"]]
        for data in (first, renewed):
            served = x509.load_pem_x509_certificate(data["tls.crt"])
            assert sum(_issued_by(served, ca) for ca in trusted) == 1

        api.put_secret(_installed(copy.deepcopy(only(renewal, "Secret"))))  # the next upgrade trusts the new CA alone
        assert _tls(_upgrade(tmp_path, kubeconfig))[0] == renewed

        unknown_end = _installed(copy.deepcopy(only(first_docs, "Secret")))
        del unknown_end["metadata"]["annotations"]["gpuguard.io/not-after"]
        api.put_secret(unknown_end)  # not the chart's: its end is unknown, so it is replaced
        assert _tls_and_bundle(_upgrade(tmp_path, kubeconfig))[0]["ca.crt"] != first["ca.crt"]


def test_template_without_a_cluster_generates_anew(tmp_path: Path) -> None:
    """What the README warns about: `helm template` (and GitOps tools rendering with it) cannot
    look up the Secret, so each render has a new CA."""
    one = _tls(documents(template(tmp_path).stdout))[0]
    two = _tls(documents(template(tmp_path).stdout))[0]
    assert one["ca.crt"] != two["ca.crt"]

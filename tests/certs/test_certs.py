"""certs/: the CA and serving certificate, parsed back with cryptography and used in a real TLS
handshake; ``gpuguard certs`` end to end, including --inject into webhook manifests."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import shutil
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.inject import inject_ca_bundle
from certs.tls import Bundle, CertError, generate_bundle
from gpuguard.cli import main as gpuguard
from tests.support.paths import ROOT, load_yaml_docs

SERVICE, NAMESPACE = "gpuguard", "gpuguard"
DNS_NAMES = [
    "gpuguard",
    "gpuguard.gpuguard",
    "gpuguard.gpuguard.svc",
    "gpuguard.gpuguard.svc.cluster.local",
]


def load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def spki(key: object) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)  # type: ignore[attr-defined, no-any-return]


@pytest.fixture
def bundle(tmp_path: Path) -> Bundle:
    return generate_bundle(SERVICE, NAMESPACE, tmp_path / "out", days=30, extra_sans=["10.96.0.42", "webhook.example.com"])


def test_files_and_modes(bundle: Bundle) -> None:
    out = bundle.tls_crt.parent
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert mode(bundle.tls_key) == 0o600
    assert mode(out / "ca.key") == 0o600
    assert mode(bundle.tls_crt) == 0o644
    assert mode(bundle.ca_crt) == 0o644


def test_ca_certificate(bundle: Bundle) -> None:
    ca = load_cert(bundle.ca_crt)
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert constraints.critical and constraints.value.ca is True
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign
    assert ca.subject == ca.issuer
    ca.verify_directly_issued_by(ca)
    key = serialization.load_pem_private_key((bundle.ca_crt.parent / "ca.key").read_bytes(), password=None)
    assert spki(key.public_key()) == spki(ca.public_key())
    # the CA outlives the serving certificate, so renewals keep the caBundle valid
    assert ca.not_valid_after_utc > load_cert(bundle.tls_crt).not_valid_after_utc


def test_serving_certificate(bundle: Bundle) -> None:
    cert = load_cert(bundle.tls_crt)
    ca = load_cert(bundle.ca_crt)
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [*DNS_NAMES, "webhook.example.com"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.96.0.42")]
    assert cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value == x509.ExtendedKeyUsage(
        [ExtendedKeyUsageOID.SERVER_AUTH]
    )
    usage = cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.key_encipherment and not usage.key_cert_sign
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    ski = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert ski == x509.SubjectKeyIdentifier.from_public_key(cert.public_key())  # type: ignore[arg-type]
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    assert aki.key_identifier == ca_ski.digest
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "gpuguard.gpuguard.svc"
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    key = serialization.load_pem_private_key(bundle.tls_key.read_bytes(), password=None)
    assert spki(key.public_key()) == spki(cert.public_key())


def test_validity(bundle: Bundle) -> None:
    cert = load_cert(bundle.tls_crt)
    now = dt.datetime.now(dt.UTC)
    assert cert.not_valid_before_utc <= now
    assert now - cert.not_valid_before_utc < dt.timedelta(minutes=10)
    lifetime = cert.not_valid_after_utc - now
    assert dt.timedelta(days=29, hours=23) < lifetime <= dt.timedelta(days=30)


def _handshake(bundle: Bundle, hostname: str) -> None:
    """A TLS handshake in memory, client verifying against ca.crt as the API server does."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(bundle.tls_crt, bundle.tls_key)
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(cafile=str(bundle.ca_crt))
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=hostname)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, end in (("client", client), ("server", server)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return
    raise AssertionError("handshake did not complete")


@pytest.mark.parametrize("hostname", [*DNS_NAMES, "10.96.0.42"])
def test_tls_handshake_verifies_for_every_service_name(bundle: Bundle, hostname: str) -> None:
    _handshake(bundle, hostname)


def test_tls_handshake_rejects_other_names(bundle: Bundle) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(bundle, "gpuguard.other-namespace.svc")


def test_existing_ca_signs_without_making_a_new_one(tmp_path: Path, bundle: Bundle) -> None:
    ca_dir = bundle.ca_crt.parent
    second = generate_bundle(
        "other", "ml", tmp_path / "second", ca_cert=ca_dir / "ca.crt", ca_key=ca_dir / "ca.key"
    )
    assert not (tmp_path / "second" / "ca.key").exists()
    assert second.ca_crt.read_bytes() == bundle.ca_crt.read_bytes()
    load_cert(second.tls_crt).verify_directly_issued_by(load_cert(bundle.ca_crt))
    san = load_cert(second.tls_crt).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "other.ml.svc" in san.get_values_for_type(x509.DNSName)
    _handshake(second, "other.ml.svc")


def _rsa_ca(directory: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "corp root")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir()
    (directory / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "ca.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return directory / "ca.crt", directory / "ca.key"


def test_existing_rsa_ca(tmp_path: Path) -> None:
    ca_crt, ca_key = _rsa_ca(tmp_path / "corp")
    out = generate_bundle(SERVICE, NAMESPACE, tmp_path / "out", ca_cert=ca_crt, ca_key=ca_key)
    load_cert(out.tls_crt).verify_directly_issued_by(load_cert(ca_crt))
    _handshake(out, "gpuguard.gpuguard.svc")


def test_rejects_mismatched_ca_key(tmp_path: Path, bundle: Bundle) -> None:
    other = generate_bundle("x", "y", tmp_path / "other")
    with pytest.raises(CertError, match="does not match"):
        generate_bundle(
            SERVICE, NAMESPACE, tmp_path / "o", ca_cert=bundle.ca_crt, ca_key=other.ca_crt.parent / "ca.key"
        )


def test_rejects_a_non_ca_certificate(tmp_path: Path, bundle: Bundle) -> None:
    with pytest.raises(CertError, match="not a CA"):
        generate_bundle(SERVICE, NAMESPACE, tmp_path / "o", ca_cert=bundle.tls_crt, ca_key=bundle.tls_key)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"days": 0}, "days"),
        ({"ca_cert": Path("/nonexistent/ca.crt")}, "both"),
        ({"ca_cert": Path("/nonexistent/ca.crt"), "ca_key": Path("/nonexistent/ca.key")}, "cannot read"),
        ({"extra_sans": [" "]}, "empty"),
    ],
)
def test_rejects_bad_input(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(CertError, match=message):
        generate_bundle(SERVICE, NAMESPACE, tmp_path / "o", **kwargs)  # type: ignore[arg-type]


def test_rejects_garbage_ca_file(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("not a certificate\n")
    (tmp_path / "ca.key").write_text("not a key\n")
    with pytest.raises(CertError, match="not a PEM certificate"):
        generate_bundle(SERVICE, NAMESPACE, tmp_path / "o", ca_cert=tmp_path / "ca.crt", ca_key=tmp_path / "ca.key")


# --- the command --------------------------------------------------------------------------

def test_cli_writes_a_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = gpuguard(
        ["certs", "--service", SERVICE, "--namespace", NAMESPACE, "--out-dir", str(tmp_path / "tls"),
         "--days", "90", "--san", "10.0.0.1", "extra.example"]
    )
    assert code == 0
    cert = load_cert(tmp_path / "tls" / "tls.crt")
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [*DNS_NAMES, "extra.example"]
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.0.0.1")]
    assert (cert.not_valid_after_utc - cert.not_valid_before_utc).days == 90
    assert "tls.crt" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--ca-cert", "ca.crt"], "--ca-cert and --ca-key"),
        (["--days", "0"], "days"),
        (["--inject", "missing.yaml"], "no such file"),
        (["--ca-cert", "nope.crt", "--ca-key", "nope.key"], "cannot read CA certificate"),
    ],
)
def test_cli_errors_exit_2_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code = gpuguard(["certs", "--service", SERVICE, "--namespace", NAMESPACE, "--out-dir", "tls", *extra])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_cli_error_on_mismatched_key(tmp_path: Path, capsys: pytest.CaptureFixture[str], bundle: Bundle) -> None:
    other = generate_bundle("x", "y", tmp_path / "other")
    code = gpuguard(
        ["certs", "--service", SERVICE, "--namespace", NAMESPACE, "--out-dir", str(tmp_path / "o"),
         "--ca-cert", str(bundle.ca_crt), "--ca-key", str(other.ca_crt.parent / "ca.key")]
    )
    assert code == 2
    assert "does not match" in capsys.readouterr().err


def test_cli_missing_required_argument_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert gpuguard(["certs", "--service", SERVICE]) == 2
    assert "--namespace" in capsys.readouterr().err


# --- --inject ---------------------------------------------------------------------------------

def _without_ca_bundle(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if "caBundle:" not in line)


def test_inject_into_the_deploy_manifests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    webhooks = tmp_path / "webhooks.yaml"
    shutil.copy(ROOT / "deploy" / "webhooks.yaml", webhooks)
    original = webhooks.read_text()
    code = gpuguard(
        ["certs", "--service", SERVICE, "--namespace", NAMESPACE, "--out-dir", str(tmp_path / "tls"),
         "--inject", str(webhooks)]
    )
    assert code == 0
    expected = base64.b64encode((tmp_path / "tls" / "ca.crt").read_bytes()).decode()
    docs = load_yaml_docs(webhooks)
    bundles = [w["clientConfig"]["caBundle"] for d in docs for w in d["webhooks"]]
    assert bundles == [expected, expected]
    # everything else, comments and the CEL block included, is byte for byte the same
    assert _without_ca_bundle(webhooks.read_text()) == original
    assert "caBundle set in 2 webhooks" in capsys.readouterr().out

    # a second run (a new CA) replaces the value instead of adding a key
    assert gpuguard(
        ["certs", "--service", SERVICE, "--namespace", NAMESPACE, "--out-dir", str(tmp_path / "tls2"),
         "--inject", str(webhooks)]
    ) == 0
    renewed = base64.b64encode((tmp_path / "tls2" / "ca.crt").read_bytes()).decode()
    assert [w["clientConfig"]["caBundle"] for d in load_yaml_docs(webhooks) for w in d["webhooks"]] == [
        renewed, renewed
    ]
    assert _without_ca_bundle(webhooks.read_text()) == original


MIXED = """\
# head comment
apiVersion: v1
kind: Service
metadata:
    name: keep-me   # four-space indent, left exactly as written
spec:
    ports: [{port: 443}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: a   # name comment
webhooks:
- name: a.example.com
  clientConfig:
    caBundle: b2xk
    url: https://a.example.com/validate
  admissionReviewVersions: ["v1"]
  sideEffects: None
- name: b.example.com
  clientConfig:
    service: {name: b, namespace: ns}
  admissionReviewVersions: ["v1"]
  sideEffects: None
---
# a ConfigMap that mentions a webhook in its data is not a webhook configuration
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data:
  webhooks: "not touched"
"""


def test_inject_leaves_other_documents_untouched(tmp_path: Path, bundle: Bundle) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED)
    result = inject_ca_bundle(path, bundle.ca_crt.read_bytes())
    assert (result.webhooks, result.configurations) == (2, 1)
    text = path.read_text()
    service_doc, webhook_doc, configmap_doc = text.split("\n---\n")
    original = MIXED.split("\n---\n")
    assert service_doc == original[0]
    assert configmap_doc == original[2]
    assert "name: a   # name comment" in webhook_doc
    assert "- name: a.example.com" in webhook_doc  # dash offset 0 kept
    assert 'admissionReviewVersions: ["v1"]' in webhook_doc  # flow style and quotes kept
    encoded = base64.b64encode(bundle.ca_crt.read_bytes()).decode()
    docs = load_yaml_docs(path)
    assert [w["clientConfig"]["caBundle"] for w in docs[1]["webhooks"]] == [encoded, encoded]
    assert docs[1]["webhooks"][0]["clientConfig"]["url"] == "https://a.example.com/validate"
    assert docs[1]["webhooks"][1]["clientConfig"]["service"] == {"name": "b", "namespace": "ns"}
    assert docs[2]["data"] == {"webhooks": "not touched"}


def test_inject_requires_a_webhook_configuration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "svc.yaml"
    path.write_text(MIXED.split("---\n")[0])
    before = path.read_text()
    code = gpuguard(
        ["certs", "--service", SERVICE, "--namespace", NAMESPACE, "--out-dir", str(tmp_path / "tls"),
         "--inject", str(path)]
    )
    assert code == 2
    assert "no ValidatingWebhookConfiguration or MutatingWebhookConfiguration" in capsys.readouterr().err
    assert path.read_text() == before


def test_inject_reports_invalid_yaml(tmp_path: Path, bundle: Bundle, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("kind: ValidatingWebhookConfiguration\nwebhooks: [\n")
    code = gpuguard(
        ["certs", "--service", SERVICE, "--namespace", NAMESPACE, "--out-dir", str(tmp_path / "tls"),
         "--inject", str(path)]
    )
    assert code == 2
    assert "invalid YAML" in capsys.readouterr().err

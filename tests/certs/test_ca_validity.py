"""``gpuguard certs`` signs only with a CA inside its validity period."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from certs.tls import CertError, generate_bundle

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


def _ca(directory: Path, not_before: dt.datetime, not_after: dt.datetime) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "corp root")])
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(not_before).not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory.mkdir()
    (directory / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "ca.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return directory / "ca.crt", directory / "ca.key"


def test_a_ca_that_is_not_valid_yet_is_refused(tmp_path: Path) -> None:
    ca_crt, ca_key = _ca(tmp_path / "ca", NOW + dt.timedelta(days=2), NOW + dt.timedelta(days=400))
    with pytest.raises(CertError, match=rf"CA certificate {ca_crt} is not valid before {NOW + dt.timedelta(days=2):%Y-%m-%d}"):
        generate_bundle("gpuguard", "gpuguard", tmp_path / "out", ca_cert=ca_crt, ca_key=ca_key)
    assert not (tmp_path / "out" / "tls.crt").exists()


def test_the_serving_certificate_ends_with_its_ca(tmp_path: Path) -> None:
    ca_end = NOW + dt.timedelta(days=10)
    ca_crt, ca_key = _ca(tmp_path / "ca", NOW - dt.timedelta(days=1), ca_end)
    bundle = generate_bundle("gpuguard", "gpuguard", tmp_path / "out", days=365, ca_cert=ca_crt, ca_key=ca_key)
    leaf = x509.load_pem_x509_certificate(bundle.tls_crt.read_bytes())
    assert leaf.not_valid_after_utc == ca_end

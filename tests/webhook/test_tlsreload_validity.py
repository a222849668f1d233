"""Validity checks of the serving certificate, in process: the whole chain is checked, a refusal
carries its reason for the reload metric, and the listener learns when the certificate expires."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from webhook.metrics import Metrics
from webhook.tlsreload import CertificateError, CertificateReloader, check_pair, read_pair, server_context

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
DAY = dt.timedelta(days=1)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, signer: ec.EllipticCurvePrivateKey,
          start: dt.datetime, end: dt.datetime, ca: bool) -> x509.Certificate:
    return (
        x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer)).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .sign(signer, hashes.SHA256())
    )


def _write(tmp: Path, chain: list[x509.Certificate], key: ec.EllipticCurvePrivateKey) -> tuple[Path, Path]:
    crt, pem_key = tmp / "tls.crt", tmp / "tls.key"
    crt.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain))
    pem_key.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return crt, pem_key


def _leaf(tmp: Path, start: dt.datetime, end: dt.datetime, intermediate_end: dt.datetime | None = None) -> tuple[Path, Path]:
    root_key, mid_key, key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    mid = _cert("intermediate", mid_key, "root", root_key, NOW - 30 * DAY, intermediate_end or NOW + 30 * DAY, True)
    leaf = _cert("gpuguard.gpuguard.svc", key, "intermediate", mid_key, start, end, False)
    return _write(tmp, [leaf, mid], key)


def test_an_expired_intermediate_is_refused(tmp_path: Path) -> None:
    crt, key = _leaf(tmp_path, NOW - DAY, NOW + DAY, intermediate_end=NOW - DAY)
    with pytest.raises(CertificateError) as refused:
        check_pair(read_pair(crt, key))
    assert refused.value.reason == "expired"
    assert str(refused.value) == (
        f"certificate 2 of the chain in {crt} (CN=intermediate) expired at {NOW - DAY:%Y-%m-%d %H:%M:%S} UTC"
    )


def test_the_validity_window_is_inclusive_and_checked_against_now(tmp_path: Path) -> None:
    crt, key = _leaf(tmp_path, NOW - DAY, NOW + DAY)
    pair = read_pair(crt, key)
    assert check_pair(pair, now=NOW + DAY) == (NOW + DAY).timestamp()
    with pytest.raises(CertificateError) as late:
        check_pair(pair, now=NOW + DAY + dt.timedelta(seconds=1))
    with pytest.raises(CertificateError) as early:
        check_pair(pair, now=NOW - DAY - dt.timedelta(seconds=1))
    assert (late.value.reason, early.value.reason) == ("expired", "not_yet_valid")


def test_reloader_reports_expiry_and_refusals_to_the_metrics(tmp_path: Path) -> None:
    crt, key = _leaf(tmp_path, NOW - DAY, NOW + 10 * DAY)
    metrics = Metrics()
    context = server_context(crt, key)
    reloader = CertificateReloader(context, crt, key, metrics.count_cert_reload)
    expiry = "gpuguard_tls_certificate_expiry_timestamp_seconds"
    assert f"{expiry} {int((NOW + 10 * DAY).timestamp())}" in metrics.render(None, True, 0).splitlines()
    assert dict(metrics.cert_reloads) == {}

    (tmp_path / "old").mkdir()
    _leaf(tmp_path / "old", NOW - 30 * DAY, NOW - DAY)  # an expired pair
    for name in ("tls.crt", "tls.key"):
        (tmp_path / "old" / name).replace(tmp_path / name)
    assert reloader.check() is False
    assert dict(metrics.cert_reloads) == {"expired": 1}
    assert reloader.check() is False, "the same rejected files are not counted twice"
    assert f"{expiry} {int((NOW + 10 * DAY).timestamp())}" in metrics.render(None, True, 0).splitlines()

    (tmp_path / "new").mkdir()
    _leaf(tmp_path / "new", NOW - DAY, NOW + 90 * DAY)
    for name in ("tls.crt", "tls.key"):
        (tmp_path / "new" / name).replace(tmp_path / name)
    assert reloader.check() is True
    assert dict(metrics.cert_reloads) == {"expired": 1, "ok": 1}
    assert f"{expiry} {int((NOW + 90 * DAY).timestamp())}" in metrics.render(None, True, 0).splitlines()
    assert isinstance(context, ssl.SSLContext)


def test_an_expiry_while_serving_is_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    crt, key = _leaf(tmp_path, NOW - DAY, NOW + DAY)
    reloader = CertificateReloader(server_context(crt, key), crt, key)
    reloader.not_after = (NOW - dt.timedelta(seconds=5)).timestamp()  # as if a day had passed
    with caplog.at_level("ERROR", logger="gpuguard.tls"):
        reloader.check()
        reloader.check()
    assert [r.getMessage() for r in caplog.records] == [
        f"the serving certificate in use expired at {NOW - dt.timedelta(seconds=5):%Y-%m-%d %H:%M:%S} UTC; "
        "the API server rejects it until it is rotated"
    ]

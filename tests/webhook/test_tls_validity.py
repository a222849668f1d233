"""An expired or not-yet-valid serving certificate is refused: at start (exit 2, a clear message)
and on rotation (the old pair stays in use, the refusal is logged and counted); ``/metrics`` shows
when the certificate in use expires.  Real ``gpuguard serve`` processes, real TLS handshakes."""

from __future__ import annotations

import datetime as dt
import os
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.support.paths import ROOT

pytestmark = pytest.mark.integration

SERVE = [sys.executable, "-m", "gpuguard.cli", "serve", "--host", "127.0.0.1"]
DEADLINE = 30.0
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)
DAY = dt.timedelta(days=1)


@dataclass(frozen=True)
class Pair:
    crt: Path
    key: Path
    not_after: dt.datetime


class CA:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
        self.cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(NOW - 3650 * DAY).not_valid_after(NOW + 3650 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.pem = directory / "ca.crt"
        self.pem.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, not_before: dt.datetime, not_after: dt.datetime) -> Pair:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuguard.gpuguard.svc")]))
            .issuer_name(self.cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(not_before).not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        crt, pem_key = self.dir / f"{name}.crt", self.dir / f"{name}.key"
        crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pem_key.write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        return Pair(crt, pem_key, not_after)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _serve(crt: Path, key: Path, log: Path, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    port = _port()
    with log.open("wb") as fh:
        proc = subprocess.Popen([*SERVE, "--port", str(port), "--tls-cert", str(crt), "--tls-key", str(key), *extra],
                                cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT)
    return proc, port


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def _served_leaf(port: int) -> bytes:
    return ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate(("127.0.0.1", port), timeout=5))


def _der(pair: Pair) -> bytes:
    return x509.load_pem_x509_certificate(pair.crt.read_bytes()).public_bytes(serialization.Encoding.DER)


def _wait_for(predicate: object, what: str, log: Path) -> None:
    deadline = time.monotonic() + DEADLINE
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} not within {DEADLINE}s:\n{log.read_text()}"
        time.sleep(0.05)  # polling interval of a bounded wait


def _healthy(port: int, ca: CA) -> bool:
    try:
        ctx = ssl.create_default_context(cafile=str(ca.pem))
        return httpx.get(f"https://localhost:{port}/healthz", verify=ctx, timeout=2).status_code == 200
    except (httpx.TransportError, ssl.SSLError):
        return False


def _metrics(port: int, ca: CA) -> str:
    ctx = ssl.create_default_context(cafile=str(ca.pem))
    return httpx.get(f"https://localhost:{port}/metrics", verify=ctx, timeout=5).text


def _volume(root: Path, version: str, pair: Pair) -> None:
    """The kubelet's atomic writer: new files in ..<version>, then the ..data symlink swapped."""
    data = root / f"..{version}"
    data.mkdir(parents=True)
    (data / "tls.crt").write_bytes(pair.crt.read_bytes())
    (data / "tls.key").write_bytes(pair.key.read_bytes())
    tmp = root / "..data_tmp"
    tmp.symlink_to(data.name)
    os.replace(tmp, root / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (root / name).is_symlink():
            (root / name).symlink_to(f"..data/{name}")


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        ((NOW - 30 * DAY, NOW - DAY), "expired at {after} UTC"),
        ((NOW + DAY, NOW + 30 * DAY), "is not valid before {before} UTC"),
    ],
    ids=["expired", "not-yet-valid"],
)
def test_out_of_date_certificate_is_refused_at_start(
    window: tuple[dt.datetime, dt.datetime], expected: str, tmp_path: Path
) -> None:
    pair = CA(tmp_path / "ca").issue("serving", *window)
    log = tmp_path / "serve.log"
    proc, _ = _serve(pair.crt, pair.key, log)
    try:
        code = proc.wait(DEADLINE)
    except subprocess.TimeoutExpired:
        _stop(proc)
        raise AssertionError(f"the server started with an out-of-date certificate:\n{log.read_text()}") from None
    text = log.read_text()
    assert code == 2, text
    message = expected.format(before=f"{window[0]:%Y-%m-%d %H:%M:%S}", after=f"{window[1]:%Y-%m-%d %H:%M:%S}")
    assert f"serving certificate {pair.crt} (CN=gpuguard.gpuguard.svc) {message}" in text
    assert "Traceback" not in text


def test_out_of_date_rotation_keeps_the_old_pair_and_is_counted(tmp_path: Path) -> None:
    ca = CA(tmp_path / "ca")
    current = ca.issue("current", NOW - DAY, NOW + 10 * DAY)
    expired = ca.issue("expired", NOW - 30 * DAY, NOW - DAY)
    early = ca.issue("early", NOW + DAY, NOW + 30 * DAY)
    renewed = ca.issue("renewed", NOW - DAY, NOW + 90 * DAY)
    volume, log = tmp_path / "secret", tmp_path / "serve.log"
    _volume(volume, "v1", current)
    proc, port = _serve(volume / "tls.crt", volume / "tls.key", log, "--tls-reload-interval", "0.1")
    try:
        _wait_for(lambda: _healthy(port, ca) or proc.poll() is not None, "healthy", log)
        gauge = "gpuguard_tls_certificate_expiry_timestamp_seconds"
        assert f"{gauge} {int(current.not_after.timestamp())}" in _metrics(port, ca).splitlines()

        _volume(volume, "v2", expired)
        _wait_for(lambda: 'reloads_total{result="expired"} 1' in _metrics(port, ca), "expired rotation counted", log)
        _volume(volume, "v3", early)
        _wait_for(lambda: 'reloads_total{result="not_yet_valid"} 1' in _metrics(port, ca), "early rotation counted", log)
        assert _served_leaf(port) == _der(current), "the old pair stays in use"
        text = log.read_text()
        assert f"not reloading the serving certificate: serving certificate {volume / 'tls.crt'}" in text
        assert "expired at" in text and "is not valid before" in text
        assert f"{gauge} {int(current.not_after.timestamp())}" in _metrics(port, ca).splitlines()

        _volume(volume, "v4", renewed)
        _wait_for(lambda: _served_leaf(port) == _der(renewed), "renewed certificate served", log)
        metrics = _metrics(port, ca).splitlines()
        assert f"{gauge} {int(renewed.not_after.timestamp())}" in metrics
        assert 'gpuguard_tls_certificate_reloads_total{result="ok"} 1' in metrics
        assert proc.poll() is None
    finally:
        _stop(proc)

"""Run ``gpuguard serve`` as a real subprocess over real TLS and speak to it as kube-apiserver does."""

from __future__ import annotations

import base64
import datetime as dt
import json
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.tls import Bundle
from tests.support.paths import ROOT

SERVE = [sys.executable, "-m", "gpuguard.cli", "serve"]
LOCAL_SANS = ["localhost", "127.0.0.1"]
STARTUP_DEADLINE = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    ca: Path
    log: Path

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}"

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, verify=ssl_client_context(self.ca), timeout=10, **kwargs)

    def log_text(self) -> str:
        return self.log.read_text()


def wait_for(what: str, condition: Callable[[], bool], log: Callable[[], str] = lambda: "",
             deadline: float = 20.0) -> None:
    """Wait until ``condition()`` holds, failing with ``log()`` after ``deadline`` seconds."""
    until = time.monotonic() + deadline
    while not condition():
        assert time.monotonic() < until, f"timed out waiting for {what}:\n{log()}"
        time.sleep(0.05)  # polling interval of a bounded wait on a condition


def ssl_client_context(*cas: Path, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    for ca in cas:
        ctx.load_verify_locations(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    return ctx


def wait_until_healthy(server: Server, ctx: ssl.SSLContext | None = None) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE
    verify = ctx or ssl_client_context(server.ca)
    last: Exception | None = None
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise AssertionError(f"server exited with {server.proc.returncode}:\n{server.log_text()}")
        try:
            if httpx.get(f"{server.url}/healthz", verify=verify, timeout=2).status_code == 200:
                return
        except (httpx.TransportError, ssl.SSLError) as exc:
            last = exc
        time.sleep(0.05)  # polling interval of a bounded wait, not synchronisation by sleeping
    raise AssertionError(f"server not healthy within {STARTUP_DEADLINE}s ({last}):\n{server.log_text()}")


def start_server(
    tmp: Path,
    bundle: Bundle,
    *extra: str,
    config: str | None = None,
    health_ctx: ssl.SSLContext | None = None,
) -> Server:
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    args = [*SERVE, "--tls-cert", str(bundle.tls_crt), "--tls-key", str(bundle.tls_key)]
    args += ["--host", "127.0.0.1", "--port", str(port), *extra]
    if config is not None:
        cfg = tmp / "gpuguard.yaml"
        cfg.write_text(config)
        args += ["--config", str(cfg)]
    log = tmp / "server.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT)
    server = Server(proc, port, bundle.ca_crt, log)
    try:
        wait_until_healthy(server, health_ctx)
    except BaseException:
        stop_server(server)
        raise
    return server


def stop_server(server: Server) -> None:
    server.proc.terminate()
    try:
        server.proc.wait(15)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait(5)


def call(client: httpx.Client, endpoint: str, review: dict[str, Any]) -> dict[str, Any]:
    resp = client.post(f"/{endpoint}?timeout=10s", json=review)
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    # What kube-apiserver's VerifyAdmissionResponse checks:
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"]["uid"] == review["request"]["uid"]
    response: dict[str, Any] = out["response"]
    if endpoint == "validate":
        assert "patch" not in response and "patchType" not in response
    else:
        assert ("patch" in response) == ("patchType" in response)
    return response


def decoded_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return ops


def client_cert(ca_crt: Path, ca_key: Path, out: Path) -> tuple[Path, Path]:
    """A client certificate (as kube-apiserver presents) signed by the CA in ``ca_crt``/``ca_key``."""
    ca = x509.load_pem_x509_certificate(ca_crt.read_bytes())
    ca_private = serialization.load_pem_private_key(ca_key.read_bytes(), password=None)
    assert isinstance(ca_private, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = time.time()
    start = dt.datetime.fromtimestamp(now - 300, dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + dt.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_private, hashes.SHA256())
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "client.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (out / "client.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return out / "client.crt", out / "client.key"

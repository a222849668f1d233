"""Real registry parts for tests: a CA, CNCF distribution (Debian's ``docker-registry``) over TLS
with htpasswd or token auth, a token issuer, OCI layouts pushed with ``skopeo``, and a small
hostile HTTP server for what a real registry will never do (hang, lie about a digest).

Everything listens on 127.0.0.1 and is stopped by the fixture that started it.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import gzip
import hashlib
import io
import json
import os
import shutil
import socket
import ssl
import subprocess
import tarfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

from tests.support.http_replies import reply_json

TOOLS = ("docker-registry", "skopeo", "htpasswd")
DEADLINE = 30.0
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"


def require_tools() -> None:
    """Skip without the registry tools on a developer machine; fail under CI (GPUGUARD_CI=1)."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if not missing:
        return
    message = f"missing {', '.join(missing)} (apt-get install docker-registry skopeo apache2-utils; .ci/run does)"
    if os.environ.get("GPUGUARD_CI"):
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for_port(port: int, proc: subprocess.Popen[bytes] | None = None, log: Path | None = None) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            text = log.read_text() if log else ""
            raise AssertionError(f"process exited with {proc.returncode} before listening on {port}:\n{text}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.05)  # polling interval of a bounded wait, not synchronisation by sleeping
    raise AssertionError(f"nothing listening on 127.0.0.1:{port} within {DEADLINE}s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


# -- certificates ----------------------------------------------------------------------------


@dataclass
class RegistryCA:
    dir: Path
    cert: Path
    key: rsa.RSAPrivateKey
    certificate: x509.Certificate

    @classmethod
    def create(cls, directory: Path) -> RegistryCA:
        directory.mkdir(parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"gpuguard test CA {uuid.uuid4().hex[:8]}")])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        path = directory / "ca.crt"
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cls(directory, path, key, cert)

    def issue(self, name: str, server: bool = True) -> tuple[Path, Path, x509.Certificate, rsa.RSAPrivateKey]:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(IPv4Address("127.0.0.1"))]),
                critical=False,
            ).add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path, key_path = self.dir / f"{name}.crt", self.dir / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return cert_path, key_path, cert, key

    def server_context(self, name: str) -> ssl.SSLContext:
        cert, key, _, _ = self.issue(name)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        return ctx


# -- OCI layouts -------------------------------------------------------------------------------


@dataclass
class Blob:
    media_type: str
    data: bytes

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.data).hexdigest()

    def descriptor(self, **extra: Any) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": len(self.data), **extra}


def _layer(text: str) -> tuple[Blob, str]:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = text.encode()
        info = tarfile.TarInfo("etc/gpuguard-test")
        info.size = len(data)
        info.mtime = 0
        tar.addfile(info, io.BytesIO(data))
    tar_bytes = raw.getvalue()
    return Blob(OCI_LAYER, gzip.compress(tar_bytes, mtime=0)), "sha256:" + hashlib.sha256(tar_bytes).hexdigest()


def image_blobs(arch: str, env: list[str], labels: Mapping[str, str]) -> tuple[Blob, list[Blob]]:
    """(manifest, [config, layer]) of a one-layer linux/``arch`` image."""
    layer, diff_id = _layer(f"{arch} {env}")
    config = Blob(
        OCI_CONFIG,
        json.dumps(
            {
                "architecture": arch,
                "os": "linux",
                "config": {"Env": env, "Labels": dict(labels)},
                "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            }
        ).encode(),
    )
    manifest = Blob(
        OCI_MANIFEST,
        json.dumps(
            {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config.descriptor(), "layers": [layer.descriptor()]}
        ).encode(),
    )
    return manifest, [config, layer]


@dataclass
class Layout:
    dir: Path
    refs: dict[str, str] = field(default_factory=dict)  # tag → top digest
    platform_digests: dict[str, dict[str, str]] = field(default_factory=dict)  # tag → arch → manifest digest

    def _put(self, blob: Blob) -> None:
        path = self.dir / "blobs" / "sha256" / blob.digest.split(":", 1)[1]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(blob.data)

    def _write_index(self, entries: list[dict[str, Any]]) -> None:
        (self.dir / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
        (self.dir / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": entries}))

    def add(self, tag: str, platforms: Mapping[str, tuple[list[str], Mapping[str, str]]], multi: bool) -> str:
        """Add ``tag``: one image per arch (env, labels); ``multi`` wraps them in an image index."""
        self.dir.mkdir(parents=True, exist_ok=True)
        index_path = self.dir / "index.json"
        entries = json.loads(index_path.read_text())["manifests"] if index_path.exists() else []
        children = []
        self.platform_digests[tag] = {}
        for arch, (env, labels) in platforms.items():
            manifest, blobs = image_blobs(arch, env, labels)
            for blob in (*blobs, manifest):
                self._put(blob)
            children.append(manifest.descriptor(platform={"architecture": arch, "os": "linux"}))
            self.platform_digests[tag][arch] = manifest.digest
        if multi:
            index = Blob(OCI_INDEX, json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": children}).encode())
            self._put(index)
            top = index.descriptor()
        else:
            assert len(children) == 1
            top = {k: v for k, v in children[0].items() if k != "platform"}
        top["annotations"] = {"org.opencontainers.image.ref.name": tag}
        entries.append(top)
        self._write_index(entries)
        self.refs[tag] = top["digest"]
        return str(top["digest"])


# -- the registry --------------------------------------------------------------------------------


@dataclass
class Registry:
    port: int
    ca: RegistryCA
    proc: subprocess.Popen[bytes]
    log: Path
    push_creds: str | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def push(self, layout: Layout, tag: str, repository: str) -> None:
        cmd = [
            "skopeo", "--insecure-policy", "copy", "--all", "--quiet", "--preserve-digests",
            "--dest-cert-dir", str(self.ca.dir / "skopeo"),
            f"oci:{layout.dir}:{tag}", f"docker://{self.host}/{repository}:{tag}",
        ]
        if self.push_creds:
            cmd[3:3] = ["--dest-creds", self.push_creds]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise AssertionError(f"skopeo push failed: {done.stderr}\nregistry log:\n{self.log.read_text()[-3000:]}")


def registry_config(root: Path, port: int, cert: Path, key: Path, auth: dict[str, Any]) -> str:
    return json.dumps(  # YAML is a superset of JSON
        {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(root / "data")}, "delete": {"enabled": True}},
            "http": {"addr": f"127.0.0.1:{port}", "secret": uuid.uuid4().hex, "tls": {"certificate": str(cert), "key": str(key)}},
            "auth": auth,
        }
    )


@contextlib.contextmanager
def run_registry(tmp: Path, ca: RegistryCA, auth: dict[str, Any], push_creds: str | None) -> Iterator[Registry]:
    port = free_port()
    cert, key, _, _ = ca.issue("registry")
    skopeo_dir = ca.dir / "skopeo"
    skopeo_dir.mkdir(exist_ok=True)
    shutil.copy(ca.cert, skopeo_dir / "ca.crt")
    config = tmp / f"registry-{port}.yml"
    config.write_text(registry_config(tmp, port, cert, key, auth))
    log = tmp / f"registry-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port, proc, log)
        yield Registry(port, ca, proc, log, push_creds)
    finally:
        stop(proc)


def htpasswd_auth(tmp: Path, users: Mapping[str, str]) -> dict[str, Any]:
    path = tmp / "htpasswd"
    lines = []
    for user, password in users.items():
        done = subprocess.run(["htpasswd", "-Bbn", user, password], capture_output=True, text=True, check=True)
        lines.append(done.stdout.strip())
    path.write_text("\n".join(lines) + "\n")
    return {"htpasswd": {"realm": "gpuguard-test", "path": str(path)}}


# -- the token issuer (distribution docs/spec/auth/token.md, jwt.md) ---------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class TokenIssuer:
    """HTTPS ``GET /token?service=&scope=``: JWTs signed by a key whose certificate the registry trusts.

    ``grants(user, repository) -> actions``: what a user (None = anonymous) may do.
    """

    ca: RegistryCA
    service: str
    issuer: str
    users: Mapping[str, str]
    grants: Callable[[str | None, str], set[str]]
    requests: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        _, _, self.cert, self.key = self.ca.issue("token-signer", server=False)

    def sign(self, claims: dict[str, Any]) -> str:
        header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(self.cert.public_bytes(serialization.Encoding.DER)).decode()]}
        signing_input = _b64url(json.dumps(header).encode()) + "." + _b64url(json.dumps(claims).encode())
        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return signing_input + "." + _b64url(signature)

    def handle(self, authorization: str | None, query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        user: str | None = None
        if authorization:
            if not authorization.startswith("Basic "):
                return 401, {"error": "unsupported"}
            name, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
            if self.users.get(name) != password:
                return 401, {"error": "bad credentials"}
            user = name
        access = []
        for scope in query.get("scope", []):
            kind, _, rest = scope.partition(":")
            repository, _, actions = rest.rpartition(":")
            allowed = sorted(set(actions.split(",")) & self.grants(user, repository))
            if kind == "repository" and allowed:
                access.append({"type": "repository", "name": repository, "actions": allowed})
        now = int(time.time())
        claims = {
            "iss": self.issuer, "sub": user or "", "aud": self.service, "exp": now + 300, "nbf": now - 10,
            "iat": now, "jti": uuid.uuid4().hex, "access": access,
        }
        return 200, {"token": self.sign(claims), "expires_in": 300}

    def auth_config(self) -> dict[str, Any]:
        return {
            "token": {
                "realm": f"https://127.0.0.1:{self.port}/token",
                "service": self.service,
                "issuer": self.issuer,
                "rootcertbundle": str(self.ca.cert),
            }
        }


@contextlib.contextmanager
def serve_https(handler: type[BaseHTTPRequestHandler], context: ssl.SSLContext | None) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextlib.contextmanager
def run_token_issuer(issuer: TokenIssuer) -> Iterator[TokenIssuer]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            auth = self.headers.get("Authorization")
            issuer.requests.append({"path": url.path, "query": query, "authorization": auth})
            status, body = issuer.handle(auth, query) if url.path == "/token" else (404, {})
            reply_json(self, status, body)

    with serve_https(Handler, issuer.ca.server_context("token-issuer")) as port:
        issuer.port = port
        yield issuer


# -- a hostile server ----------------------------------------------------------------------------


@dataclass
class Hostile:
    """Serves what the test sets in ``routes`` (path → (status, headers, body)); ``hang`` paths
    never answer until the server stops; every request is recorded."""

    routes: dict[str, tuple[int, dict[str, str], bytes]] = field(default_factory=dict)
    hang: set[str] = field(default_factory=set)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    port: int = 0
    ca: Path | None = None  # the CA of its TLS certificate

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"


@contextlib.contextmanager
def run_hostile(state: Hostile, context: ssl.SSLContext | None) -> Iterator[Hostile]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            state.requests.append((path, {k.lower(): v for k, v in self.headers.items()}))
            if path in state.hang:
                state.release.wait(timeout=DEADLINE)
                return
            status, headers, body = state.routes.get(path, (404, {}, b'{"errors":[{"code":"NOT_FOUND"}]}'))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if headers.get("Connection") == "close":
                self.close_connection = True  # the body ends when the connection does
            elif "Content-Length" not in headers:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(body)

    with serve_https(Handler, context) as port:
        state.port = port
        try:
            yield state
        finally:
            state.release.set()

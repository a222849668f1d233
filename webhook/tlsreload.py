"""The server's SSLContext, and reloading a rotated certificate/key into it without a restart.

A Secret volume is updated by the kubelet's atomic writer: the new files land in a fresh
timestamped directory and the ``..data`` symlink is swapped to it, so ``tls.crt``/``tls.key``
(symlinks through ``..data``) resolve to new inodes.  The watcher polls ``os.stat`` (which follows
the symlinks) of both files; on a change it reads both files once, checks the pair by loading it
into a throwaway context, and only then loads the very same bytes into the live context.  New
TLS connections get the new certificate; established keep-alive connections keep theirs.

The watcher is an asyncio task on the server's own event loop, not a thread: ``load_cert_chain``
releases the GIL, and OpenSSL does not promise that changing an SSL_CTX is safe while another
thread creates connections from it.  On the loop, no handshake starts while the load runs.

The bytes are handed to OpenSSL through an anonymous in-memory file (``memfd``), so nothing
is written to disk and a read-only root filesystem is fine.

A certificate outside its validity period is refused like a broken pair, at start and on rotation
(the old pair stays in use): the API server, a Go TLS client, rejects any certificate of the chain
for which ``now.Before(c.NotBefore) || now.After(c.NotAfter)`` (golang/go src/crypto/x509/verify.go,
``Certificate.isValid``, applied to the leaf, intermediates and roots), so serving it would only
fail every call.  The window is inclusive at both ends, as there.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography import x509

log = logging.getLogger("gpuguard.tls")


class CertificateError(ValueError):
    """A pair that cannot be served; ``reason`` labels it in the reload metric."""

    def __init__(self, message: str, reason: str = "invalid") -> None:
        super().__init__(message)
        self.reason = reason  # invalid | expired | not_yet_valid


class ReloadListener(Protocol):
    def __call__(self, result: str | None, not_after: float | None = None) -> None:
        """``result`` of a reload (None: no reload, the certificate in use at start); ``not_after``:
        when the certificate now in use expires (Unix time), if it changed."""


@dataclass(frozen=True, slots=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes
    source: str = "the serving certificate"  # where the certificate came from, for messages


def read_pair(cert: Path, key: Path) -> KeyPair:
    try:
        return KeyPair(cert.read_bytes(), key.read_bytes(), str(cert))
    except OSError as exc:
        raise CertificateError(f"cannot read TLS certificate/key: {exc}") from None


def _when(moment: dt.datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def check_validity(pair: KeyPair, now: dt.datetime | None = None) -> float:
    """The leaf's notAfter (Unix time); CertificateError if any certificate of the chain is out of date."""
    try:
        chain = x509.load_pem_x509_certificates(pair.cert_pem)
    except ValueError as exc:
        raise CertificateError(f"{pair.source} is not a PEM certificate chain: {exc}") from None
    now = now or dt.datetime.now(dt.UTC)
    for i, cert in enumerate(chain):
        names = [a.value for a in cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)]
        what = f"serving certificate {pair.source}" if i == 0 else f"certificate {i + 1} of the chain in {pair.source}"
        what += f" (CN={names[0]!s})" if names else ""
        if now > cert.not_valid_after_utc:
            raise CertificateError(f"{what} expired at {_when(cert.not_valid_after_utc)}", "expired")
        if now < cert.not_valid_before_utc:
            raise CertificateError(f"{what} is not valid before {_when(cert.not_valid_before_utc)}", "not_yet_valid")
    return chain[0].not_valid_after_utc.timestamp()


@contextlib.contextmanager
def _as_file(data: bytes, name: str) -> Iterator[str]:
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create(name, flags=getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
    else:  # pragma: no cover - non-Linux fallback
        import tempfile

        with tempfile.NamedTemporaryFile(prefix=name) as fh:
            fh.write(data)
            fh.flush()
            yield fh.name


def load_pair(context: ssl.SSLContext, pair: KeyPair) -> None:
    with _as_file(pair.cert_pem, "tls.crt") as cert_path, _as_file(pair.key_pem, "tls.key") as key_path:
        context.load_cert_chain(cert_path, key_path)


def check_pair(pair: KeyPair, now: dt.datetime | None = None) -> float:
    """The certificate's notAfter (Unix time); CertificateError unless the PEMs parse, the key
    belongs to the certificate and every certificate of the chain is within its validity period."""
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        load_pair(probe, pair)
    except (ssl.SSLError, OSError) as exc:
        raise CertificateError(f"certificate and key do not form a usable pair: {exc}") from None
    return check_validity(pair, now)


TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


def server_context(cert: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """A TLS ≥ 1.2 server context; with ``client_ca`` clients must present a certificate it signed."""
    pair = read_pair(cert, key)
    check_pair(pair)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # TLS 1.2 with forward-secret AEAD suites only (no CBC); TLS 1.3 suites are all AEAD.  Go's
    # TLS client, which the API server uses, offers these by default.
    context.set_ciphers(TLS12_CIPHERS)
    context.set_alpn_protocols(["http/1.1"])
    load_pair(context, pair)
    if client_ca is not None:
        try:
            context.load_verify_locations(cafile=str(client_ca))
        except (ssl.SSLError, OSError) as exc:
            raise CertificateError(f"cannot load client CA {client_ca}: {exc}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


Signature = tuple[tuple[int, int, int, int], ...]


def _signature(paths: tuple[Path, ...]) -> Signature | None:
    try:
        stats = [os.stat(p) for p in paths]
    except OSError:
        return None  # mid-swap or removed: look again next time
    return tuple((s.st_dev, s.st_ino, s.st_mtime_ns, s.st_size) for s in stats)


class CertificateReloader:
    def __init__(
        self,
        context: ssl.SSLContext,
        cert: Path,
        key: Path,
        on_result: ReloadListener | None = None,
    ) -> None:
        self.context = context
        self.paths = (cert, key)
        self.on_result = on_result
        self._loaded = _signature(self.paths)
        self._rejected: Signature | None = None
        self.not_after: float | None = None
        self._warned_expired = False
        with contextlib.suppress(CertificateError):  # the pair server_context() loaded a moment ago
            self.not_after = check_validity(read_pair(cert, key))
        if on_result and self.not_after is not None:
            on_result(None, self.not_after)

    def check(self) -> bool:
        """Reload if the files changed and form a valid pair; True when a reload happened."""
        sig = _signature(self.paths)
        self._warn_if_expired()
        if sig is None or sig == self._loaded or sig == self._rejected:
            return False
        try:
            pair = read_pair(*self.paths)
            not_after = check_pair(pair)
        except CertificateError as exc:
            # Typically a half-finished manual copy, or a renewal gone wrong; the old pair stays.
            log.warning("not reloading the serving certificate: %s", exc)
            self._rejected = sig
            if self.on_result:
                self.on_result(exc.reason)
            return False
        load_pair(self.context, pair)
        self._loaded = sig
        self.not_after, self._warned_expired = not_after, False
        log.info("reloaded the serving certificate from %s", self.paths[0])
        if self.on_result:
            self.on_result("ok", not_after)
        return True

    def _warn_if_expired(self) -> None:
        """The certificate in use ran out while serving: say so once (the metric shows it too)."""
        if self.not_after is None or self._warned_expired:
            return
        now = dt.datetime.now(dt.UTC)
        if now.timestamp() > self.not_after:
            self._warned_expired = True
            expired = dt.datetime.fromtimestamp(self.not_after, dt.UTC)
            log.error("the serving certificate in use expired at %s; the API server rejects it until it is "
                      "rotated", _when(expired))

    async def run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                self.check()
            except Exception:  # never let the watcher die; the old certificate stays in use
                log.exception("serving certificate reload failed")

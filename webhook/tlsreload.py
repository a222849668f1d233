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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("gpuguard.tls")


class CertificateError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


def read_pair(cert: Path, key: Path) -> KeyPair:
    try:
        return KeyPair(cert.read_bytes(), key.read_bytes())
    except OSError as exc:
        raise CertificateError(f"cannot read TLS certificate/key: {exc}") from None


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


def check_pair(pair: KeyPair) -> None:
    """Raise CertificateError unless the PEMs parse and the key belongs to the certificate."""
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        load_pair(probe, pair)
    except (ssl.SSLError, OSError) as exc:
        raise CertificateError(f"certificate and key do not form a usable pair: {exc}") from None


def server_context(cert: Path, key: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """A TLS ≥ 1.2 server context; with ``client_ca`` clients must present a certificate it signed."""
    pair = read_pair(cert, key)
    check_pair(pair)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
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
        on_result: Callable[[str], None] | None = None,
    ) -> None:
        self.context = context
        self.paths = (cert, key)
        self.on_result = on_result
        self._loaded = _signature(self.paths)
        self._rejected: Signature | None = None

    def check(self) -> bool:
        """Reload if the files changed and form a valid pair; True when a reload happened."""
        sig = _signature(self.paths)
        if sig is None or sig == self._loaded or sig == self._rejected:
            return False
        try:
            pair = read_pair(*self.paths)
            check_pair(pair)
        except CertificateError as exc:
            # Typically a half-finished manual copy; the files will change again.
            log.warning("not reloading the serving certificate: %s", exc)
            self._rejected = sig
            if self.on_result:
                self.on_result("invalid")
            return False
        load_pair(self.context, pair)
        self._loaded = sig
        log.info("reloaded the serving certificate from %s", self.paths[0])
        if self.on_result:
            self.on_result("ok")
        return True

    async def run(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                self.check()
            except Exception:  # never let the watcher die; the old certificate stays in use
                log.exception("serving certificate reload failed")

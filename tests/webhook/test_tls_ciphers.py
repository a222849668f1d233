"""The webhook's TLS: 1.2 and 1.3 only, and TLS 1.2 with forward-secret AEAD suites only (no CBC)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from certs.tls import generate_bundle
from tests.support.webhook_server import LOCAL_SANS
from webhook.tlsreload import server_context


@pytest.fixture(scope="module")
def context(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    bundle = generate_bundle("gpuguard", "gpuguard", tmp_path_factory.mktemp("certs"), extra_sans=LOCAL_SANS)
    return server_context(Path(bundle.tls_crt), Path(bundle.tls_key))


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> str | None:
    """A TLS handshake over memory BIOs; the negotiated cipher, or None when it fails."""
    s_in, s_out, c_in, c_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    srv = server.wrap_bio(s_in, s_out, server_side=True)
    cli = client.wrap_bio(c_in, c_out, server_hostname="localhost")
    for _ in range(10):
        for side in (cli, srv):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                return None
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if srv.cipher() and cli.cipher():
            try:
                cli.do_handshake()
                srv.do_handshake()
            except ssl.SSLWantReadError:
                continue
            cipher = cli.cipher()
            return cipher[0] if cipher else None
    return None


def _client(maximum: ssl.TLSVersion, ciphers: str | None = None) -> ssl.SSLContext:
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    client.maximum_version = maximum
    if ciphers:
        client.set_ciphers(ciphers)
    return client


def test_tls12_suites_are_all_aead_with_forward_secrecy(context: ssl.SSLContext) -> None:
    tls12 = [c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 and all(("GCM" in n or "CHACHA20" in n) and n.startswith("ECDHE") for n in tls12), tls12


def test_a_client_offering_only_cbc_suites_is_refused(context: ssl.SSLContext) -> None:
    """Issue: TLS 1.2 offered two CBC suites."""
    assert _handshake(context, _client(ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA")) is None
    assert _handshake(context, _client(ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-AES128-SHA256")) is None


def test_go_like_clients_still_connect(context: ssl.SSLContext) -> None:
    cipher = _handshake(context, _client(ssl.TLSVersion.TLSv1_2))
    assert cipher is not None and ("GCM" in cipher or "CHACHA20" in cipher)
    assert _handshake(context, _client(ssl.TLSVersion.TLSv1_3)) is not None

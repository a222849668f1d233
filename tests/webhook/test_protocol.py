"""Plain HTTP sent to the webhook's TLS port, over a real socket to ``gpuguard serve``: a ``400``
saying the port speaks HTTPS (not a bare close), read of the rest bounded in bytes and time, and
TLS clients served as before."""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from collections.abc import Iterator

import pytest

from certs.tls import Bundle, generate_bundle
from tests.support.admission import fixture_object, review
from tests.support.webhook_server import LOCAL_SANS, Server, call, ssl_client_context, start_server, stop_server

pytestmark = pytest.mark.integration

HANDSHAKE_TIMEOUT = 1.5  # --handshake-timeout: the longest a plain-HTTP client is kept
DEADLINE = 15.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    bundle: Bundle = generate_bundle("gpuguard", "gpuguard", tmp_path_factory.mktemp("certs"), extra_sans=LOCAL_SANS)
    srv = start_server(tmp_path_factory.mktemp("srv"), bundle, "--handshake-timeout", str(HANDSHAKE_TIMEOUT))
    yield srv
    stop_server(srv)


def plain(server: Server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE)


def read_until_closed(sock: socket.socket) -> tuple[bytes, bool]:
    """(what the server sent, whether it ended with a clean end of stream rather than a reset)."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except ConnectionResetError:
        return b"".join(chunks), False
    return b"".join(chunks), True


def metric(server: Server, line: str) -> bool:
    with server.client() as client:
        return line in client.get("/metrics").text


def test_plain_http_is_answered_400_this_port_speaks_https(server: Server) -> None:
    with plain(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        answer, clean = read_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
    assert b"connection: close" in head.lower()
    assert f"content-length: {len(body)}".encode() in head.lower()
    assert b"this port speaks HTTPS" in body
    assert clean  # the answer arrives before an orderly close, not lost to a reset
    assert metric(server, 'gpuguard_connections_rejected_total{reason="plain_http"}')


@pytest.mark.parametrize("method", [b"POST /validate", b"PUT /x", b"OPTIONS *", b"DELETE /x", b"PRI *"])
def test_any_method_gets_the_answer(server: Server, method: bytes) -> None:
    with plain(server) as sock:
        sock.sendall(method + b" HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}")
        answer, _ = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 400 ") and b"this port speaks HTTPS" in answer


def test_a_client_that_stays_is_cut_at_the_handshake_deadline(server: Server) -> None:
    """The answer is written at once; a client that neither closes nor stops sending is kept no
    longer than --handshake-timeout."""
    with plain(server) as sock:
        started = time.monotonic()
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n")  # an unfinished head, then silence
        sock.settimeout(DEADLINE)
        first = sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 400 ")
        assert time.monotonic() - started < HANDSHAKE_TIMEOUT  # answered on the first bytes
        rest, _ = read_until_closed(sock)
        elapsed = time.monotonic() - started
    assert b"this port speaks HTTPS" in first + rest
    assert elapsed < HANDSHAKE_TIMEOUT + 2.0, elapsed


def test_what_follows_the_answer_is_read_within_a_bound(server: Server) -> None:
    """A client streaming a body after the answer is cut once the drop limit is passed (64 KiB),
    long before it has sent its 8 MiB."""
    sent = 0
    with plain(server) as sock:
        sock.sendall(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 8388608\r\n\r\n")
        chunk = b"x" * 16384
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            while sent < 8 * 1024 * 1024:
                sock.sendall(chunk)
                sent += len(chunk)
    assert sent < 8 * 1024 * 1024


def test_tls_clients_are_served_as_before(server: Server) -> None:
    for _ in range(3):  # on fresh connections, around plain-HTTP ones
        with plain(server) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
            read_until_closed(sock)
        with server.client() as client:
            assert client.get("/healthz").status_code == 200
            assert call(client, "validate", review("CREATE", fixture_object("pod-gpu-with-limit.json")))["allowed"]
    # and a raw TLS socket speaks HTTP/1.1 over it
    ctx = ssl_client_context(server.ca)
    with ctx.wrap_socket(plain(server), server_hostname="localhost") as tls:
        tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        data = b""
        with contextlib.suppress(ssl.SSLError, ConnectionResetError):
            while chunk := tls.recv(65536):
                data += chunk
    assert data.startswith(b"HTTP/1.1 200 ")


def test_bytes_that_are_neither_tls_nor_http_are_still_closed_without_an_answer(server: Server) -> None:
    with plain(server) as sock:
        sock.sendall(b"\x00\x01\x02garbage\r\n\r\n")
        answer, _ = read_until_closed(sock)
    assert answer == b""

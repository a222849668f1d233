"""The webhook port's HTTP limits, against ``gpuguard serve`` over real TLS with raw sockets:
oversized heads, too many headers, slow heads and bodies, silent and idle connections, and the
connection cap are each closed and counted, and the server keeps answering."""

from __future__ import annotations

import contextlib
import socket
import ssl
import time
from collections.abc import Iterator

import httpx
import pytest

from certs.tls import Bundle, generate_bundle
from tests.support.admission import fixture_object, review
from tests.support.webhook_server import (
    LOCAL_SANS,
    Server,
    call,
    ssl_client_context,
    start_server,
    stop_server,
)

pytestmark = pytest.mark.integration

# The server's --request-timeout and --handshake-timeout in these tests: short enough to watch them
# expire, long enough that a healthy client on a loaded machine (test workers on two cores) is in.
TIMEOUT = 2.0
DEADLINE = 15.0
CAP, PER_SOURCE = 20, 12  # --max-connections, --max-connections-per-source
# Loopback answers every 127/8 address: the tests' own client is 127.0.0.1, "other pods" are these.
ATTACKERS = ("127.0.0.2", "127.0.0.3")


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    return generate_bundle("gpuguard", "gpuguard", tmp_path_factory.mktemp("certs"), extra_sans=LOCAL_SANS)


def _capped_server(tmp_path_factory: pytest.TempPathFactory, bundle: Bundle, deadline: float) -> Iterator[Server]:
    """``gpuguard serve`` with this module's connection caps and ``deadline`` for the request head and
    the TLS handshake."""
    srv = start_server(
        tmp_path_factory.mktemp("srv"), bundle, "--request-timeout", str(deadline), "--handshake-timeout",
        str(deadline), "--max-connections", str(CAP), "--max-connections-per-source", str(PER_SOURCE),
    )
    yield srv
    stop_server(srv)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, bundle: Bundle) -> Iterator[Server]:
    yield from _capped_server(tmp_path_factory, bundle, TIMEOUT)


@pytest.fixture
def patient_server(tmp_path_factory: pytest.TempPathFactory, bundle: Bundle) -> Iterator[Server]:
    """The same caps with deadlines no loaded machine reaches, for a test about the cap alone.  (A
    /healthz at the cap was closed unanswered in CI twice; the cause was a second connection count
    behind the gate, see test_connection_gate, and not a deadline.)"""
    yield from _capped_server(tmp_path_factory, bundle, DEADLINE)


def tcp(server: Server, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE, source_address=(source, 0))


def tls(server: Server, source: str = "127.0.0.1") -> ssl.SSLSocket:
    return ssl_client_context(server.ca).wrap_socket(tcp(server, source), server_hostname="localhost")


def read_all(sock: ssl.SSLSocket) -> bytes:
    """Everything the server sends until it closes the connection (bounded by the socket timeout)."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except (ConnectionResetError, ssl.SSLError):
        pass
    return b"".join(chunks)


def metric(server: Server, line: str) -> bool:
    with server.client() as client:
        return line in client.get("/metrics").text


def healthy(server: Server) -> None:
    with server.client() as client:
        assert client.get("/healthz").status_code == 200
        assert call(client, "validate", review("CREATE", fixture_object("pod-gpu-with-limit.json")))["allowed"]


def test_an_oversized_head_is_431_before_it_is_buffered(server: Server) -> None:
    with tls(server) as sock:
        # The server may answer and close while the rest is still being sent.
        with contextlib.suppress(ssl.SSLError, ConnectionResetError, BrokenPipeError):
            sock.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (256 * 1024))
        answer = read_all(sock)
    # The 431 is written before the close; a client still sending may see the reset first.
    assert answer == b"" or (answer.startswith(b"HTTP/1.1 431 ") and b"request head too large" in answer)
    assert metric(server, 'gpuguard_connections_rejected_total{reason="request_head_too_large"}')
    healthy(server)


def test_too_many_headers_is_431(server: Server) -> None:
    headers = b"".join(b"X-H%d: v\r\n" % i for i in range(150))
    with tls(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 431 ") and b"too many request headers" in answer
    healthy(server)


def test_a_long_url_is_414(server: Server) -> None:
    with tls(server) as sock:
        sock.sendall(b"GET /" + b"a" * (16 * 1024) + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 414 ")


@pytest.mark.parametrize(
    ("what", "send", "reason"),
    [
        ("a connection that never sends a request", b"", "head_timeout"),
        ("a head trickled forever", b"POST /validate HTTP/1.1\r\nHost: x\r\n", "head_timeout"),
        ("a body that never completes", b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{", "body_timeout"),
    ],
)
def test_slow_or_silent_clients_are_closed(server: Server, what: str, send: bytes, reason: str) -> None:
    with tls(server) as sock:
        started = time.monotonic()
        if send:
            sock.sendall(send)
        if b"Host" in send and reason == "head_timeout":
            # Keep trickling header bytes: each byte must not extend the deadline.
            sock.settimeout(0.2)
            while time.monotonic() - started < 4 * TIMEOUT:
                try:
                    sock.sendall(b"X")
                    if sock.recv(1) == b"":
                        break
                except TimeoutError:
                    continue
                except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
                    break
            sock.settimeout(DEADLINE)
        read_all(sock)
        elapsed = time.monotonic() - started
    assert elapsed < 4 * TIMEOUT, what
    assert metric(server, f'gpuguard_connections_rejected_total{{reason="{reason}"}}'), what
    healthy(server)


def refused(server: Server, source: str = "127.0.0.1") -> bool:
    """A new TLS connection is closed before or at its handshake, without an answer."""
    try:
        sock = tls(server, source)
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError):
        return True
    with sock:
        return read_all(sock) == b""


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True


def wait_healthy(server: Server) -> None:
    deadline = time.monotonic() + DEADLINE
    while True:
        try:
            healthy(server)
            return
        except (httpx.TransportError, AssertionError):
            assert time.monotonic() < deadline
            time.sleep(0.05)  # bounded polling: closed connections are released asynchronously


def test_one_source_holds_at_most_its_share(server: Server) -> None:
    """A pod opening connections in a loop gets --max-connections-per-source of them, no more."""
    wait_healthy(server)
    held: list[ssl.SSLSocket] = []
    try:
        for _ in range(PER_SOURCE):
            held.append(tls(server, ATTACKERS[0]))
        assert all(refused(server, ATTACKERS[0]) for _ in range(3))
        healthy(server)  # everyone else still gets in
    finally:
        for sock in held:
            sock.close()
    wait_healthy(server)
    assert metric(server, 'gpuguard_connections_rejected_total{reason="too_many_connections_from_source"}')


def test_idle_connections_at_the_cap_make_room_for_a_review(patient_server: Server) -> None:
    """Issue: 1,500 idle sockets filled the cap and no fresh review was answered while they stayed
    open.  At the cap a new connection evicts an idle one, from the address that holds the most."""
    server = patient_server
    wait_healthy(server)
    held = [tls(server, ATTACKERS[0]) for _ in range(PER_SOURCE)]
    held += [tls(server, ATTACKERS[1]) for _ in range(CAP - PER_SOURCE)]
    try:
        for _ in range(5):  # each review takes a place the idle sockets held
            healthy(server)
        # the first review found the cap full: the oldest idle connection of the biggest holder made room
        assert closed_by_server(held[0]), "the biggest holder's idle connections make room first"
    finally:
        for sock in held:
            sock.close()
    wait_healthy(server)
    assert metric(server, 'gpuguard_connections_rejected_total{reason="evicted"}')


def test_a_cap_kept_full_by_a_flood_still_answers_every_review(patient_server: Server) -> None:
    """A pod that reopens what is evicted keeps the cap full: each review evicts one, and every one is
    answered (a second count behind the gate once closed 3 in 1,000 unanswered, after the handshake)."""
    server = patient_server
    wait_healthy(server)
    held = [tls(server, ATTACKERS[i % 2]) for i in range(CAP)]
    try:
        for i in range(100):
            with server.client() as client:  # a fresh connection each time, as at the cap
                assert client.get("/healthz").status_code == 200, i
            held[i].close()  # evicted by now, or idle: closed either way
            held.append(tls(server, ATTACKERS[i % 2]))  # and the flood fills the place again
        assert not metric(server, 'gpuguard_connections_rejected_total{reason="too_many_connections"}')
    finally:
        for sock in held:
            sock.close()


def test_silent_connections_count_before_tls_and_close_at_the_handshake_deadline(server: Server) -> None:
    """Connections that never send a ClientHello hold places too, and only until the handshake
    deadline: the event loop's own TLS server kept them for good (5,000 held 290 MB)."""
    wait_healthy(server)
    silent = [tcp(server, ATTACKERS[i % 2]) for i in range(CAP)]
    try:
        healthy(server)  # the cap is full of connections that have not even said hello: one makes room
        started = time.monotonic()
        for sock in silent:
            assert closed_by_server(sock)
        assert time.monotonic() - started < 4 * TIMEOUT
    finally:
        for sock in silent:
            sock.close()
    wait_healthy(server)
    assert metric(server, 'gpuguard_connections_rejected_total{reason="tls_handshake_timeout"}')


def test_a_failed_handshake_is_counted_and_frees_its_place(server: Server) -> None:
    wait_healthy(server)
    for _ in range(25):  # more than the cap: each failure must give its place back
        # bytes that are no TLS record, and plain HTTP on the TLS port (answered 400, then closed)
        for first in (b"\x00\x01\x02\x03\x04 not TLS\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE) as sock:
                sock.sendall(first)
                try:
                    while sock.recv(4096):
                        pass
                except ConnectionResetError:
                    pass
    wait_healthy(server)
    assert metric(server, 'gpuguard_connections_rejected_total{reason="tls_handshake_failed"}')
    assert metric(server, 'gpuguard_connections_rejected_total{reason="plain_http"}')

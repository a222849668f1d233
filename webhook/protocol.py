"""The webhook's HTTP/1.1 protocol: uvicorn's httptools protocol with the limits a public port needs.

uvicorn bounds neither the size of a request's head nor how long a client may take to send it,
and closes an idle connection only after it has answered a request.  Measured on the first release: one
request with 146 MiB of headers was answered, and 15,000 connections that never sent a request
held 615 MB.  This subclass adds, per connection:

* a cap on the request head (request line and headers, counted on the bytes received, before the
  parser buffers them), on the number of headers and on the URL: 431 or 414 and close;
* a deadline for the head, started when the connection opens or its next request begins (data
  trickled byte by byte does not extend it), and one for the body once the head is in;
* a cap on open connections: past it, a new connection is closed as soon as it is made (on the
  TLS port ``tls_accepting`` counts them instead, from the TCP connect).

On the TLS port the cap and a handshake deadline also hold before and during the handshake: with
uvicorn's own TLS (uvloop's server), a connection that never sends a ClientHello was kept for
good and never counted (5,000 silent connections held 290 MB).  ``tls_accepting`` serves TCP and
runs the standard library's TLS protocol (``asyncio.sslproto.SSLProtocol``, what
``loop.create_server(ssl=...)`` uses per connection) itself, counted from the TCP connect.

A cap alone is a lock-out: 1,500 idle sockets from one pod filled 1,024 slots and no fresh review
was answered while they stayed open.  So on the TLS port a source address holds at most
``max_connections_per_source`` connections, and at the cap a new connection evicts one that is not
serving a request — still handshaking, idle between requests, or sending its request slowly —
from the source that holds the most, oldest first.  A client of the API server's kind (a few
connections, each busy or briefly idle) always gets in; the handshake deadline
(``handshake_timeout``, a few seconds: the API server shakes hands in milliseconds) frees
the rest.

Plain HTTP sent to the TLS port (``curl http://…:8443``) is answered ``400`` with a body saying
the port speaks HTTPS, as Go's net/http does ("Client sent an HTTP request to an HTTPS server",
``(*conn).serve`` in src/net/http/server.go) and nginx with its 497, instead of a bare close.  The
first byte tells: every TLS record starts with its ContentType, 20 to 24 (RFC 8446 §5.1; 24 is
heartbeat, RFC 6520), and an SSLv2-compatible ClientHello with a byte whose high bit is set, so an
ASCII capital (an HTTP method) is never TLS.  Nothing more of the request is parsed: the answer is
written, the write side shut, and what the client still sends is read and dropped, up to
``PLAIN_HTTP_DRAIN_BYTES``, until it closes or the handshake deadline ends the connection.

The API server sends small heads (a few hundred bytes) and whole bodies at once, so none of this
touches it; the limits are ``ConnectionLimits`` and every rejection is counted by reason.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from asyncio.sslproto import SSLProtocol
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

Reject = Callable[[str], None]  # reason → count it


@dataclass(frozen=True)
class ConnectionLimits:
    max_head_bytes: int = 32 * 1024  # request line + headers
    max_headers: int = 100
    max_url_bytes: int = 8 * 1024
    head_timeout: float = 10.0  # seconds for a request's head to arrive
    body_timeout: float = 20.0  # seconds for its body, once the head is in
    max_connections: int = 1024
    max_connections_per_source: int = 256  # on the TLS port: per client address
    handshake_timeout: float = 3.0  # seconds for the TLS handshake, from the TCP connect


_STATUS = {431: b"431 Request Header Fields Too Large", 414: b"414 URI Too Long"}

PLAIN_HTTP_BODY = b"this port speaks HTTPS: the request was sent as plain HTTP; send it with https://\n"
PLAIN_HTTP_REPLY = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
    b"connection: close\r\n\r\n%s" % (len(PLAIN_HTTP_BODY), PLAIN_HTTP_BODY)
)
# What a plain-HTTP client may still send after the answer (dropped), before the connection is cut.
PLAIN_HTTP_DRAIN_BYTES = 64 * 1024


class _Rejected(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def guarded_protocol(
    limits: ConnectionLimits, on_reject: Reject | None = None, *, cap_connections: bool = True
) -> type[HttpToolsProtocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` enforcing ``limits``.

    ``cap_connections=False`` where ``tls_accepting`` counts connections in front of it: uvicorn's
    own set of connections drops an evicted or closing one only once its loss has come up through
    the TLS layer, a few loop turns later, so a second cap here refused, after its handshake, a
    connection the gate had just made room for (3 of 1,000 reviews at a full cap, on a loaded
    machine, were closed unanswered)."""

    def reject(reason: str) -> None:
        if on_reject is not None:
            on_reject(reason)

    class GuardedProtocol(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._deadline: asyncio.TimerHandle | None = None
            self._phase: str | None = None  # "head" | "body" | None (answering, or idle keep-alive)
            self._head_bytes = 0
            self._tail = b""
            self._header_count = 0
            self._url_bytes = 0
            self._refused = False

        # --- connection ---
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if cap_connections and len(self.connections) >= limits.max_connections:
                self._refused = True
                self.transport = transport
                reject("too_many_connections")
                transport.abort()
                return
            super().connection_made(transport)
            self._arm("head")

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._refused:
                return
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            if (self._phase is None and self.cycle is None) or (self._phase is None and self.cycle.response_complete):
                self._arm("head")  # the first bytes of the next request on a kept-alive connection
            if self._phase == "head":
                # Only the bytes up to the blank line that ends the head count (the same chunk
                # may carry the start of the body); the end may straddle two chunks.
                seen = self._tail + data
                end = seen.find(b"\r\n\r\n")
                self._head_bytes += len(data) if end < 0 else max(end + 4 - len(self._tail), 0)
                self._tail = seen[-3:]
                if self._head_bytes > limits.max_head_bytes:
                    self._respond(431, "request head too large")
                    return
            try:
                self._feed(data)
            except _Rejected as exc:
                self._respond(exc.status, exc.reason)

        def _feed(self, data: bytes) -> None:
            # uvicorn's data_received, with the parser errors our callbacks raise told apart.
            self._unset_keepalive_if_required()
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserCallbackError as exc:
                cause = exc.__context__
                if isinstance(cause, _Rejected):
                    raise cause from None
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
            except httptools.HttpParserError:
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
            except httptools.HttpParserUpgrade:
                self._unsupported_upgrade_warning()

        # --- parser callbacks ---
        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._header_count = 0
            self._url_bytes = 0
            if self._phase != "head":
                self._head_bytes = 0
                self._tail = b""
                self._arm("head")

        def on_url(self, url: bytes) -> None:
            self._url_bytes += len(url)
            if self._url_bytes > limits.max_url_bytes:
                raise _Rejected(414, "request URI too long")
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._header_count += 1
            if self._header_count > limits.max_headers:
                raise _Rejected(431, "too many request headers")
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._arm("body")
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._disarm()
            self._head_bytes = 0
            self._tail = b""
            super().on_message_complete()

        # --- limits ---
        def _arm(self, phase: str) -> None:
            self._disarm()
            self._phase = phase
            timeout = limits.head_timeout if phase == "head" else limits.body_timeout
            self._deadline = self.loop.call_later(timeout, self._expired, phase)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            self._phase = None

        def _expired(self, phase: str) -> None:
            self._deadline = None
            self._phase = None
            if not self.transport.is_closing():
                reject(f"{phase}_timeout")
                self.transport.close()

        def _respond(self, status: int, reason: str) -> None:
            self._disarm()
            reject(reason.replace(" ", "_"))
            body = reason.encode("ascii")
            head = b"HTTP/1.1 %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n" % (
                _STATUS[status],
                len(body),
            )
            self.transport.write(head + b"connection: close\r\n\r\n" + body)
            self.transport.close()

    return GuardedProtocol


class _Gate:
    """Open connections on one TLS port, handshaking or established, by client address."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limit = limits.max_connections
        self.per_source = limits.max_connections_per_source
        self.open = 0
        # Insertion order is age: the first evictable one of a source is its oldest.
        self.by_source: dict[str, dict[_GuardedTLS, None]] = {}

    def admit(self, conn: _GuardedTLS, source: str) -> str | None:
        """Count ``conn``; the reason it is refused, if it is."""
        held = self.by_source.get(source)
        if held is not None and len(held) >= self.per_source:
            return "too_many_connections_from_source"
        if self.open >= self.limit:
            victim = self._victim()
            if victim is None:
                return "too_many_connections"
            victim.evict()
        self.by_source.setdefault(source, {})[conn] = None
        self.open += 1
        return None

    def leave(self, conn: _GuardedTLS, source: str) -> None:
        held = self.by_source.get(source)
        if held is not None and held.pop(conn, False) is None:
            self.open -= 1
            if not held:
                del self.by_source[source]

    def _victim(self) -> _GuardedTLS | None:
        for _, held in sorted(self.by_source.items(), key=lambda item: -len(item[1])):
            for conn in held:
                if not conn.serving():
                    return conn
        return None


class _GuardedTLS(SSLProtocol):
    """The event loop's own TLS server protocol (what ``create_server(ssl=...)`` builds per
    connection), counted against the cap from the moment TCP connects, with a handshake deadline."""

    # The standard library reads into a 256 KiB buffer per connection: 256 MiB at the cap.  Two
    # full TLS records (16 KiB each) are all one read can decrypt at a time anyway.
    max_size = 32 * 1024

    def __init__(
        self, http: asyncio.Protocol, context: ssl.SSLContext, gate: _Gate, limits: ConnectionLimits, reject: Reject
    ) -> None:
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        super().__init__(
            # typeshed says int; the standard library takes any number of seconds
            loop, http, context, waiter, server_side=True, ssl_handshake_timeout=cast(int, limits.handshake_timeout)
        )
        self._http = http
        self._gate = gate
        self._reject = reject
        self._source = ""
        self._counted = False
        self._evicted = False
        self._accepted_at = time.monotonic()
        self._handshake_timeout = limits.handshake_timeout
        self._handshake = waiter
        self._first_byte_seen = False
        self._plain_drained: int | None = None  # set once plain HTTP was answered: bytes dropped since

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        self._source = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        refused = self._gate.admit(self, self._source)
        if refused is not None:
            self._reject(refused)
            cast(asyncio.Transport, transport).abort()
            return
        self._counted = True
        self._transport_ref = transport
        super().connection_made(transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        self._buffer: memoryview = super().get_buffer(sizehint)  # the loop reads into it
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        if self._plain_drained is not None:  # answered already: drop the rest, within a bound
            self._plain_drained += nbytes
            if self._plain_drained > PLAIN_HTTP_DRAIN_BYTES:
                cast(asyncio.Transport, self._transport_ref).abort()
            return
        if not self._first_byte_seen and nbytes > 0:
            self._first_byte_seen = True
            if 0x41 <= self._buffer[0] <= 0x5A:  # "A".."Z": an HTTP method, never a TLS record
                self._answer_plain_http()
                return
        super().buffer_updated(nbytes)

    def _answer_plain_http(self) -> None:
        self._plain_drained = 0
        self._reject("plain_http")
        transport = cast(asyncio.Transport, self._transport_ref)
        transport.write(PLAIN_HTTP_REPLY)
        if transport.can_write_eof():
            transport.write_eof()  # the client reads the answer, then an end of stream

    def eof_received(self) -> None:
        if self._plain_drained is not None:
            return None  # the client is done: the transport closes
        return super().eof_received()  # may be True (the standard library closes it later)

    def serving(self) -> bool:
        """Whether a request has been received whole and is being answered (never evicted)."""
        if not self._handshake.done():
            return False
        http = self._http
        phase = getattr(http, "_phase", None)
        cycle = getattr(http, "cycle", None)
        return phase is None and cycle is not None and not cycle.response_complete

    def evict(self) -> None:
        """Close at once, and free the slot now (the loop reports the loss later)."""
        self._evicted = True
        self._gate.leave(self, self._source)
        self._counted = False
        self._reject("evicted")
        cast(asyncio.Transport, self._transport_ref).abort()

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)  # settles the handshake if it was still running
        waiter = self._handshake
        failed = waiter.done() and not waiter.cancelled() and waiter.exception() is not None
        if not self._counted:
            return
        self._gate.leave(self, self._source)
        self._counted = False
        if failed and not self._evicted and self._plain_drained is None:
            late = time.monotonic() - self._accepted_at >= self._handshake_timeout
            self._reject("tls_handshake_timeout" if late else "tls_handshake_failed")


def tls_accepting(
    context: ssl.SSLContext,
    limits: ConnectionLimits,
    on_reject: Reject | None = None,
) -> Callable[..., asyncio.BaseProtocol]:
    """A protocol factory for ``uvicorn.Config(http=...)`` on a port serving TLS itself (uvicorn's
    own ``ssl`` left unset): at most ``limits.max_connections`` connections, handshaking or not
    (per client address at most ``max_connections_per_source``; at the cap, one that serves no
    request is evicted), and a handshake deadline of ``limits.handshake_timeout``; then
    ``guarded_protocol``'s HTTP over TLS, with this gate as the only connection count."""
    gate = _Gate(limits)
    http = guarded_protocol(limits, on_reject, cap_connections=False)

    def reject(reason: str) -> None:
        if on_reject is not None:
            on_reject(reason)

    def factory(**kwargs: Any) -> asyncio.BaseProtocol:
        return _GuardedTLS(http(**kwargs), context, gate, limits, reject)

    return factory

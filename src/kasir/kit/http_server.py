"""uvicorn's HTTP protocol with TCP_NODELAY on every connection, one write per answer, and limits no
client can outwait.

TCP_NODELAY: with `--workers N` uvicorn binds the listening socket itself with `proto` 0; the
connections it accepts inherit that, and asyncio turns Nagle's algorithm off only for sockets
that say IPPROTO_TCP. Nagle then holds each response's last segment until the client's delayed
ACK on every keep-alive request, a delay per request that dwarfs the request itself (uvicorn
issue #3149, open). uvloop sets the option itself, asyncio does not: set it here.

One write per answer, after the rest of the event loop's pass: uvicorn writes a response's status
line and headers when the app sends them, and its body in a second write, each the moment it is
made. With Nagle off each write is its own segment and its own wake-up of the client.
`_WrittenAtEndOfPass` keeps a response's writes until the callbacks of the loop's current pass
have run (`call_soon`) and writes them at once: the head goes with the body, and the answers
finished in one pass go out back to back, after the pass's work, rather than one by one in the
middle of it. Measured (bench/results/2026-11-25-one-write.md), both the server and its clients
spend markedly less CPU per request that way than with the head and body joined but written at
once. A response holds at most `_HELD_BYTES_MAX` this way: a larger one (a stream whose producer
does not wait) goes out as it grows, under uvicorn's flow control as before.

Limits (uvicorn has none for these; its keep-alive timeout covers only the wait between two
requests of a connection):

- `max_header_bytes`: a request line and headers larger than this are answered 431 and the
  connection closed, before the parser holds them (it buffers a header value until it ends).
- `MAX_HEADER_LINES`: so do more header lines than any client sends (each becomes a pair of
  byte strings in the request's scope, and every middleware that reads headers walks them all).
- `header_timeout`: a connection must send a whole request line and headers within this from
  its first byte (or from being opened): a client that sends nothing, or a byte now and then,
  is answered 408 and closed.
- `body_timeout`: a body must arrive whole within this from the end of its headers.

- `max_per_address`: so is a connection from a client address that already holds this many (the
  trusted reverse proxies excepted), so that one client cannot take the whole cap.
- `write_timeout`: an answer the client stops reading (uvicorn's flow control has paused writing)
  for this long is dropped and the connection aborted.

- `max_connections`: a connection opened while the process already holds this many is answered
  503 and closed at once (uvicorn's own `limit_concurrency` answers only once a request's headers
  are in, so idle connections past it would still hold a file each). The cap is kept below the
  process's open-file limit: past that limit `accept()` fails, and asyncio logs the failure once
  per pending connection, every second, for as long as it lasts.

These answers are written straight to the socket (the request never reached the app) and
logged by no one: a flood of them costs a write and a close each.

What this depends on in uvicorn's `HttpToolsProtocol` (pinned in pyproject.toml to the minor range it
was tested with; tests/test_pins.py fails by name outside it): `connection_made`, `data_received`,
`on_headers_complete`, `on_message_complete`, `on_response_complete`, `pause_writing`, `resume_writing` and
`connection_lost` are its hooks;
`self.transport`, `self.loop`, `self.connections` (the server's set of open connections) and
`self.cycle` (the request's response cycle, made in `on_headers_complete`) are its attributes; the cycle
writes through `cycle.transport` (`write`, `close`, `is_closing`) and says `cycle.more_body` while a
body is still arriving.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import resource
import socket
import time
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_END_OF_HEADERS = b"\r\n\r\n"


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_header_bytes: int
    header_timeout: float
    body_timeout: float
    max_connections: int
    max_per_address: int
    unlimited_addresses: frozenset[str]  # the trusted reverse proxies: every client comes through them
    write_timeout: float


# Files a server process needs besides its connections: the database, its pool and files, the
# callback worker's outgoing connections, logs, the listening socket. Connections get the rest.
FILES_FOR_THE_REST = 128
log = logging.getLogger("kasir.http")


def connection_cap(wanted: int) -> int:
    """`wanted`, lowered to what the process's open-file limit leaves for connections."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - FILES_FOR_THE_REST))


# The request line, the headers and the empty line that ends them. Browsers and SDKs send a few dozen.
MAX_HEADER_LINES = 128
_limits: ConnectionLimits | None = None


def connection_limits() -> ConnectionLimits:
    """Read from the settings once per process (the protocol is made by uvicorn, with no settings)."""
    global _limits
    if _limits is None:
        from kasir.config import get_settings

        settings = get_settings()
        proxies = frozenset(address.strip() for address in settings.trusted_proxies.split(",") if address.strip())
        _limits = ConnectionLimits(
            settings.max_header_bytes,
            settings.header_timeout_seconds,
            settings.body_timeout_seconds,
            connection_cap(settings.max_connections),
            settings.max_connections_per_address,
            proxies,
            settings.write_timeout_seconds,
        )
    return _limits


def use_connection_limits(limits: ConnectionLimits | None) -> None:
    """Limits for the connections made from now on, instead of the settings' (None: the settings' again).
    For a process that serves with its own limits: the tests, with limits small enough to reach."""
    global _limits
    _limits = limits


# Open connections per client address, in this process (every server of the process shares the cap).
_per_address: collections.Counter[str] = collections.Counter()


_ACCEPT_FAILED = "socket.accept() out of system resource"


class _QuietAcceptErrors:
    """asyncio reports a failed accept() once per pending connection, each with a traceback, then
    retries a second later; should the open-file limit be reached anyway (other files), say it
    once every ten seconds with a count instead."""

    def __init__(self) -> None:
        self.muted = 0
        self.said_at = float("-inf")

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != _ACCEPT_FAILED:
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - self.said_at < 10:
            self.muted += 1
            return
        log.warning(
            "accept() failed: %s (%d more since the last warning); new connections wait",
            context.get("exception"),
            self.muted,
        )
        self.said_at, self.muted = now, 0


_quieted: set[int] = set()


def _quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    if id(loop) not in _quieted and loop.get_exception_handler() is None:
        loop.set_exception_handler(_QuietAcceptErrors())
        _quieted.add(id(loop))


def _answer(status: bytes) -> bytes:
    return b"HTTP/1.1 " + status + b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


_TOO_LARGE = _answer(b"431 Request Header Fields Too Large")
_TOO_SLOW = _answer(b"408 Request Timeout")
_FULL = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class NoDelayHttpToolsProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # the peer is already gone: uvicorn handles the closed connection
                pass
        super().connection_made(transport)
        self._limits = connection_limits()
        self._address: str | None = None  # counted against its address's cap until the connection ends
        self._write_deadline: asyncio.TimerHandle | None = None
        self._reading_headers = True
        # A request's body still arriving, and its answer already sent: an app may answer before reading the
        # body (a refusal), and the rest of that body is not the next request's headers.
        self._body_pending = self._answered = False
        self._header_bytes = self._header_lines = 0
        self._tail = b""  # the last bytes of the previous piece: the end of the headers may straddle two
        self._deadline: asyncio.TimerHandle | None = None
        _quiet_accept_errors(self.loop)
        if len(self.connections) > self._limits.max_connections:
            self._refuse(_FULL)
            return
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else None
        limits = self._limits
        if address is not None and address not in limits.unlimited_addresses and "*" not in limits.unlimited_addresses:
            if _per_address[address] >= limits.max_per_address:
                self._refuse(_FULL)  # this client holds its share: the others still get in
                return
            _per_address[address] += 1
            self._address = address
        self._arm(self._limits.header_timeout)

    def pause_writing(self) -> None:
        # The client stopped reading (its buffers and ours are full): it has write_timeout to start again.
        super().pause_writing()
        if self._write_deadline is None:
            self._write_deadline = self.loop.call_later(self._limits.write_timeout, self._stopped_reading)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None

    def _stopped_reading(self) -> None:
        self._write_deadline = None
        self.transport.abort()  # what it did not read is dropped: a close would wait to send it

    def _arm(self, seconds: float) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _refuse(self, answer: bytes) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self.transport.write(answer)
            self.transport.close()

    def _too_slow(self) -> None:
        self._deadline = None
        if self._answered and self._body_pending:  # the answer went out already: no second one, just close
            self.transport.close()
        elif self._reading_headers or (self.cycle is not None and self.cycle.more_body):
            self._refuse(_TOO_SLOW)

    def data_received(self, data: bytes) -> None:
        if self._reading_headers:
            if self._deadline is None:  # the first byte of a request on a kept-alive connection
                self._arm(self._limits.header_timeout)
            seen = self._tail + data
            end = seen.find(_END_OF_HEADERS)
            header_part = data if end < 0 else data[: max(0, end + 4 - len(self._tail))]
            self._header_bytes += len(header_part)
            self._header_lines += header_part.count(b"\n")
            self._tail = seen[-3:]
            if self._header_bytes > self._limits.max_header_bytes or self._header_lines > MAX_HEADER_LINES:
                self._refuse(_TOO_LARGE)
                return
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._reading_headers = False
        self._header_bytes, self._header_lines, self._tail = 0, 0, b""
        self._arm(self._limits.body_timeout)
        super().on_headers_complete()
        cycle = self.cycle  # uvicorn made the request's cycle over the connection's transport just now
        self._body_pending, self._answered = cycle is not None and cycle.more_body, False
        if cycle is not None and cycle.transport is self.transport:
            cycle.transport = _WrittenAtEndOfPass(self.transport, self.loop)  # type: ignore[assignment]

    def on_message_complete(self) -> None:
        self._disarm()  # the app has the whole request: its own time is not the client's
        self._body_pending = False
        if self._answered:
            self._reading_headers = True  # the rest of an early-answered body is read: the next request's headers
        super().on_message_complete()

    def on_response_complete(self) -> None:
        self._answered = True
        if not self._body_pending:
            self._reading_headers = True  # the next request's headers (its first byte arms the timer)
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None
        address, self._address = self._address, None
        if address is not None:
            _per_address[address] -= 1
            if not _per_address[address]:
                del _per_address[address]
        super().connection_lost(exc)

    def shutdown(self) -> None:
        # A graceful stop closes a connection whose answer is complete: an answer still held for the end
        # of the pass goes out first.
        cycle = self.cycle
        if cycle is not None and isinstance(cycle.transport, _WrittenAtEndOfPass):
            cycle.transport.write_held()
        super().shutdown()


_HELD_BYTES_MAX = 64 * 1024


class _WrittenAtEndOfPass:
    """A response cycle's view of its connection: what the cycle writes waits until the event loop's
    current pass is over, then goes out in one write (the module's docstring says why). The parts of a
    transport a uvicorn cycle uses: write, close, is_closing."""

    __slots__ = ("_held", "_held_bytes", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._held_bytes = 0

    def write(self, data: bytes) -> None:
        if not self._held:
            self._loop.call_soon(self.write_held)
        self._held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes >= _HELD_BYTES_MAX:
            self.write_held()

    def write_held(self) -> None:
        if self._held:
            held, self._held, self._held_bytes = self._held, [], 0
            if not self._transport.is_closing():
                self._transport.writelines(held)

    def close(self) -> None:
        self.write_held()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

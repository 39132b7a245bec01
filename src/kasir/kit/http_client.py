"""Outgoing HTTP/1.1 for callbacks: an httpx transport on asyncio streams and h11, idle connections kept per origin.

httpx's default transport (httpcore 1.0.9, through anyio) re-examines every pooled connection on
each request and polls each idle socket on the way (httpx issue #3215; the fixes, httpcore PRs
#924 and #928, are not merged): its CPU per request grows with the connections in flight, so a
`kasir worker` was CPU-bound far below what the network allows. Through this transport the
same client costs a fraction of it, at any concurrency (most of it httpx's own Request and
Response layer); the figures are in bench/results and the commit that brought this module.

What it does; everything else (redirects, which the worker does not follow, auth, cookies) stays httpx's:

- HTTP/1.1 only, with h11 (httpx's own dependency) as the parser. Plain or TLS; the request
  extension `sni_hostname` names the certificate's host when the URL holds an IP literal, as with
  httpcore (the worker connects to the address its SSRF check resolved).
- Idle connections are kept per origin, the most recently used first, and reused until
  `keepalive_expiry` (4 s: under the 5 s that Node.js servers keep an idle connection) unless the
  server closed them meanwhile or asked to close (`Connection: close`).
- A request sent on a reused connection that the server closed without answering (the keep-alive
  race: it closed just as the request left) is sent once more on a new connection. Nothing was
  answered, so no response was lost; a receiver may still see a callback twice, which callback
  receivers must accept anyway (delivery is at least once).
- A host name is looked up by the `resolve` given (the worker's: kasir.callbacks.ssrf's delivery lookups, a pool
  of their own), never by asyncio's `getaddrinfo` on the loop's default executor, where a name that never
  answers would hold the threads that SQLite's commits need; its addresses are tried in order, as asyncio
  would. Without `resolve`, asyncio looks the name up.
- Timeouts come from the request's `timeout` extension (connect, read, write, as httpx sets
  them); failures are raised as httpx's exceptions (`ConnectError`, `ReadTimeout`, ...).

There is no cap on connections: the caller bounds requests in flight (the worker's concurrency).
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import h11
import httpx

KEEPALIVE_EXPIRY_SECONDS = 4.0
READ_CHUNK_BYTES = 64 * 1024

Origin = tuple[str, str, int, str | None]  # scheme, host, port, TLS server name
Resolve = Callable[[str, int], Awaitable[list[str]]]
"""(host name, port) -> its addresses, in the order to try them; socket.gaierror if none."""


class _ClosedBeforeAnswer(Exception):
    """The server closed a reused connection before a single byte of response."""


@dataclass(eq=False, slots=True)
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    protocol: h11.Connection = field(default_factory=lambda: h11.Connection(h11.CLIENT))
    idle_since: float = 0.0
    reused: bool = False

    def still_open(self) -> bool:
        """False once the server closed its side (its FIN reached the reader) or the transport closed."""
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


BODY_CUT = "kasir.body_cut"
"""A response's extension: True when its body was longer than the reader allowed and was cut."""


async def read_at_most(response: httpx.Response, limit: int) -> httpx.Response:
    """`response` with at most `limit` bytes of its body, read as they arrive; the rest is never read.

    A longer body is cut: the bytes past `limit` are left on the connection, which is closed rather
    than handed back, so an answer of any size costs at most `limit` bytes of memory. The bytes are
    the body as sent (no Content-Encoding is undone: a compressed answer could grow without bound).
    """
    parts: list[bytes] = []
    size, cut = 0, False
    try:
        async for chunk in response.aiter_raw():
            parts.append(chunk)
            size += len(chunk)
            if size > limit:
                cut = True
                break
    finally:
        await response.aclose()
    return httpx.Response(
        response.status_code,
        headers=response.headers,
        content=b"".join(parts)[:limit],
        request=response.request,
        extensions={**response.extensions, BODY_CUT: cut},
    )


async def post(
    transport: httpx.AsyncBaseTransport,
    url: str,
    *,
    content: bytes,
    headers: dict[str, str],
    timeout: float,
    max_body_bytes: int,
    extensions: dict[str, Any] | None = None,
) -> httpx.Response:
    """A POST straight through `transport`, at most `max_body_bytes` of its response's body read (read_at_most).

    None of httpx.AsyncClient's per-request layers (merging the client's headers and cookies, auth,
    the redirect loop, the cookie jar's update from every response, event hooks): for a callback,
    which sends no cookie, follows no redirect and has no auth, they cost more CPU than the exchange
    itself. The Host and Content-Length headers are httpx.Request's, as through a client.
    """
    limits = {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}
    request = httpx.Request(
        "POST", _parsed_url(url), content=content, headers=headers, extensions={"timeout": limits, **(extensions or {})}
    )
    response = await transport.handle_async_request(request)
    response.request = request
    return await read_at_most(response, max_body_bytes)


@lru_cache(maxsize=4096)
def _parsed_url(url: str) -> httpx.URL:
    """httpx.URL is immutable, and parsing one costs more than the rest of building the request."""
    return httpx.URL(url)


class KeepAliveTransport(httpx.AsyncBaseTransport):
    def __init__(
        self,
        *,
        ssl_context: ssl.SSLContext | None = None,
        keepalive_expiry: float = KEEPALIVE_EXPIRY_SECONDS,
        max_idle_per_origin: int = 32,
        resolve: Resolve | None = None,
    ) -> None:
        self._ssl_context = ssl_context
        self._resolve = resolve
        self._keepalive_expiry = keepalive_expiry
        self._max_idle_per_origin = max_idle_per_origin
        self._idle: dict[Origin, list[_Connection]] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        origin = _origin(request)
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        connection = self._take_idle(origin)
        if connection is not None:
            try:
                return await self._exchange(connection, origin, request, timeouts)
            except _ClosedBeforeAnswer:
                if not isinstance(request.stream, httpx.ByteStream):
                    raise httpx.RemoteProtocolError(
                        "Server disconnected without sending a response", request=request
                    ) from None
                # The keep-alive race: once more, on a new connection (the body is bytes, so it can be sent again).
        connection = await self._connect(origin, request, timeouts)
        try:
            return await self._exchange(connection, origin, request, timeouts)
        except _ClosedBeforeAnswer:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response", request=request) from None

    async def aclose(self) -> None:
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    # --- connections ----------------------------------------------------------------------

    def _take_idle(self, origin: Origin) -> _Connection | None:
        connections = self._idle.get(origin)
        if not connections:
            return None
        oldest_allowed = time.monotonic() - self._keepalive_expiry
        while connections:
            connection = connections.pop()  # the most recently used: the least likely to have been closed
            if connection.idle_since >= oldest_allowed and connection.still_open():
                return connection
            connection.close()
        return None

    def _put_idle(self, origin: Origin, connection: _Connection) -> None:
        connections = self._idle.setdefault(origin, [])
        oldest_allowed = time.monotonic() - self._keepalive_expiry
        while connections and connections[0].idle_since < oldest_allowed:
            connections.pop(0).close()  # the list is in release order: expired ones are at its start
        if len(connections) >= self._max_idle_per_origin or not connection.still_open():
            connection.close()
            return
        connection.protocol.start_next_cycle()
        connection.idle_since = time.monotonic()
        connection.reused = True
        connections.append(connection)

    def _release(self, origin: Origin, connection: _Connection, *, complete: bool) -> None:
        protocol = connection.protocol
        if complete and protocol.our_state is h11.DONE and protocol.their_state is h11.DONE:
            self._put_idle(origin, connection)
        else:
            connection.close()

    async def _connect(self, origin: Origin, request: httpx.Request, timeouts: dict[str, float | None]) -> _Connection:
        scheme, host, port, server_name = origin
        context = self._tls_context() if scheme == "https" else None
        try:
            async with asyncio.timeout(timeouts.get("connect")):  # the lookup counts too
                addresses = [host]
                if self._resolve is not None and not _is_address(host):
                    addresses = await self._resolve(host, port)
                    if not addresses:
                        raise OSError(f"{host} has no address")
                for n, address in enumerate(addresses):
                    try:
                        reader, writer = await asyncio.open_connection(
                            address,
                            port,
                            ssl=context,
                            server_hostname=(server_name or host) if context is not None else None,
                            limit=READ_CHUNK_BYTES,
                        )
                        break
                    except OSError:
                        if n == len(addresses) - 1:
                            raise
        except TimeoutError:
            raise httpx.ConnectTimeout("timed out connecting", request=request) from None
        except (OSError, ssl.SSLError) as exc:  # refused, unreachable, a certificate refused
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from None
        return _Connection(reader, writer)

    def _tls_context(self) -> ssl.SSLContext:
        if self._ssl_context is None:
            self._ssl_context = httpx.create_ssl_context()  # the certificates httpx verifies with (certifi)
        return self._ssl_context

    # --- one exchange -----------------------------------------------------------------------

    async def _exchange(
        self, connection: _Connection, origin: Origin, request: httpx.Request, timeouts: dict[str, float | None]
    ) -> httpx.Response:
        try:
            await self._send_request(connection, request, timeouts)
            head = await self._read_head(connection, request, timeouts)
        except BaseException:
            connection.close()  # half an exchange (or a cancelled one) leaves the connection unusable
            raise
        stream = _ResponseStream(self, connection, origin, request, timeouts.get("read"))
        return httpx.Response(
            head.status_code,
            headers=head.headers,
            stream=stream,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": bytes(head.reason)},
        )

    async def _send_request(
        self, connection: _Connection, request: httpx.Request, timeouts: dict[str, float | None]
    ) -> None:
        protocol, writer = connection.protocol, connection.writer
        try:
            head = h11.Request(method=request.method, target=request.url.raw_path, headers=request.headers.raw)
            # One write (one send(2)) for the whole request, not one for the head, each chunk and the end.
            parts = [protocol.send(head)]
            async for chunk in request.stream:  # type: ignore[union-attr]
                if chunk:
                    parts.append(protocol.send(h11.Data(data=chunk)))
            parts.append(protocol.send(h11.EndOfMessage()))
            writer.write(b"".join(part for part in parts if part))
            async with asyncio.timeout(timeouts.get("write")):
                await writer.drain()
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc), request=request) from None
        except TimeoutError:
            raise httpx.WriteTimeout("timed out sending the request", request=request) from None
        except OSError as exc:
            if connection.reused:
                raise _ClosedBeforeAnswer from None
            raise httpx.WriteError(str(exc) or type(exc).__name__, request=request) from None

    async def _read_head(
        self, connection: _Connection, request: httpx.Request, timeouts: dict[str, float | None]
    ) -> h11.Response:
        received_any = False
        while True:
            event = _next_event(connection, request)
            if event is h11.NEED_DATA:
                data = await _read(connection, request, timeouts.get("read"), closed_early=not received_any)
                received_any = received_any or bool(data)
                _feed(connection, request, data)
            elif isinstance(event, h11.Response):
                return event
            elif isinstance(event, h11.InformationalResponse):
                continue  # 100 Continue and the like: the final answer follows
            else:
                unexpected = type(event).__name__
                raise httpx.RemoteProtocolError(f"unexpected {unexpected} before the response", request=request)


class _ResponseStream(httpx.AsyncByteStream):
    """The body, read as the client asks for it; closing hands the connection back (or closes it)."""

    def __init__(
        self,
        transport: KeepAliveTransport,
        connection: _Connection,
        origin: Origin,
        request: httpx.Request,
        read_timeout: float | None,
    ) -> None:
        self._transport = transport
        self._connection = connection
        self._origin = origin
        self._request = request
        self._read_timeout = read_timeout
        self._complete = False
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        try:
            while not self._complete:
                event = _next_event(connection, self._request)
                if event is h11.NEED_DATA:
                    data = await _read(connection, self._request, self._read_timeout, closed_early=False)
                    _feed(connection, self._request, data)
                elif isinstance(event, h11.Data):
                    yield bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    self._complete = True
                else:
                    unexpected = type(event).__name__
                    raise httpx.RemoteProtocolError(f"unexpected {unexpected} in the body", request=self._request)
        except BaseException:
            self._release()
            raise

    async def aclose(self) -> None:
        self._release()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._transport._release(self._origin, self._connection, complete=self._complete)


async def _read(connection: _Connection, request: httpx.Request, timeout: float | None, *, closed_early: bool) -> bytes:
    """Bytes from the server; b"" at its end of stream. `closed_early`: nothing of the response has come yet."""
    try:
        async with asyncio.timeout(timeout):
            data = await connection.reader.read(READ_CHUNK_BYTES)
    except TimeoutError:
        raise httpx.ReadTimeout("timed out waiting for the response", request=request) from None
    except OSError as exc:
        if closed_early and connection.reused:
            raise _ClosedBeforeAnswer from None
        raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from None
    if not data and closed_early:
        if connection.reused:
            raise _ClosedBeforeAnswer
        raise httpx.RemoteProtocolError("Server disconnected without sending a response", request=request)
    return data


def _feed(connection: _Connection, request: httpx.Request, data: bytes) -> None:
    try:
        connection.protocol.receive_data(data)
    except h11.RemoteProtocolError as exc:
        raise httpx.RemoteProtocolError(str(exc), request=request) from None


def _next_event(connection: _Connection, request: httpx.Request) -> Any:
    try:
        return connection.protocol.next_event()
    except h11.RemoteProtocolError as exc:  # a malformed response, or one cut short
        raise httpx.RemoteProtocolError(str(exc), request=request) from None


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _origin(request: httpx.Request) -> Origin:
    url = request.url
    scheme = url.scheme
    if scheme not in ("http", "https"):
        raise httpx.UnsupportedProtocol(f"{scheme!r} is not http or https", request=request)
    port = url.port or (443 if scheme == "https" else 80)
    server_name: Any = request.extensions.get("sni_hostname")
    return scheme, url.host, port, server_name if scheme == "https" else None

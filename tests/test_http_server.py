"""kasir serve's HTTP protocol: TCP_NODELAY on connections of a socket bound the way `--workers N` binds it."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from kasir.kit.http_server import ConnectionLimits, NoDelayHttpToolsProtocol, use_connection_limits
from tests.support.process import HANG_GUARD_SECONDS


async def tiny_app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def nodelay_of_a_served_connection(protocol: type[HttpToolsProtocol]) -> int:
    """Serve one keep-alive request on a socket bound by uvicorn's supervisor code; the server side's TCP_NODELAY."""
    config = uvicorn.Config(tiny_app, host="127.0.0.1", port=0, loop="asyncio", log_config=None, access_log=False)
    config.load()
    listening = config.bind_socket()
    state = ServerState()
    seen: list[int] = []

    def make() -> asyncio.Protocol:
        made = protocol(config=config, server_state=state, app_state={})
        original = made.connection_made

        def connection_made(transport: asyncio.Transport) -> None:
            original(transport)
            seen.append(transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

        made.connection_made = connection_made  # type: ignore[method-assign]
        return made

    server = await asyncio.get_running_loop().create_server(make, sock=listening)
    try:
        reader, writer = await asyncio.open_connection(*listening.getsockname()[:2])
        writer.write(b"GET / HTTP/1.1\r\nHost: kasir\r\n\r\n")
        assert (await asyncio.wait_for(reader.readline(), 5)).startswith(b"HTTP/1.1 200")
        writer.close()
    finally:
        server.close()
        for connection in list(state.connections):
            connection.shutdown()
        await server.wait_closed()
    return seen[0]


async def test_uvicorns_worker_socket_leaves_nagle_on_and_kasirs_protocol_turns_it_off():
    # The first line is uvicorn's bug (issue #3149): when it fails, uvicorn fixed it and
    # kasir.kit.http_server can go.
    assert await nodelay_of_a_served_connection(HttpToolsProtocol) == 0
    assert await nodelay_of_a_served_connection(NoDelayHttpToolsProtocol) != 0


# --- one write per answer ---------------------------------------------------------------------------


class Served:
    """`app` served by kasir's protocol on 127.0.0.1, with every write the server makes to its connections."""

    def __init__(self, app) -> None:
        self.app = app
        self.writes: list[bytes] = []
        self.paused = 0  # times a connection's writing was paused (its client not reading)

    async def __aenter__(self) -> Served:
        config = uvicorn.Config(self.app, host="127.0.0.1", port=0, loop="asyncio", log_config=None, access_log=False)
        config.load()
        self.state = ServerState()

        def make() -> asyncio.Protocol:
            made = NoDelayHttpToolsProtocol(config=config, server_state=self.state, app_state={})
            original = made.connection_made
            pause = made.pause_writing

            def paused() -> None:
                self.paused += 1
                pause()

            made.pause_writing = paused  # type: ignore[method-assign]

            def connection_made(transport: asyncio.Transport) -> None:
                write = transport.write

                def recorded(data: bytes) -> None:
                    self.writes.append(bytes(data))
                    write(data)

                transport.write = recorded  # type: ignore[method-assign]  # writelines goes through write
                original(transport)

            made.connection_made = connection_made  # type: ignore[method-assign]
            return made

        self.server = await asyncio.get_running_loop().create_server(make, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()
        for connection in list(self.state.connections):
            connection.shutdown()
        await self.server.wait_closed()

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)


async def read_answer(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    return head, await asyncio.wait_for(reader.readexactly(length), 5)


async def test_an_answer_goes_out_in_one_write_head_and_body_together():
    async with Served(tiny_app) as served:
        reader, writer = await served.connect()
        for _ in range(2):  # and again on the kept-alive connection
            writer.write(b"GET / HTTP/1.1\r\nHost: kasir\r\n\r\n")
            head, body = await read_answer(reader)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert body == b"ok"
        writer.close()
    assert len(served.writes) == 2, served.writes
    assert all(write.startswith(b"HTTP/1.1 200 OK\r\n") and write.endswith(b"\r\n\r\nok") for write in served.writes)


async def test_a_head_answer_without_a_body_still_goes_out():
    async with Served(tiny_app) as served:
        reader, writer = await served.connect()
        writer.write(b"HEAD / HTTP/1.1\r\nHost: kasir\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        writer.close()
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"content-length: 2\r\n" in head
    assert served.writes == [head]


async def test_a_streamed_answer_sends_its_head_and_first_chunk_before_the_rest_is_made():
    """Nothing is held past the event loop's pass: a stream's first chunk reaches the client while the app
    still waits (here, for the client to say it has it), and its later chunks follow as they are made."""
    first_chunk_read = asyncio.Event()

    async def streaming_app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"6")]})
        await send({"type": "http.response.body", "body": b"one", "more_body": True})
        await asyncio.wait_for(first_chunk_read.wait(), 5)
        await send({"type": "http.response.body", "body": b"two"})

    async with Served(streaming_app) as served:
        reader, writer = await served.connect()
        writer.write(b"GET / HTTP/1.1\r\nHost: kasir\r\n\r\n")
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert await asyncio.wait_for(reader.readexactly(3), 5) == b"one"
        first_chunk_read.set()
        assert await asyncio.wait_for(reader.readexactly(3), 5) == b"two"
        writer.close()
    assert len(served.writes) == 2
    assert served.writes[0].endswith(b"\r\n\r\none")
    assert served.writes[1] == b"two"


async def test_a_request_expecting_100_continue_gets_it_before_sending_its_body():
    async def echo_app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        body = (await receive())["body"]
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})

    async with Served(echo_app) as served:
        reader, writer = await served.connect()
        writer.write(b"POST / HTTP/1.1\r\nHost: kasir\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5) == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(b"hello")
        head, body = await read_answer(reader)
        writer.close()
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert body == b"hello"


async def test_a_large_answer_goes_out_as_it_grows_not_held_whole():
    """A producer that never waits: what it has written goes out once it passes the bound, under uvicorn's flow
    control, rather than piling up until the end of the pass."""
    chunk = b"x" * 40_000

    async def large_app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        length = b"%d" % (3 * len(chunk))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", length)]})
        for n in range(3):
            await send({"type": "http.response.body", "body": chunk, "more_body": n < 2})

    async with Served(large_app) as served:
        reader, writer = await served.connect()
        writer.write(b"GET / HTTP/1.1\r\nHost: kasir\r\n\r\n")
        _, body = await read_answer(reader)
        writer.close()
    assert body == chunk * 3
    assert [len(write) for write in served.writes][1:] == [len(chunk)], [len(write) for write in served.writes]
    assert served.writes[0].endswith(chunk * 2)  # head and two chunks: past the bound, written at once


async def test_a_graceful_stop_in_the_pass_that_completes_an_answer_still_sends_it():
    """uvicorn closes at once a connection whose answer is complete: one still held for the end of the pass goes
    out first."""
    served: Served

    async def answer_then_stop(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        await tiny_app(scope, receive, send)
        for connection in list(served.state.connections):  # in the same pass, as `kasir serve` stopping would
            connection.shutdown()

    async with Served(answer_then_stop) as served:
        reader, writer = await served.connect()
        writer.write(b"GET / HTTP/1.1\r\nHost: kasir\r\n\r\n")
        head, body = await read_answer(reader)
        assert await asyncio.wait_for(reader.read(), 5) == b""  # then closed
        writer.close()
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert body == b"ok"


async def test_the_unread_rest_of_a_body_after_an_early_answer_is_not_taken_for_the_next_request():
    """Issue 43 N9: an app that answers before reading the body (a refusal) left the rest of a body over the
    header limit to be counted as the next request's headers: a stray 431 that a keep-alive client read as the
    answer to its next request."""
    size = 200 * 1024
    async with Served(tiny_app) as served:
        reader, writer = await served.connect()
        writer.write(b"POST / HTTP/1.1\r\nHost: kasir\r\nContent-Length: %d\r\n\r\n" % size)
        head, body = await read_answer(reader)  # answered before the body was sent
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        writer.write(b"x" * size)
        writer.write(b"GET / HTTP/1.1\r\nHost: kasir\r\n\r\n")
        head, body = await read_answer(reader)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n"), head
        assert body == b"ok"
        writer.close()
    assert not any(b"431" in write for write in served.writes), served.writes


# --- one client cannot take the server (issue 43 N6) --------------------------------------------------


@pytest.fixture
def limits() -> Iterator[Callable[..., None]]:
    def set_limits(**changed: Any) -> None:
        base = ConnectionLimits(64 * 1024, 10.0, 30.0, 100, 100, frozenset(), 30.0)
        use_connection_limits(dataclasses.replace(base, **changed))

    yield set_limits
    use_connection_limits(None)


async def test_one_address_holds_at_most_its_share_and_other_clients_still_get_in(limits) -> None:
    limits(max_connections=10, max_per_address=3)
    async with Served(tiny_app) as served:
        held = [await served.connect() for _ in range(3)]
        reader, writer = await served.connect()
        refused = await asyncio.wait_for(reader.read(), 5)
        assert refused.startswith(b"HTTP/1.1 503 "), refused
        # Another client (another loopback address) is served while the first holds its share.
        other_reader, other = await asyncio.open_connection("127.0.0.1", served.port, local_addr=("127.0.0.2", 0))
        other.write(b"GET / HTTP/1.1\r\nHost: kasir\r\n\r\n")
        head, body = await read_answer(other_reader)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        # A held connection that closes gives its place back.
        held[0][1].close()
        await held[0][1].wait_closed()
        while len(served.state.connections) > 3:  # the server saw the close
            await asyncio.sleep(0.01)
        again_reader, again = await served.connect()
        again.write(b"GET / HTTP/1.1\r\nHost: kasir\r\n\r\n")
        head, _ = await read_answer(again_reader)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        for connection in (*held[1:], (reader, writer), (other_reader, other), (again_reader, again)):
            connection[1].close()


async def big_app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    size = 16 * 1024 * 1024
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % size)]})
    for _ in range(size // 65536):
        await send({"type": "http.response.body", "body": b"x" * 65536, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def test_a_client_that_stops_reading_its_answer_is_closed(limits) -> None:
    limits(write_timeout=0.5)
    async with Served(big_app) as served:
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.setblocking(False)
        await asyncio.get_running_loop().sock_connect(client, ("127.0.0.1", served.port))
        await asyncio.get_running_loop().sock_sendall(client, b"GET / HTTP/1.1\r\nHost: kasir\r\n\r\n")
        # Never read: the answer fills the buffers, the server pauses, and gives up after the write timeout.
        async with asyncio.timeout(HANG_GUARD_SECONDS):
            while not served.paused:  # the server's buffers are full: the client is not reading
                await asyncio.sleep(0.01)
            while served.state.connections:
                await asyncio.sleep(0.05)
        client.close()

"""kasir serve's HTTP protocol: TCP_NODELAY on connections of a socket bound the way `--workers N` binds it."""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from kasir.kit.http_server import NoDelayHttpToolsProtocol


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

"""uvicorn's HTTP protocol with TCP_NODELAY on every connection, however the socket was made.

With `--workers N` uvicorn binds the listening socket itself with `proto` 0; the connections
it accepts inherit that, and asyncio turns Nagle's algorithm off only for sockets that say
IPPROTO_TCP. Nagle then holds each response's last segment until the client's delayed ACK
on every keep-alive request, a delay per request that dwarfs the request itself (uvicorn
issue #3149, open). uvloop sets the option itself, asyncio does not: set it here.
"""

from __future__ import annotations

import asyncio
import socket

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class NoDelayHttpToolsProtocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # the peer is already gone: uvicorn handles the closed connection
                pass
        super().connection_made(transport)

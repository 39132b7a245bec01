"""A real HTTP/1.1 server on 127.0.0.1 that answers what the test scripts, down to a dropped connection.

tests/support/receiver.py (uvicorn) cannot set response headers such as Retry-After or hang up after
reading a request; this one can, which is what the SDK's retry tests need.

    async with ScriptedServer(Reply(409, WALLET_IN_PROGRESS, retry_after="0.2"), Reply(200, WALLET_OK)) as server:
        ... AsyncClient(server.base_url, ...) ...
    first, second = server.requests
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from tests.support.postgres import free_port


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] | str = field(default_factory=dict)
    retry_after: str | None = None
    replayed: bool = False  # Idempotent-Replayed: true
    drop: bool = False  # read the whole request, then close the connection without answering


# What an unscripted request gets: a 4xx the SDK never retries, so an extra try shows in the count.
UNSCRIPTED = Reply(418, {"message": "the test scripted no answer for this request"})


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: bytes
    at: float  # time.monotonic() when the whole request had arrived

    def json(self) -> Any:
        return json.loads(self.body)


class ScriptedServer:
    def __init__(self, *replies: Reply) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.requests: list[Seen] = []
        self._script = deque(replies)
        self._server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        request_line, *lines = head.decode("latin-1").split("\r\n")
        method, target, _version = request_line.split(" ", 2)
        headers = {}
        for line in lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append(Seen(method, target, headers, body, time.monotonic()))
        reply = self._script.popleft() if self._script else UNSCRIPTED
        if not reply.drop:
            content = reply.body.encode() if isinstance(reply.body, str) else json.dumps(reply.body).encode()
            response = [f"HTTP/1.1 {reply.status} Scripted", "Content-Type: application/json"]
            response += [f"Content-Length: {len(content)}", "Connection: close"]
            if reply.retry_after is not None:
                response.append(f"Retry-After: {reply.retry_after}")
            if reply.replayed:
                response.append("Idempotent-Replayed: true")
            writer.write("\r\n".join(response).encode() + b"\r\n\r\n" + content)
            await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def __aenter__(self) -> ScriptedServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

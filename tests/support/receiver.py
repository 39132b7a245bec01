"""A real HTTP receiver on 127.0.0.1 for callbacks, with programmable answers.

async with CallbackReceiver() as receiver:
    receiver.answer(Answer(status=500), Answer(status=200))   # then the default
    ... trigger a callback to receiver.url("/cb") ...
    [request] = await receiver.wait_for(1)
    request.headers["svc-signature"], request.json(), request.query["svc-signature"]
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import uvicorn

from tests.support.postgres import free_port
from tests.support.process import HANG_GUARD_SECONDS


@dataclass
class Answer:
    status: int = 200
    body: bytes | str | dict[str, Any] = field(default_factory=lambda: {"message": "ok"})
    content_type: str = "application/json"
    delay: float = 0.0  # seconds before answering (a timeout when longer than the caller's)
    location: str | None = None  # for redirects

    def encoded(self) -> bytes:
        if isinstance(self.body, dict):
            return json.dumps(self.body).encode()
        return self.body.encode() if isinstance(self.body, str) else self.body


@dataclass
class ReceivedRequest:
    method: str
    path: str
    query: dict[str, str]
    raw_query: str
    headers: dict[str, str]
    body: bytes
    received_at: float  # time.time()

    def json(self) -> Any:
        return json.loads(self.body)


Served = tuple[uvicorn.Server, "asyncio.Task[None]"]


async def serve_on_loopback(app: Any, port: int) -> Served:
    """`app` (ASGI) served by uvicorn on 127.0.0.1:`port` in this event loop, once it accepts connections."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    return server, task


async def stop_serving(served: Served) -> None:
    server, task = served
    server.should_exit = True
    await task


class CallbackReceiver:
    """Records what arrives under its own URLs (`url()`): a path prefix of its own, so a callback meant for
    another test's receiver that had the same port (left due in the database, retried later) is answered
    410 and never taken for this test's."""

    def __init__(self) -> None:
        self.port = free_port()
        self.prefix = f"/{secrets.token_hex(6)}"
        self.requests: list[ReceivedRequest] = []
        self.default = Answer()
        self._script: deque[Answer] = deque()
        self._arrived = asyncio.Condition()

    def url(self, path: str = "/callback") -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}{path}"

    def answer(self, *answers: Answer, default: Answer | None = None) -> None:
        """Answer the next requests with `answers` in order, then with `default`."""
        self._script.extend(answers)
        if default is not None:
            self.default = default

    async def wait_for(
        self, count: int, timeout: float = HANG_GUARD_SECONDS, path: str | None = None
    ) -> list[ReceivedRequest]:
        """The first `count` requests (to `path`, if given), once they have come. `timeout` only ends a wait
        for requests that never come; a test that expects them within a time says so, from what sets it."""

        def matching() -> list[ReceivedRequest]:
            return [r for r in self.requests if path is None or r.path == path]

        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: len(matching()) >= count), timeout)
        return matching()[:count]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path: str = scope["path"]
        if not path.startswith(self.prefix + "/"):
            await send({"type": "http.response.start", "status": 410, "headers": []})
            await send({"type": "http.response.body", "body": b"not this receiver's"})
            return
        raw_query = scope["query_string"].decode()
        request = ReceivedRequest(
            method=scope["method"],
            path=path[len(self.prefix) :],
            query={k: v[0] for k, v in parse_qs(raw_query, keep_blank_values=True).items()},
            raw_query=raw_query,
            headers={k.decode().lower(): v.decode() for k, v in scope["headers"]},
            body=body,
            received_at=time.time(),
        )
        answer = self._script.popleft() if self._script else self.default
        if answer.delay:
            await asyncio.sleep(answer.delay)
        async with self._arrived:
            self.requests.append(request)
            self._arrived.notify_all()
        headers = [(b"content-type", answer.content_type.encode())]
        if answer.location:
            headers.append((b"location", answer.location.encode()))
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.encoded()})

    async def __aenter__(self) -> CallbackReceiver:
        self._served = await serve_on_loopback(self, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await stop_serving(self._served)

"""A recording reverse proxy on 127.0.0.1: what a merchant sent to Kasir and what Kasir answered, byte for byte.

async with RecordingProxy("http://127.0.0.1:8000") as proxy:
    client = AsyncClient(proxy.url, credentials)    # the merchant talks through it
    ...
    proxy.exchanges[0].request_headers["x-signature"], proxy.exchanges[0].response_body
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from tests.support.postgres import free_port
from tests.support.receiver import serve_on_loopback, stop_serving

# Hop-by-hop headers, and those httpx sets again for the forwarded request or answer.
# content-encoding: httpx hands over the decoded body.
_NOT_FORWARDED = frozenset(
    {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}
)


@dataclass
class Exchange:
    method: str
    target: str  # path and query, as sent
    request_headers: dict[str, str]
    request_body: bytes
    status: int
    response_headers: dict[str, str]
    response_body: bytes

    def wire(self) -> bytes:
        """Everything of the exchange as one haystack (header lines, then the bodies)."""
        lines = [f"{self.method} {self.target}"]
        lines += [f"{name}: {value}" for name, value in self.request_headers.items()]
        lines += [str(self.status)]
        lines += [f"{name}: {value}" for name, value in self.response_headers.items()]
        return "\n".join(lines).encode() + b"\n" + self.request_body + b"\n" + self.response_body


class RecordingProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.exchanges: list[Exchange] = []
        self._http = httpx.AsyncClient(base_url=self.upstream, timeout=30)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        target = scope["raw_path"].decode() + (f"?{scope['query_string'].decode()}" if scope["query_string"] else "")
        headers = [(k.decode(), v.decode()) for k, v in scope["headers"] if k.decode().lower() not in _NOT_FORWARDED]
        answer = await self._http.request(scope["method"], target, headers=headers, content=body)
        self.exchanges.append(
            Exchange(
                scope["method"],
                target,
                {k.lower(): v for k, v in headers},
                body,
                answer.status_code,
                {k.lower(): v for k, v in answer.headers.items()},
                answer.content,
            )
        )
        response_headers = [
            (k.encode(), v.encode()) for k, v in answer.headers.multi_items() if k.lower() not in _NOT_FORWARDED
        ]
        await send({"type": "http.response.start", "status": answer.status_code, "headers": response_headers})
        await send({"type": "http.response.body", "body": answer.content})

    async def __aenter__(self) -> RecordingProxy:
        self._served = await serve_on_loopback(self, self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await stop_serving(self._served)
        await self._http.aclose()

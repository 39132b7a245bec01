"""Slow or idle clients cannot hold `kasir serve` (hardening finding 2), over a real socket: a connection that
sends nothing, headers sent a byte at a time, a body that never finishes, oversized headers; health probes
answer throughout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from tests.support.builders import make_merchant
from tests.support.process import HANG_GUARD_SECONDS
from tests.support.server import ServedKasir
from tests.support.wire import card

pytestmark = pytest.mark.slow

TIMEOUT = 1.0


@pytest.fixture(scope="module")
async def strict(settings_env: dict[str, str], migrated: None) -> AsyncIterator[ServedKasir]:
    env = {
        **settings_env,
        "KASIR_HEADER_TIMEOUT_SECONDS": str(TIMEOUT),
        "KASIR_BODY_TIMEOUT_SECONDS": str(TIMEOUT),
        "KASIR_MAX_HEADER_BYTES": "4096",
        "KASIR_EMBEDDED_WORKER": "false",
    }
    server = ServedKasir(env)
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    started = time.monotonic()
    data = await asyncio.wait_for(reader.read(), seconds)
    return data, time.monotonic() - started


async def test_idle_and_trickling_connections_are_closed_and_probes_answer(strict: ServedKasir) -> None:
    connections = [await asyncio.open_connection("127.0.0.1", strict.port) for _ in range(50)]
    trickler_reader, trickler = connections[0]
    trickler.write(b"GET /healthz HTTP/1.1\r\n")
    async with httpx.AsyncClient(base_url=strict.base_url) as probe:
        assert (await probe.get("/healthz")).status_code == 200  # while 50 connections are held open
    # A byte now and then keeps nothing alive: bytes come faster than the timeout until the server closes.
    # Were each byte to restart the timeout, it would never close: twenty timeouts are more than one.
    closed = asyncio.create_task(trickler_reader.read())  # its 408 and the close, once they come
    async with asyncio.timeout(TIMEOUT * 20):
        while not closed.done():
            trickler.write(b"X")
            await asyncio.wait({closed}, timeout=TIMEOUT / 4)
    assert closed.result() in (b"", b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
    for reader, _writer in connections[1:]:
        data, took = await closed_within(reader, TIMEOUT * 4)
        assert data in (b"", b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        assert took <= TIMEOUT * 3
    for _reader, writer in connections:
        writer.close()


async def test_a_body_that_never_finishes_is_closed(strict: ServedKasir) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", strict.port)
    writer.write(b"POST /card-v2/v1/charge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{\"externalId\":")  # fmt: skip
    data, took = await closed_within(reader, TIMEOUT * 5)
    assert took <= TIMEOUT * 4
    assert not data.startswith(b"HTTP/1.1 2")
    writer.close()


async def test_headers_over_the_limit_are_refused_before_they_are_held(strict: ServedKasir) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", strict.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 10_000)
    data, _took = await closed_within(reader, TIMEOUT * 3)
    assert data.startswith(b"HTTP/1.1 431 ")
    writer.close()
    async with httpx.AsyncClient(base_url=strict.base_url) as client:  # ordinary requests are unaffected
        answer = await client.get("/healthz", headers={"X-Fine": "a" * 2000})
        assert answer.status_code == 200
        body = b'{"x":"' + b"y" * 100_000 + b'"}'  # a body in the same packets as its headers is no header
        posted = await client.post("/admin/merchants", content=body, headers={"Content-Type": "application/json"})
        assert posted.status_code in (400, 401, 422), posted.text[:200]


async def test_too_many_header_lines_are_refused(strict: ServedKasir) -> None:
    many = b"".join(b"X-%d: 1\r\n" % n for n in range(200))  # 2 KiB: within the size limit
    reader, writer = await asyncio.open_connection("127.0.0.1", strict.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
    data, _took = await closed_within(reader, TIMEOUT * 3)
    assert data.startswith(b"HTTP/1.1 431 ")
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", strict.port)
    some = b"".join(b"X-%d: 1\r\n" % n for n in range(100))
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + some + b"\r\n")
    data, _took = await closed_within(reader, TIMEOUT * 3)
    assert data.startswith(b"HTTP/1.1 200 ")
    writer.close()


async def test_a_connection_past_the_limit_is_answered_503_at_once_without_a_request(
    settings_env: dict[str, str], migrated: None
) -> None:
    """uvicorn's own limit answers only once a request's headers are in: idle connections past it held a file."""
    server = ServedKasir({**settings_env, "KASIR_MAX_CONNECTIONS": "2", "KASIR_EMBEDDED_WORKER": "false"})
    await asyncio.to_thread(server.start)
    try:
        held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(2)]
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        data, took = await closed_within(reader, 5)  # the header timeout is 10 s: this is not it
        assert data.startswith(b"HTTP/1.1 503 "), data
        assert b"retry-after: 1" in data
        writer.close()
        for _reader, held_writer in held:
            held_writer.close()
    finally:
        await asyncio.to_thread(server.stop)


async def test_more_idle_connections_than_open_files_neither_flood_the_log_nor_stop_the_server(
    settings_env: dict[str, str], migrated: None
) -> None:
    """Under `ulimit -n 256` the cap is lowered (and said); 400 idle connections: the ones past it are answered
    503, accept() never runs out of files (asyncio would log it per pending connection every second)."""
    server = ServedKasir({**settings_env, "KASIR_EMBEDDED_WORKER": "false"}, open_files=256)
    await asyncio.to_thread(server.start)
    try:
        assert "Connections per process: 128, not KASIR_MAX_CONNECTIONS=1000" in server.log()
        connections = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(400)]
        refused = 0
        for reader, _writer in connections[200:]:
            data, _took = await closed_within(reader, 5)
            refused += data.startswith(b"HTTP/1.1 503 ")
        assert refused == 200
        # Every connection has been accepted (the last 200 were answered, after the first 200): had accept()
        # run out of files on the way, asyncio would have logged it then, before retrying.
        assert "out of system resource" not in server.log()
        assert "accept() failed" not in server.log()
        for _reader, writer in connections:
            writer.close()
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            # 503 while it still counts connections its clients have closed: it serves once it has seen them go.
            async with asyncio.timeout(HANG_GUARD_SECONDS):
                while (await client.get("/healthz")).status_code == 503:
                    await asyncio.sleep(TIMEOUT / 10)
            assert (await client.get("/healthz")).status_code == 200
    finally:
        await asyncio.to_thread(server.stop)


async def test_a_client_that_leaves_mid_body_is_no_error_in_the_log(app: FastAPI, strict: ServedKasir) -> None:
    authorization = card.auth(await make_merchant(app)).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", strict.port)
    writer.write(b"POST /card-v2/v1/charge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Authorization: " + authorization + b"\r\nContent-Length: 1000\r\n"
                 b"Expect: 100-continue\r\n\r\n")  # fmt: skip
    # The charge has begun to read its body once the server says to go on: the client leaves mid-body.
    assert await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT * 5) == b"HTTP/1.1 100 Continue\r\n\r\n"
    writer.write(b'{"externalId":')
    await writer.drain()
    writer.close()
    log = await asyncio.to_thread(strict.log_once_it_has, '"status": 499')
    assert '"status": 499' in log
    assert "unhandled error" not in log
    assert "ClientDisconnect" not in log

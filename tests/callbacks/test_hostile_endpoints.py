"""One merchant's hostile endpoint costs the worker no more than a well-behaved one (issue 43).

Each hostile endpoint is a raw server on 127.0.0.1 that does what a broken or malicious merchant
server would: answer without end, or trickle.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest

from kasir.callbacks import ssrf
from kasir.callbacks.dispatcher import send_attempt
from kasir.callbacks.models import CallbackKind
from kasir.callbacks.repository import callback_repository
from kasir.callbacks.ssrf import NameLookups, UnsafeCallbackUrl, resolve_checked
from kasir.callbacks.worker import DeliveryWorker
from kasir.config import Settings
from kasir.db import statements
from kasir.kit.http_client import KeepAliveTransport
from tests.callbacks.helpers import claimed, db, record, wait_status
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.worker import callback_hang_guard

HUGE = 300 * 1024 * 1024
CHUNK = b"x" * (1024 * 1024)


@dataclass
class Endless:
    """Answers 200 with a body of HUGE bytes, written as fast as the client reads it; counts what went out."""

    content_type: bytes = b"text/plain"
    sent: int = 0
    port: int = 0
    done: asyncio.Event | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self.done is not None
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: " + self.content_type + b"\r\nContent-Length: %d\r\n\r\n" % HUGE
            )
            while self.sent < HUGE:
                writer.write(CHUNK)
                await writer.drain()
                self.sent += len(CHUNK)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client closed: what it did not read was never sent
        finally:
            writer.close()
            self.done.set()


@dataclass
class Trickle:
    """Answers 200 and then one byte of body at a time, never finishing."""

    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
            while True:
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(0.01)
        except ConnectionError:
            pass
        finally:
            writer.close()


@pytest.fixture
async def listen() -> AsyncIterator[Callable[[Callable[..., Awaitable[None]]], Awaitable[int]]]:
    servers: list[asyncio.Server] = []

    async def start(handle: Callable[..., Awaitable[None]]) -> int:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        servers.append(server)
        return int(server.sockets[0].getsockname()[1])

    yield start
    for server in servers:
        server.close()
        with contextlib.suppress(Exception):
            await server.wait_closed()


@pytest.mark.parametrize("through", ["worker transport", "client"])
async def test_a_huge_answer_is_read_only_up_to_the_bound(settings: Settings, listen, through: str) -> None:
    endless = Endless(done=asyncio.Event())
    endless.port = await listen(endless.handle)
    bounded = settings.model_copy(update={"callback_timeout_seconds": 30.0})
    http: httpx.AsyncBaseTransport | httpx.AsyncClient = (
        KeepAliveTransport() if through == "worker transport" else httpx.AsyncClient(trust_env=False)
    )
    try:
        result = await send_attempt(http, claimed(f"http://127.0.0.1:{endless.port}/cb"), bounded)
    finally:
        await http.aclose()
    await endless.done.wait()  # the client closed the connection: the server stopped sending
    assert result.accepted, result
    assert result.http_status == 200
    assert result.excerpt == "x" * 2048
    # What went out is the bound plus what the sockets' buffers took, never the 300 MB answer.
    assert endless.sent < 64 * 1024 * 1024, endless.sent


async def test_a_payment_page_answer_cut_short_is_not_accepted_and_says_why(settings: Settings, listen) -> None:
    endless = Endless(content_type=b"application/json", done=asyncio.Event())
    endless.port = await listen(endless.handle)
    transport = KeepAliveTransport()
    try:
        result = await send_attempt(
            transport, claimed(f"http://127.0.0.1:{endless.port}/cb", CallbackKind.PAYMENT_PAGE), settings
        )
    finally:
        await transport.aclose()
    assert not result.accepted
    assert result.error == f"HTTP 200 not accepted (answer longer than {settings.callback_answer_max_bytes} bytes, cut)"


async def test_an_answer_that_trickles_forever_is_cut_at_the_attempt_timeout(settings: Settings, listen) -> None:
    trickle = Trickle()
    trickle.port = await listen(trickle.handle)
    quick = settings.model_copy(update={"callback_timeout_seconds": 0.5})
    transport = KeepAliveTransport()
    try:
        result = await asyncio.wait_for(
            send_attempt(transport, claimed(f"http://127.0.0.1:{trickle.port}/cb"), quick), timeout=10
        )
    finally:
        await transport.aclose()
    assert not result.accepted
    assert result.error == "timeout after 0.5 s"


# --- a name that never answers -------------------------------------------------------------------


class BlackHole:
    """A blocking lookup, as getaddrinfo is: names under .blackhole.test never answer (until released)."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.calls: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        if host.endswith(".blackhole.test"):
            self.released.wait(30)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return ["8.8.8.8"]


async def test_a_name_that_never_answers_holds_one_lookup_thread_and_no_one_elses(monkeypatch) -> None:
    black_hole = BlackHole()
    lookups = NameLookups("test", threads=2, lookup=black_hole)
    monkeypatch.setattr(ssrf, "LOOKUP_SECONDS", 0.3)
    try:
        # Twelve charges naming the same black-hole host: each gives up at its timeout ...
        refusals = await asyncio.gather(
            *(
                resolve_checked("https://shop.blackhole.test/cb", allowed_networks=(), lookups=lookups)
                for _ in range(12)
            ),
            return_exceptions=True,
        )
        assert all(isinstance(refused, UnsafeCallbackUrl) for refused in refusals), refusals
        assert {refused.reason for refused in refusals} == {"host shop.blackhole.test did not resolve within 0.3 s"}
        # ... and the host was looked up once: the pool's other thread answers another merchant at once.
        assert black_hole.calls == ["shop.blackhole.test"]
        target = await asyncio.wait_for(
            resolve_checked("https://other-merchant.example/cb", allowed_networks=(), lookups=lookups), timeout=2
        )
        assert target.address == "8.8.8.8"
        # The event loop's default executor, where SQLite's commits run, never saw a lookup.
        assert await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(None, lambda: 1), timeout=2) == 1
    finally:
        black_hole.released.set()


# --- a slow endpoint beside a well-behaved one -----------------------------------------------------


@dataclass
class Held:
    """An endpoint that answers 200 only once released; counts the requests it holds at once."""

    released: asyncio.Event
    holding: int = 0
    most_held: int = 0
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line[15:]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")
                )
                await reader.readexactly(length)
                self.holding += 1
                self.most_held = max(self.most_held, self.holding)
                await self.released.wait()
                self.holding -= 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def test_a_slow_merchant_holds_its_share_of_the_worker_and_the_others_go_out(app, settings, listen) -> None:
    """The slow merchant's twenty callbacks are due first; the other merchant's three still go out while
    every one of the slow merchant's answers is held, and the slow one never holds more than its share."""
    slow = Held(released=asyncio.Event())
    slow.port = await listen(slow.handle)
    database = db(app)
    slow_merchant, prompt_merchant = (await make_merchant(app)).id, (await make_merchant(app)).id
    slow_url = f"http://127.0.0.1:{slow.port}/cb"
    slow_ids = [
        await record(database, merchant_id=slow_merchant, url=slow_url, transaction_ref=f"S{n}") for n in range(20)
    ]
    # No attempt times out while held: the slow endpoint's count is of attempts in flight only.
    shared = settings.model_copy(
        update={
            "callback_concurrency": 6,
            "callback_concurrency_per_merchant": 2,
            "callback_timeout_seconds": 60.0,
            "callback_lease_seconds": 120.0,
        }
    )
    worker = DeliveryWorker(database, shared, name="fairness")
    running = asyncio.create_task(worker.run())
    try:
        async with CallbackReceiver() as receiver:
            for n in range(3):
                await record(database, merchant_id=prompt_merchant, url=receiver.url("/cb"), transaction_ref=f"P{n}")
            worker.wake()
            await receiver.wait_for(3, timeout=callback_hang_guard())
            assert slow.holding == 2
            assert slow.most_held == 2
            slow.released.set()
            for callback_id in slow_ids:
                await wait_status(database, callback_id, "delivered")
        assert slow.most_held == 2
    finally:
        slow.released.set()
        worker.stop()
        await running


async def test_a_claim_skipping_merchants_at_their_share_is_compiled_once_per_number_skipped(app, monkeypatch) -> None:
    """While a slow merchant holds its share, the worker claims skipping it at every wake-up: that claim is
    compiled once per number of merchants skipped, not at each claim, where compiling it cost more than the claim
    (milliseconds, added to every other merchant's callback: `make soak-tenants` measured it). kasir.db.statements'
    compile_for is counted through the module: nothing public tells a compiled statement from a reused one."""
    compiled: list[object] = []
    compile_for = statements.compile_for

    def counted(statement: object, *args: object, **kwargs: object) -> statements.Compiled:
        compiled.append(statement)
        return compile_for(statement, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(statements, "compile_for", counted)
    now = datetime.now(UTC)
    for n in range(3):  # a limit of 0 claims nothing another test left due
        async with db(app).unit_of_work(atomic=False) as session:
            claimed = await callback_repository.claim(session, now, 0, "test", now, [f"M-SLOW-{n}"])
        assert claimed == []
    assert len(compiled) <= 1, compiled

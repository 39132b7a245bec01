"""Test harness: a real SQLite file or a real PostgreSQL server (KASIR_TEST_DB), the ASGI app."""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from kasir.app import create_app
from kasir.callbacks.worker import DeliveryWorker
from kasir.config import Settings, configure
from kasir.db import Database, upgrade_schema
from kasir.kit.clock import clock
from kasir.products import declare_products
from tests.support.browser import artifacts, chromium  # noqa: F401 (fixtures)
from tests.support.postgres import PostgresCluster
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir

TEST_DB = os.environ.get("KASIR_TEST_DB", "sqlite")

# Every test talks to 127.0.0.1 only; machines with an HTTP(S)_PROXY for the package registries (CI) must not send
# that traffic to the proxy. Set before any client or `kasir serve` subprocess is made, so all of them inherit it.
for _name in ("NO_PROXY", "no_proxy"):
    os.environ[_name] = ",".join(filter(None, ["127.0.0.1,localhost", os.environ.get(_name, "")]))
TEST_SECRET_KEY = "test-secret-key-not-for-production"
TEST_ADMIN_TOKEN = "test-admin-token"
WRITE_SEAT_WATCHDOG_SECONDS = 2.0
SESSION_RATE_LIMITS = {
    "rate_limit_token_requests_per_ip": 1_000_000,
    "rate_limit_tokens_per_client": 1_000_000,
    "rate_limit_failures_per_ip": 1_000_000,
    "rate_limit_failures_per_merchant": 1_000_000,
    # A day: a window ends only at midnight UTC, so a test's counts (in-process or in `served`) stay in one.
    "rate_limit_token_window_seconds": 86_400,
    "rate_limit_failure_window_seconds": 86_400,
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: drives Chromium through Playwright (run alone: -m browser)")


# The lanes (docs/contributor/tests.md): a test that starts a process (`kasir` in a subprocess, a
# browser, PostgreSQL of its own, node, nginx) is in the slow lane. A test that asks for one of these
# fixtures is marked so here; one that starts a process itself says `pytest.mark.slow`, and if it
# forgets, `_fast_lane_starts_no_process` fails it with that advice.
SLOW_FIXTURES = frozenset({"served", "chromium", "phone_page"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())) or item.get_closest_marker("browser"):
            item.add_marker(pytest.mark.slow)


class StartsAProcess(AssertionError):
    """A test outside the slow lane started a process."""


@pytest.fixture(autouse=True)
def _fast_lane_starts_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail a test that starts a process without being in the slow lane (it would slow the fast lane down,
    and the fast lane runs in parallel, where processes of their own compete for the cores)."""
    if request.node.get_closest_marker("slow"):
        return
    name = request.node.nodeid

    def refuse(self: subprocess.Popen[bytes], args: object, *_args: object, **_kwargs: object) -> None:
        raise StartsAProcess(
            f"{name} starts a process ({args!r}): mark it `@pytest.mark.slow` (the slow lane), or use an "
            "in-process way (Typer's CliRunner for the `kasir` command, the ASGI app through httpx)"
        )

    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)


def pytest_report_header() -> str:
    return f"kasir database: {TEST_DB}"


@pytest.fixture(scope="session")
def data_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kasir-test-") as directory:
        yield Path(directory)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster | None]:
    if TEST_DB != "postgres":
        yield None
        return
    cluster = PostgresCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def database_url(data_dir: Path, postgres: PostgresCluster | None) -> str:
    if postgres is not None:
        return postgres.create_database("kasir_test")
    return f"sqlite+aiosqlite:///{data_dir / 'kasir-test.db'}"


@pytest.fixture(scope="session")
def settings_env(data_dir: Path, database_url: str) -> dict[str, str]:
    """The environment a `kasir` subprocess needs to share the test database."""
    return {
        "KASIR_ENV": "staging",
        "KASIR_DATA_DIR": str(data_dir),
        "KASIR_DATABASE_URL": database_url,
        "KASIR_SECRET_KEY": TEST_SECRET_KEY,
        "KASIR_ADMIN_TOKEN": TEST_ADMIN_TOKEN,
        "KASIR_LOG_LEVEL": "INFO",
        "KASIR_CALLBACK_POLL_SECONDS": "0.1",
        "KASIR_CALLBACK_TIMEOUT_SECONDS": "2",
        # The watchdog of SQLite's write seat (kasir.db.sqlite): a unit of work that waits on
        # something slow inside a write fails the test that made it. Generous for a loaded machine.
        "KASIR_DEBUG_WRITE_SEAT_SECONDS": str(WRITE_SEAT_WATCHDOG_SECONDS),
        # Every in-process test speaks from 127.0.0.1, and many fail authentication on purpose: the
        # limits are out of reach here. tests/ratelimit lowers them, test by test, on its own addresses.
        **{f"KASIR_{name.upper()}": str(value) for name, value in SESSION_RATE_LIMITS.items()},
    }


@pytest.fixture(scope="session")
def settings(settings_env: dict[str, str]) -> Settings:
    return Settings(
        env="staging",
        data_dir=Path(settings_env["KASIR_DATA_DIR"]),
        database_url=settings_env["KASIR_DATABASE_URL"],
        secret_key=TEST_SECRET_KEY,
        admin_token=TEST_ADMIN_TOKEN,
        public_url="http://kasir.test",
        callback_poll_seconds=0.1,
        callback_timeout_seconds=2,
        debug_write_seat_seconds=WRITE_SEAT_WATCHDOG_SECONDS,
        # No worker of the app's own: a test that asks for `receiver` gets one for its time (see there).
        embedded_worker=False,
        **SESSION_RATE_LIMITS,
    )


@pytest.fixture(scope="session")
async def migrated(settings: Settings) -> None:
    database = Database(settings)
    try:
        await upgrade_schema(database)
    finally:
        await database.dispose()


@pytest.fixture(scope="session")
async def app(settings: Settings, migrated: None) -> AsyncIterator[FastAPI]:
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application
    configure(None)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://kasir.test") as http:
        yield http


@pytest.fixture(scope="session", autouse=True)
def _products_declared() -> None:
    """The products' offers, declared as every entry point of Kasir declares them at start-up
    (kasir.products): a test that reaches the processors without an app would otherwise find none,
    or find them only when an earlier test of its worker happened to create an app."""
    declare_products()


@pytest.fixture(autouse=True)
def _reset_clock() -> Iterator[None]:
    clock.reset()
    yield
    clock.reset()


@pytest.fixture(scope="session")
async def served(settings_env: dict[str, str], migrated: None) -> AsyncIterator[ServedKasir]:
    """`kasir serve` in a subprocess on a free loopback port, sharing the test database.

    Started and stopped in a thread: blocking the session loop for the seconds a server takes to
    start would freeze the in-process app's worker, possibly inside a SQLite write transaction
    that the new server then waits on.
    """
    server = ServedKasir(settings_env)
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


@pytest.fixture
async def receiver(app: FastAPI) -> AsyncIterator[CallbackReceiver]:
    """A real HTTP receiver on 127.0.0.1 for callbacks (see tests/support/receiver.py), and a callback
    worker for this test: the in-process app has none of its own, so callbacks go out only while a test
    that asked for a receiver runs. The worker stops with the test, its attempts in flight finished."""
    async with CallbackReceiver() as callback_receiver, delivering(app):
        yield callback_receiver


@pytest.fixture
async def worker(app: FastAPI) -> AsyncIterator[DeliveryWorker]:
    """A callback worker for this test without a receiver (callbacks to addresses that refuse, time out...)."""
    async with delivering(app) as callback_worker:
        yield callback_worker


@asynccontextmanager
async def delivering(app: FastAPI) -> AsyncIterator[DeliveryWorker]:
    """A callback worker (and its expiry jobs) on the app's database while the block runs."""
    worker = DeliveryWorker(app.state.database, app.state.settings, name=f"test:{os.getpid()}")
    task = asyncio.create_task(worker.run())
    app.state.worker = worker  # the app's worker for the block (tests/support/worker.py asks it)
    try:
        yield worker
    finally:
        app.state.worker = None
        worker.stop()
        await task

"""The SDK tests' `served`: the root fixture's `kasir serve`, started and stopped without blocking the loop.

The root fixture (tests/conftest.py) starts the subprocess synchronously, freezing the session
event loop for the seconds the server takes to start. If the in-process app's callback worker
is inside a SQLite write transaction at that moment (its expiry pass runs every few seconds),
the transaction cannot finish while the loop is frozen, and the new server's start-up schema
check waits on the same write lock until its 30 s busy timeout: "kasir serve did not start".
Starting it in a thread keeps the loop, and so the worker, running.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tests.support.server import ServedKasir


@pytest.fixture(scope="session")
async def served(settings_env: dict[str, str], migrated: None) -> AsyncIterator[ServedKasir]:
    server = ServedKasir(settings_env)
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)

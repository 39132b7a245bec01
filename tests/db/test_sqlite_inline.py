"""The inline SQLite driver: another process's write lock is waited for without blocking the event loop."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from kasir.config import Settings
from kasir.db import Database
from tests.support.loop import LoopTicks


@pytest.fixture
async def database(tmp_path: Path):
    db = Database(Settings(data_dir=tmp_path, secret_key="k"))
    async with db.unit_of_work() as session:
        await session.execute(text("CREATE TABLE probe (x INTEGER)"))
    yield db, tmp_path / "kasir.db"
    await db.dispose()


async def test_a_write_waits_for_another_process_and_the_loop_keeps_running(database):
    db, path = database
    other_process = sqlite3.connect(path, isolation_level=None)  # stands for another kasir process
    other_process.execute("BEGIN IMMEDIATE")

    async def write() -> None:
        async with db.unit_of_work() as session:
            await session.execute(text("INSERT INTO probe (x) VALUES (1)"))

    ticks = LoopTicks()
    writing = asyncio.create_task(write())
    await asyncio.sleep(0.5)
    assert not writing.done()  # still waiting for the lock, not failed
    assert ticks.count >= 20  # and the loop was free meanwhile (a blocking wait would leave ticks near 0)
    other_process.rollback()
    other_process.close()
    await asyncio.wait_for(writing, 5)
    ticks.stop()
    with sqlite3.connect(path) as reader:
        assert reader.execute("SELECT count(*) FROM probe").fetchone() == (1,)


async def test_busy_beyond_the_limit_fails_instead_of_hanging(database, monkeypatch):
    db, path = database
    other_process = sqlite3.connect(path, isolation_level=None)
    other_process.execute("BEGIN IMMEDIATE")
    try:
        async with db.engine.connect() as connection:
            raw = await connection.get_raw_connection()
            monkeypatch.setattr(raw.driver_connection, "busy_seconds", 0.2)
            # SQLAlchemy's OperationalError, which the endpoints answer with 503 (its BEGIN runs on the driver's cursor)
            with pytest.raises(OperationalError, match="locked"):
                await connection.execute(text("INSERT INTO probe (x) VALUES (2)"))
    finally:
        other_process.rollback()
        other_process.close()

"""The tests' own table, its statements, and what the tests of kasir.db read it with."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    bindparam,
    func,
    insert,
    select,
)

from kasir.db import Database, Statement, UTCDateTime, binds

metadata = MetaData()
item = Table(
    "db_probe_item",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(64), unique=True, nullable=False),
    Column("at", UTCDateTime(), nullable=True),
    Column("amount", BigInteger, nullable=True),  # whole rupiah, as the rooms keep money
    Column("rate", Numeric(12, 4), nullable=True),
    Column("settled", Boolean, nullable=False, default=False),  # Python-side defaults, applied by kasir.db
    Column("visits", Integer, nullable=False, default=0, onupdate=7),
    Column("note", String(32), nullable=True),
)

ADD = Statement(insert(item).values(binds(item, ("name",))))
NAMES = Statement(select(item.c.name).order_by(item.c.name))
COUNT = Statement(select(func.count()).select_from(item))
BY_NAME = Statement(select(item.c.id).where(item.c.name == bindparam("name")))


@asynccontextmanager
async def holding_a_unit(database: Database) -> AsyncIterator[asyncio.Task[None]]:
    """A unit that has written "held" and keeps its connection (PostgreSQL) or the write seat (SQLite)
    until the block ends; the block gets the holder's task. The unit then commits."""
    holding, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with database.unit_of_work() as session:
            await ADD.execute(session, name="held")
            holding.set()
            await release.wait()

    task = asyncio.create_task(holder())
    try:
        await asyncio.wait_for(holding.wait(), 10)
        yield task
    finally:
        release.set()
        await asyncio.wait_for(task, 10)


async def add(database: Database, name: str) -> None:
    """One row in a write unit of its own."""
    async with database.unit_of_work() as session:
        await ADD.execute(session, name=name)


async def names(database: Database) -> set[str]:
    """The names committed, read in a read unit."""
    async with database.unit_of_work(read_only=True) as session:
        return {row[0] for row in await NAMES.rows(session)}


def names_on_disk(path: Path) -> set[str]:
    """Read with a sqlite3 connection of the test's own: only what was really committed is visible."""
    with sqlite3.connect(path) as connection:
        found = {row[0] for row in connection.execute(f"SELECT name FROM {item.name}")}
    connection.close()
    return found


async def python(script: str, *args: str, stdin: bool = False) -> asyncio.subprocess.Process:
    """`python -c script args...`, its stdout (and stdin) piped to the test."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        script,
        *args,
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def read_line(process: asyncio.subprocess.Process, timeout: float = 30) -> str:
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), timeout)
    if not line:
        assert process.stderr is not None
        raise AssertionError(f"the subprocess ended: {(await process.stderr.read()).decode()}")
    return line.decode().strip()


def by_name(rows: Sequence[Sequence[object]]) -> dict[object, Sequence[object]]:
    return {row[0]: row for row in rows}

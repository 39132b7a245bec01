"""What a database that cannot take the work raises: kasir.db's own errors, whatever the driver.

DatabaseUnavailable   503 + Retry-After on every route: unreachable, overloaded, cannot write now
LockTimeout           a row another unit holds was not free in time (tests/db/test_postgres.py)
anything else         the driver's own error, a bug (500)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from kasir.config import Settings
from kasir.db import UNAVAILABLE, Database, DatabaseUnavailable, LockTimeout, fetch, lock_wait_at_most, ping
from tests.db.probe import ADD, add, item, names, names_on_disk
from tests.support.postgres import free_port


def test_what_every_route_answers_with_503_is_kasir_db_s_own_error() -> None:
    assert UNAVAILABLE == (DatabaseUnavailable,)
    assert not issubclass(LockTimeout, DatabaseUnavailable)  # a lock not free in time is the caller's to answer


async def test_an_unreachable_postgresql_is_an_unavailable_database_and_is_tried_again(tmp_path: Path) -> None:
    """No PostgreSQL needed: a port on 127.0.0.1 nothing listens on."""
    url = f"postgresql+asyncpg://kasir@127.0.0.1:{free_port()}/kasir"
    database = Database(Settings(data_dir=tmp_path, secret_key="k", database_url=url))
    try:
        for _ in range(2):  # the next unit tries again (no pool left broken), and fails the same way
            with pytest.raises(DatabaseUnavailable, match="PostgreSQL"):
                await add(database, "nowhere")
        with pytest.raises(DatabaseUnavailable):
            await ping(database)  # /readyz's check
    finally:
        await database.dispose()


async def test_an_unopenable_sqlite_file_is_an_unavailable_database(tmp_path: Path) -> None:
    (tmp_path / "kasir.db").mkdir()  # a directory where the file should be
    database = Database(Settings(data_dir=tmp_path, secret_key="k"))
    try:
        with pytest.raises(DatabaseUnavailable, match="SQLite"):
            await ping(database)
    finally:
        await database.dispose()


async def test_a_read_unit_on_sqlite_cannot_write(database: Database, on_postgres: bool, tmp_path: Path) -> None:
    """A read unit reads on a query-only connection: it never takes the write lock, so it cannot write."""
    if on_postgres:
        pytest.skip("on PostgreSQL a read unit runs in autocommit, not on a query-only connection")

    async def write_in_a_read_unit() -> None:
        async with database.unit_of_work(read_only=True) as session:
            await ADD.execute(session, name="written by a reader")

    with pytest.raises(Exception, match="readonly"):
        await write_in_a_read_unit()
    assert names_on_disk(tmp_path / "kasir.db") == set()
    await add(database, "by a writer")
    assert await names(database) == {"by a writer"}


async def test_lock_wait_at_most_changes_nothing_when_no_other_unit_holds_the_rows(database: Database) -> None:
    """On either database, the block's statements run as any other when nothing is in their way."""
    async with database.unit_of_work() as session:
        async with lock_wait_at_most(session, 0.05):
            await ADD.execute(session, name="free")
        await ADD.execute(session, name="after the block")
    async with database.unit_of_work(read_only=True) as session:
        assert await fetch(session, select(item.c.name).order_by(item.c.name)) == [("after the block",), ("free",)]

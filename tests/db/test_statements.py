"""kasir.db.Statement: the same answers as SQLAlchemy on both databases.

On inline SQLite and on asyncpg, statements take the driver's own path.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, bindparam, event, insert, select, update
from sqlalchemy.exc import IntegrityError, StatementError

from kasir.config import Settings
from kasir.db import Database, Statement, UTCDateTime, binds
from tests.support.probe_tables import database_with_tables

metadata = MetaData()
probe = Table(
    f"prepared_probe_{uuid.uuid4().hex[:8]}",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(32), unique=True, nullable=False),
    Column("at", UTCDateTime(), nullable=False),
    Column("n", Integer, nullable=False),
    Column("note", String(32), nullable=True),
)

ADD = Statement(insert(probe).values(binds(probe, ("name", "at", "n"))).returning(probe.c.id))
ADD_UNLESS_TAKEN = Statement(
    lambda insert: (
        insert(probe).values(binds(probe, ("name", "at", "n"))).on_conflict_do_nothing().returning(probe.c.id)
    )
)
BY_NAME = Statement(select(probe.c.id, probe.c.name, probe.c.at, probe.c.n).where(probe.c.name == bindparam("name")))
FIRST_TWO = Statement(select(probe.c.name).order_by(probe.c.id).limit(2))  # LIMIT's value is written in the statement
BUMP = Statement(update(probe).where(probe.c.n >= bindparam("least")).values(n=probe.c.n + 1))
# In an UPDATE, a parameter may not be named as a column (SQLAlchemy reserves those for SET).
SET_NOTE = Statement(update(probe).where(probe.c.name == bindparam("of")).values(note=bindparam("new_note")))
CLEAR_NOTE = Statement(update(probe).where(probe.c.name == bindparam("of")).values(note=None))  # NULL in the statement
NOTE = Statement(select(probe.c.note).where(probe.c.name == bindparam("name")))


@pytest.fixture
async def database(settings: Settings, migrated: None) -> AsyncIterator[Database]:
    async with database_with_tables(settings, metadata) as database:
        yield database


async def test_rows_written_and_read_back_with_the_column_types(database: Database):
    at = datetime(2026, 11, 23, 15, 4, 5, 123456, tzinfo=timezone(timedelta(hours=7)))
    async with database.unit_of_work() as session:
        first = await ADD.scalar(session, name="a", at=at, n=1)
        await ADD.scalar(session, name="b", at=at, n=5)
        await ADD.scalar(session, name="c", at=at, n=9)
    assert isinstance(first, int)
    async with database.unit_of_work(read_only=True) as session:
        row = await BY_NAME.first(session, name="a")
        names = await FIRST_TWO.rows(session)
        missing = await BY_NAME.first(session, name="nobody")
    assert row == (first, "a", at.astimezone(UTC), 1)
    assert row[2].tzinfo is not None  # aware UTC, as the ORM gives it
    assert names == [("a",), ("b",)]
    assert missing is None


async def test_an_update_says_how_many_rows_it_changed(database: Database):
    now = datetime.now(UTC)
    async with database.unit_of_work() as session:
        for name, n in (("x", 1), ("y", 5), ("z", 9)):
            await ADD.scalar(session, name=name, at=now, n=n)
        changed = await BUMP.execute(session, least=5)
    assert changed == 2
    async with database.unit_of_work(read_only=True) as session:
        assert (await BY_NAME.first(session, name="z"))[3] == 10  # type: ignore[index]


async def test_a_null_written_in_the_statement_needs_no_parameter(database: Database):
    async with database.unit_of_work() as session:
        await ADD.scalar(session, name="noted", at=datetime.now(UTC), n=1)
        assert await SET_NOTE.execute(session, of="noted", new_note="remember") == 1
        assert await NOTE.scalar(session, name="noted") == "remember"
        assert await CLEAR_NOTE.execute(session, of="noted") == 1
        assert await NOTE.scalar(session, name="noted") is None


async def test_the_constraint_decides_and_the_error_is_sqlalchemys(database: Database):
    now = datetime.now(UTC)
    async with database.unit_of_work() as session:
        assert await ADD_UNLESS_TAKEN.scalar(session, name="once", at=now, n=1) is not None
        assert await ADD_UNLESS_TAKEN.scalar(session, name="once", at=now, n=2) is None
    with pytest.raises(IntegrityError) as raised:
        async with database.unit_of_work() as session:
            await ADD.scalar(session, name="once", at=now, n=3)
    assert "once" not in str(raised.value)  # parameters are never in the message


async def test_a_failed_unit_takes_its_prepared_writes_with_it(database: Database):
    now = datetime.now(UTC)

    async def write_then_fail() -> None:
        async with database.unit_of_work() as session:
            await ADD.scalar(session, name="gone", at=now, n=1)
            raise RuntimeError("the unit fails after writing")

    with pytest.raises(RuntimeError):
        await write_then_fail()
    async with database.unit_of_work(read_only=True) as session:
        assert await BY_NAME.first(session, name="gone") is None


async def test_a_missing_parameter_is_named(database: Database):
    async with database.unit_of_work(read_only=True) as session:
        with pytest.raises((TypeError, StatementError), match="name"):
            await BY_NAME.first(session)


async def test_statements_run_on_the_driver_without_sqlalchemys_execution(database: Database):
    """On PostgreSQL through private parts of SQLAlchemy's asyncpg adapter (kasir.db.postgres), with the
    SQLAlchemy version pinned in pyproject.toml: this fails when an upgrade changes them."""
    seen: list[str] = []
    event.listen(database.engine.sync_engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
    async with database.unit_of_work() as session:
        await ADD.scalar(session, name="direct", at=datetime.now(UTC), n=1)
    async with database.unit_of_work(read_only=True) as session:
        assert (await BY_NAME.first(session, name="direct")) is not None
    assert not [sql for sql in seen if probe.name in sql]


def test_expanding_parameters_are_refused_when_compiled():
    from sqlalchemy.dialects import sqlite

    statement = Statement(select(probe.c.id).where(probe.c.name.in_(bindparam("names", expanding=True))))
    with pytest.raises(ValueError, match="expanding"):
        statement._for(sqlite.dialect())


def test_utc_datetimes_are_written_as_sqlalchemy_writes_them_on_sqlite():
    import random

    from sqlalchemy import DateTime
    from sqlalchemy.dialects import sqlite

    dialect = sqlite.dialect()
    ours = UTCDateTime()._cached_bind_processor(dialect)
    theirs = DateTime(timezone=True).dialect_impl(dialect).bind_processor(dialect)
    assert ours is not None
    assert theirs is not None
    randomly = random.Random(7)
    for _ in range(2000):
        value = datetime(
            randomly.randint(1900, 2200),
            randomly.randint(1, 12),
            randomly.randint(1, 28),
            randomly.randint(0, 23),
            randomly.randint(0, 59),
            randomly.randint(0, 59),
            randomly.choice([0, randomly.randint(0, 999_999)]),
            # The clock's UTC takes a shorter way than other offsets: both must write the same text.
            tzinfo=randomly.choice([UTC, timezone(timedelta(hours=randomly.randint(-12, 12)))]),
        )
        assert ours(value) == theirs(value.astimezone(UTC).replace(tzinfo=None))
    with pytest.raises(ValueError, match="naive"):
        ours(datetime(2026, 1, 1))

"""kasir.db.Statement and the statements built per call: the same answers on both databases.

Rows go in and come back with their columns' types; statements that change rows say how many
they changed, counted the same way on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from sqlalchemy import DateTime, bindparam, delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from kasir.db import (
    Database,
    InsertUnlessTaken,
    Statement,
    UTCDateTime,
    binds,
    fetch,
    fetch_one,
    fetch_value,
    run,
)
from tests.db.probe import ADD, item

WRITE = Statement(insert(item).values(binds(item, ("name", "at", "amount", "rate", "settled", "note"))))
ROW = Statement(
    select(item.c.name, item.c.at, item.c.amount, item.c.settled, item.c.visits, item.c.note).where(
        item.c.name == bindparam("name")
    )
)
RATE = Statement(select(item.c.rate).where(item.c.name == bindparam("name")))
FIRST_TWO = Statement(select(item.c.name).order_by(item.c.name).limit(2))  # LIMIT's value is written in the statement
BUMP = Statement(update(item).where(item.c.amount >= bindparam("least")).values(amount=item.c.amount + 1))
# In an UPDATE, a parameter may not be named as a column (SQLAlchemy reserves those for SET).
SET_NOTE = Statement(update(item).where(item.c.name == bindparam("of")).values(note=bindparam("new_note")))
CLEAR_NOTE = Statement(update(item).where(item.c.name == bindparam("of")).values(note=None))  # NULL in the statement
ADD_UNLESS_TAKEN = Statement(
    lambda insert: insert(item).values(binds(item, ("name", "amount"))).on_conflict_do_nothing(index_elements=["name"])
)
TAKE_NAME = InsertUnlessTaken(item, ("name", "amount"), ("name",))
WEST_JAVA = timezone(timedelta(hours=7))


async def write(database: Database, name: str, amount: int, **columns: object) -> None:
    values = {"at": None, "rate": None, "settled": False, "note": None, **columns}
    async with database.unit_of_work() as session:
        assert await WRITE.execute(session, name=name, amount=amount, **values) == 1


async def test_rows_come_back_with_their_columns_types(database: Database) -> None:
    at = datetime(2026, 11, 23, 15, 4, 5, 123456, tzinfo=WEST_JAVA)
    await write(database, "typed", 10**15, at=at, settled=True, note="n")
    async with database.unit_of_work(read_only=True) as session:
        row = await ROW.first(session, name="typed")
        missing = await ROW.first(session, name="nobody")
    assert row is not None
    name, read_at, amount, settled, visits, note = row
    assert (name, amount, note) == ("typed", 10**15, "n")
    assert read_at == at
    assert read_at.tzinfo is UTC  # aware, in UTC, whatever zone it was written in
    assert read_at.hour == 8
    assert settled is True
    assert isinstance(amount, int)
    assert visits == 0
    assert missing is None


async def test_decimal_columns_come_back_as_the_decimals_written(database: Database) -> None:
    """Money may be a Decimal end to end (STYLE.md): a Numeric column, by a fixed statement and built per call."""
    await write(database, "rated", 1, rate=Decimal("0.0275"))
    async with database.unit_of_work(read_only=True) as session:
        fixed = await RATE.scalar(session, name="rated")
        per_call = await fetch_value(session, select(item.c.rate).where(item.c.name == "rated"))
    assert fixed == per_call == Decimal("0.0275")
    assert isinstance(fixed, Decimal)
    assert isinstance(per_call, Decimal)


async def test_python_side_column_defaults_are_applied(database: Database) -> None:
    """`default=` for the columns an INSERT does not name, `onupdate=` for those an UPDATE does not set."""
    async with database.unit_of_work() as session:
        await ADD.execute(session, name="defaults")  # names only `name`
        assert await ROW.first(session, name="defaults") == ("defaults", None, None, False, 0, None)
        assert await SET_NOTE.execute(session, of="defaults", new_note="x") == 1
        assert await ROW.first(session, name="defaults") == ("defaults", None, None, False, 7, "x")
    async with database.unit_of_work() as session:
        assert await run(session, insert(item).values(name="per call")) == 1
        assert await fetch_one(session, select(item.c.settled, item.c.visits).where(item.c.name == "per call")) == (
            False,
            0,
        )


def test_a_default_computed_in_python_is_refused_not_ignored() -> None:
    from sqlalchemy import Column, Integer, MetaData, Table

    table = Table("computed", MetaData(), Column("id", Integer, primary_key=True), Column("n", Integer, default=len))
    statement = Statement(insert(table).values(binds(table, ("id",))))
    with pytest.raises(ValueError, match="scalar column defaults only"):
        statement.compiled(sqlite.dialect())


async def test_statements_that_change_rows_say_how_many(database: Database) -> None:
    for name, amount in (("x", 1), ("y", 5), ("z", 9)):
        await write(database, name, amount)
    async with database.unit_of_work() as session:
        assert await BUMP.execute(session, least=100) == 0
        assert await BUMP.execute(session, least=9) == 1
        assert await BUMP.execute(session, least=5) == 2
        assert await run(session, update(item).values(note="all")) == 3
        assert await run(session, delete(item).where(item.c.name.in_(["x", "nobody"]))) == 1
        assert await run(session, delete(item).where(item.c.name == "nobody")) == 0
    async with database.unit_of_work(read_only=True) as session:
        assert await fetch(session, select(item.c.name, item.c.amount).order_by(item.c.name)) == [("y", 6), ("z", 11)]


async def test_an_insert_that_does_nothing_on_conflict_counts_zero(database: Database) -> None:
    async with database.unit_of_work() as session:
        assert await ADD_UNLESS_TAKEN.execute(session, name="once", amount=1) == 1
        assert await ADD_UNLESS_TAKEN.execute(session, name="once", amount=2) == 0
        assert await TAKE_NAME.execute(session, 1.0, name="taken", amount=3) is True
        assert await TAKE_NAME.execute(session, 1.0, name="taken", amount=4) is False
        assert await TAKE_NAME.execute(session, 1.0, name="once", amount=5) is False
    async with database.unit_of_work(read_only=True) as session:
        rows = await fetch(session, select(item.c.name, item.c.amount).order_by(item.c.name))
    assert rows == [("once", 1), ("taken", 3)]


async def test_a_value_written_in_the_statement_needs_no_parameter(database: Database) -> None:
    async with database.unit_of_work() as session:
        await ADD.execute(session, name="b")
        await ADD.execute(session, name="a")
        await ADD.execute(session, name="c")
        assert await FIRST_TWO.rows(session) == [("a",), ("b",)]
        assert await SET_NOTE.execute(session, of="a", new_note="remember") == 1
        assert await fetch_value(session, select(item.c.note).where(item.c.name == "a")) == "remember"
        assert await CLEAR_NOTE.execute(session, of="a") == 1
        assert await fetch_value(session, select(item.c.note).where(item.c.name == "a")) is None


async def test_a_missing_parameter_is_named(database: Database) -> None:
    async with database.unit_of_work(read_only=True) as session:
        with pytest.raises(TypeError, match="'name'"):
            await ROW.first(session)
    async with database.unit_of_work() as session:
        with pytest.raises(TypeError, match="'new_note'"):
            await SET_NOTE.execute(session, of="a")


async def test_in_lists_are_refused_in_fixed_statements_and_work_built_per_call(database: Database) -> None:
    for name in ("a", "b", "c"):
        await write(database, name, 1)
    fixed = Statement(select(item.c.name).where(item.c.name.in_(bindparam("names", expanding=True))))
    literal = Statement(select(item.c.name).where(item.c.name.in_(["a", "b"])))
    async with database.unit_of_work(read_only=True) as session:
        with pytest.raises(ValueError, match="expanding"):
            await fixed.rows(session, names=["a"])
        with pytest.raises(ValueError, match="expanding"):
            await literal.rows(session)
        picked = await fetch(session, select(item.c.name).where(item.c.name.in_(["a", "c", "z"])).order_by(item.c.name))
        none = await fetch(session, select(item.c.name).where(item.c.name.in_([])))
    assert picked == [("a",), ("c",)]
    assert none == []


async def test_rows_fetched_per_call_are_read_by_column_name(database: Database) -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    await write(database, "named", 42, at=at, settled=True)
    async with database.unit_of_work(read_only=True) as session:
        row = await fetch_one(session, select(item.c.name, item.c.amount, item.c.at, item.c.settled))
        missing = await fetch_one(session, select(item.c.name).where(item.c.name == "nobody"))
        labelled = await fetch(session, select((item.c.amount * 2).label("doubled")))
    assert (row.name, row.amount, row.at, row.settled) == ("named", 42, at, True)
    assert row == ("named", 42, at, True)  # and by position
    assert missing is None
    assert labelled[0].doubled == 84


async def test_a_statement_is_compiled_once_per_database_kind() -> None:
    """The same Statement serves a SQLite and a PostgreSQL database (tests, the CLI's copy between them)."""
    assert "?" in WRITE.compiled(sqlite.dialect()).sql
    assert "$1" in WRITE.compiled(postgresql.asyncpg.dialect()).sql
    assert WRITE.compiled(sqlite.dialect()) is WRITE.compiled(sqlite.dialect())


async def test_a_constraint_refuses_the_row_with_the_drivers_error_and_the_unit_leaves_nothing(
    database: Database,
) -> None:
    await write(database, "once", 1)

    async def refused() -> None:
        async with database.unit_of_work() as session:
            await ADD.execute(session, name="goes with the unit")
            await ADD.execute(session, name="once")

    with pytest.raises(Exception, match="(?i)unique") as raised:
        await refused()
    assert "DatabaseUnavailable" not in type(raised.value).__name__  # a bug (500), not a 503
    assert "goes with the unit" not in str(raised.value)  # parameters are never in the message
    async with database.unit_of_work(read_only=True) as session:
        assert await fetch(session, select(item.c.name)) == [("once",)]
    await write(database, "after", 1)  # the connection went back usable


def test_utc_datetimes_are_written_as_sqlalchemy_writes_them_on_sqlite() -> None:
    """Kasir's faster bind processor writes the text SQLAlchemy's DATETIME writes (what migrations and
    older rows hold), for the clock's UTC and for other offsets."""
    dialect = sqlite.dialect()
    ours = UTCDateTime().bind_processor(dialect)
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
            tzinfo=randomly.choice([UTC, timezone(timedelta(hours=randomly.randint(-12, 12)))]),
        )
        assert ours(value) == theirs(value.astimezone(UTC).replace(tzinfo=None))
    with pytest.raises(ValueError, match="naive"):
        ours(datetime(2026, 1, 1))  # noqa: DTZ001 (the point)


async def test_a_naive_datetime_is_refused_on_either_database(database: Database) -> None:
    with pytest.raises(ValueError, match="naive"):
        async with database.unit_of_work() as session:
            await WRITE.execute(
                session, name="naive", at=datetime(2026, 1, 1), amount=1, rate=None, settled=False, note=None
            )
    async with database.unit_of_work(read_only=True) as session:
        assert await fetch(session, select(item.c.name)) == []

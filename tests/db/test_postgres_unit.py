"""kasir.db.postgres_unit: a PostgreSQL unit of work on a pooled connection, the ORM's session on demand.

kasir.db statements and the ORM share the unit's one transaction in the order they run; a read
unit opens none; the connection goes back to the pool whole, or is closed when its state is
unknown. On SQLite there is no such unit: these tests run on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, bindparam, event, func, insert, inspect, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import DeclarativeBase

from kasir.config import Settings
from kasir.db import (
    Database,
    Statement,
    binds,
    current_revision,
    head_revision,
    notify_after_commit,
    on_commit,
    postgres,
    rollback_unit,
)
from kasir.db.postgres_unit import SPARE_SECONDS, PooledUnit, Turns
from tests.conftest import TEST_DB
from tests.support.probe_tables import database_with_tables

pytestmark = pytest.mark.skipif(TEST_DB != "postgres", reason="the pooled unit of work is PostgreSQL's")

metadata = MetaData()
NAME = f"pooled_probe_{uuid.uuid4().hex[:8]}"
probe = Table(NAME, metadata, Column("id", Integer, primary_key=True), Column("name", String(32), unique=True))


class _Base(DeclarativeBase):
    metadata = metadata


class Probe(_Base):
    __table__ = probe


ADD = Statement(insert(probe).values(binds(probe)))
COUNT = Statement(select(func.count()).select_from(probe))
NOW = Statement(select(func.now()))


@pytest.fixture
async def database(settings: Settings, migrated: None) -> AsyncIterator[Database]:
    async with database_with_tables(settings.model_copy(update={"db_pool_size": 2}), metadata) as database:
        yield database


async def count(database: Database) -> int:
    async with database.unit_of_work(read_only=True) as session:
        return int(await COUNT.scalar(session))


def spare_connections(database: Database) -> int:
    """Connections given back a moment ago, kept for the next unit."""
    strategy = database.strategy
    assert isinstance(strategy, postgres.PostgresStrategy)
    return strategy.spare_connections


def checked_out(database: Database) -> int:
    """Connections units hold: checked out of the pool, and not kept for the next unit."""
    return int(database.engine.sync_engine.pool.checkedout()) - spare_connections(database)  # type: ignore[attr-defined]


async def test_units_are_pooled_units(database: Database) -> None:
    assert isinstance(database.unit_of_work(), PooledUnit)  # else every other test here proves nothing


async def test_a_unit_takes_a_connection_only_when_a_statement_needs_one(database: Database) -> None:
    async with database.unit_of_work() as session:
        assert checked_out(database) == 0  # a request refused before its first statement never waits for one
        session.add(Probe(id=1, name="added"))
        assert checked_out(database) == 0
    assert await count(database) == 1  # the commit's flush took one (in the greenlet) and gave it back
    async with database.unit_of_work(read_only=True) as session:
        assert checked_out(database) == 0
        assert await COUNT.scalar(session) == 1
        assert checked_out(database) == 1
    assert checked_out(database) == 0


async def test_statements_and_the_orm_share_one_transaction_in_the_order_they_run(database: Database) -> None:
    async with database.unit_of_work() as session:
        await ADD.execute(session, id=1, name="statement first")
        assert await session.scalar(select(func.count()).select_from(probe)) == 1  # the ORM sees it
        session.add(Probe(id=2, name="orm second"))
        assert await COUNT.scalar(session) == 2  # the ORM's row is flushed before the statement
        await ADD.execute(session, id=3, name="statement last")
    assert await count(database) == 3
    assert checked_out(database) == 0


async def test_a_failure_rolls_back_the_statements_and_the_orm_together(database: Database) -> None:
    committed: list[str] = []

    async def failing() -> None:
        async with database.unit_of_work() as session:
            await ADD.execute(session, id=1, name="a")
            session.add(Probe(id=2, name="b"))
            await session.flush()
            on_commit(session, lambda: committed.append("ran"))
            raise RuntimeError("the endpoint failed")

    with pytest.raises(RuntimeError):
        await failing()
    assert await count(database) == 0
    assert committed == []
    assert checked_out(database) == 0


async def test_an_orm_row_refused_at_commit_rolls_back_the_unit(database: Database) -> None:
    async with database.unit_of_work() as session:
        await ADD.execute(session, id=1, name="taken")

    async def refused() -> None:
        async with database.unit_of_work() as session:
            await ADD.execute(session, id=2, name="goes with the unit")
            session.add(Probe(id=3, name="taken"))  # flushed by the commit, refused there

    with pytest.raises(IntegrityError):
        await refused()
    assert await count(database) == 1
    async with database.unit_of_work() as session:  # the connection went back usable
        await ADD.execute(session, id=4, name="after")
    assert await count(database) == 2
    assert checked_out(database) == 0


async def test_rollback_unit_undoes_both_and_the_unit_goes_on(database: Database) -> None:
    async with database.unit_of_work() as session:
        await ADD.execute(session, id=1, name="undone")
        session.add(Probe(id=2, name="undone too"))
        await session.flush()
        await rollback_unit(session)
        await ADD.execute(session, id=3, name="kept")
    async with database.unit_of_work(read_only=True) as session:
        names = (await session.execute(select(probe.c.name))).scalars().all()
    assert names == ["kept"]


async def test_a_read_unit_opens_no_transaction(database: Database) -> None:
    """In a transaction now() is its start for every statement; in autocommit each statement has its own."""
    async with database.unit_of_work() as session:
        first = await NOW.scalar(session)
        await asyncio.sleep(0.01)
        assert await NOW.scalar(session) == first
    async with database.unit_of_work(read_only=True) as session:
        first = await NOW.scalar(session)
        await asyncio.sleep(0.01)
        assert await NOW.scalar(session) > first
        await asyncio.sleep(0.01)
        assert await session.scalar(select(func.now())) > first  # the ORM's statements too
    async with database.unit_of_work() as session:  # the connection is back out of autocommit
        first = await NOW.scalar(session)
        await asyncio.sleep(0.01)
        assert await session.scalar(select(func.now())) == first


async def test_a_unit_that_is_not_atomic_commits_each_statement_as_it_runs(database: Database) -> None:
    """`atomic=False`: no BEGIN, no COMMIT; each statement is its own transaction, kept when a later one fails."""

    async def kept_then_refused() -> None:
        async with database.unit_of_work(atomic=False) as session:
            first = await NOW.scalar(session)
            await asyncio.sleep(0.01)
            assert await NOW.scalar(session) > first
            await ADD.execute(session, id=1, name="kept")
            await ADD.execute(session, id=2, name="kept")  # the name is taken: this statement alone fails

    with pytest.raises(IntegrityError):
        await kept_then_refused()
    assert await count(database) == 1
    assert checked_out(database) == 0
    async with database.unit_of_work() as session:  # the connection is back out of autocommit
        first = await NOW.scalar(session)
        await asyncio.sleep(0.01)
        assert await NOW.scalar(session) == first
        await ADD.execute(session, id=3, name="undone")
        await rollback_unit(session)
    assert await count(database) == 1


async def test_units_past_the_pool_size_wait_for_a_connection_and_none_is_opened_for_them(
    database: Database,
) -> None:
    """Connections opened for a burst and closed after it cost PostgreSQL a backend each: the pool
    size is the most a process holds."""
    gate = asyncio.Event()
    most = 0

    async def unit(n: int) -> None:
        nonlocal most
        async with database.unit_of_work() as session:
            await ADD.execute(session, id=n, name=f"n{n}")
            most = max(most, checked_out(database))
            await gate.wait()

    units = [asyncio.create_task(unit(n)) for n in range(4)]
    while checked_out(database) < 2:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)
    gate.set()
    await asyncio.gather(*units)
    assert most == 2
    await asyncio.sleep(SPARE_SECONDS * 3)  # the last units' connections, kept for units that did not come
    pool = database.engine.sync_engine.pool
    assert (checked_out(database), pool.checkedin()) == (0, 2)  # type: ignore[attr-defined]
    assert await count(database) == 4


async def test_a_connection_the_server_ended_is_closed_not_given_back(database: Database) -> None:
    async with database.unit_of_work() as session:
        pid = await Statement(select(func.pg_backend_pid())).scalar(session)

    async def cut_off() -> None:
        async with database.unit_of_work() as session:
            assert await Statement(select(func.pg_backend_pid())).scalar(session) == pid  # the pool's one
            async with database.unit_of_work() as other:
                await other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            await ADD.execute(session, id=1, name="lost")

    with pytest.raises(DBAPIError):
        await cut_off()
    assert checked_out(database) == 0
    for n in range(3):  # whichever pooled connection each unit gets, it answers
        async with database.unit_of_work() as session:
            await ADD.execute(session, id=10 + n, name=f"after {n}")
    assert await count(database) == 3


async def test_a_unit_cancelled_mid_statement_gives_back_no_half_used_connection(database: Database) -> None:
    started = asyncio.Event()

    async def slow() -> None:
        async with database.unit_of_work() as session:
            await ADD.execute(session, id=1, name="cancelled")
            started.set()
            await Statement(select(func.pg_sleep(bindparam("seconds", type_=Integer)))).scalar(session, seconds=5)

    task = asyncio.create_task(slow())
    await started.wait()
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert checked_out(database) == 0
    for n in range(3):
        async with database.unit_of_work() as session:
            await ADD.execute(session, id=10 + n, name=f"after {n}")
    assert await count(database) == 3


async def test_a_notification_goes_with_the_commit_and_never_with_a_rollback(database: Database) -> None:
    channel = f"probe_{uuid.uuid4().hex[:8]}"
    received: list[str] = []
    dsn = make_url(database.url).set(drivername="postgresql").render_as_string(hide_password=False)
    listener = await asyncpg.connect(dsn)
    await listener.add_listener(channel, lambda *args: received.append(args[2]))
    try:
        async with database.unit_of_work() as session:
            await ADD.execute(session, id=1, name="notified")
            await notify_after_commit(session, channel)
            await notify_after_commit(session, channel)  # one notification: PostgreSQL folds equal ones
            await asyncio.sleep(0.1)
            assert received == []  # not before the commit
        for _ in range(100):
            if received:
                break
            await asyncio.sleep(0.01)
        assert received == [channel]

        async def failing() -> None:
            async with database.unit_of_work() as session:
                await notify_after_commit(session, channel)
                await ADD.execute(session, id=2, name="rolled back")
                raise RuntimeError("the endpoint failed")

        with pytest.raises(RuntimeError):
            await failing()
        async with database.unit_of_work() as session:  # and the ORM's own transaction carries one too
            session.add(Probe(id=3, name="orm first"))
            await session.flush()
            await notify_after_commit(session, channel)
        await asyncio.sleep(0.2)
        assert received == [channel, channel]
        assert await count(database) == 2
    finally:
        await listener.close()


async def test_without_the_adapter_parts_it_knows_a_unit_goes_through_the_session(
    database: Database, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SQLAlchemy whose asyncpg adapter changed: units and statements take SQLAlchemy's own way."""
    monkeypatch.setattr(postgres, "asyncpg_path_supported", lambda *_types: False)
    plain = Database(settings)
    try:
        assert not isinstance(plain.unit_of_work(), PooledUnit)
        async with plain.unit_of_work() as session:
            await ADD.execute(session, id=1, name="through the session")
            session.add(Probe(id=2, name="orm"))
            await notify_after_commit(session, "kasir_probe")

        async def failing() -> None:
            async with plain.unit_of_work() as session:
                await ADD.execute(session, id=3, name="rolled back")
                raise RuntimeError("the endpoint failed")

        with pytest.raises(RuntimeError):
            await failing()

        async def not_atomic() -> None:
            async with plain.unit_of_work(atomic=False) as session:
                await ADD.execute(session, id=4, name="committed by itself")
                raise RuntimeError("the endpoint failed")

        with pytest.raises(RuntimeError):
            await not_atomic()
        async with plain.unit_of_work(read_only=True) as session:
            assert await COUNT.scalar(session) == 3
    finally:
        await plain.dispose()


async def test_units_waiting_for_a_connection_get_one_in_the_order_they_asked(database: Database) -> None:
    """The pool's own wait lets a unit asking just as a connection comes back take it ahead of one
    that has waited (at load, some waited far longer than the rest)."""
    release = [asyncio.Event(), asyncio.Event()]
    served: list[str] = []

    async def unit(name: str, until: asyncio.Event | None = None) -> None:
        async with database.unit_of_work() as session:
            await COUNT.scalar(session)
            served.append(name)
            if until is not None:
                await until.wait()

    async def holder_then_newcomer() -> None:
        await unit("holder 0", release[0])
        await unit("asked last")  # asks in the same step its connection came back in, before the waiter runs

    holders = [asyncio.create_task(holder_then_newcomer()), asyncio.create_task(unit("holder 1", release[1]))]
    while len(served) < 2:
        await asyncio.sleep(0.01)
    waiting = asyncio.create_task(unit("waited", release[1]))
    await asyncio.sleep(0.05)
    release[0].set()
    await asyncio.sleep(0.05)
    release[1].set()
    await asyncio.gather(waiting, *holders)
    assert served[2:] == ["waited", "asked last"]


async def test_a_unit_waits_for_its_turn_at_most_the_pools_timeout() -> None:
    """A unit that gets no connection in time gets the pool's own error (every route: 503)."""
    turns = Turns(1, timeout=0.05)
    held = await turns.take()
    with pytest.raises(PoolTimeout, match="KASIR_DB_POOL_SIZE=1"):
        await turns.take()
    held.release()
    (await turns.take()).release()  # the timed-out wait left no turn taken


# --- connections and sessions from unit to unit ------------------------------------------------


def pool_checkouts(database: Database) -> list[int]:
    """Each check-out of SQLAlchemy's pool from now on, as it happens."""
    seen: list[int] = []
    event.listen(database.engine.sync_engine.pool, "checkout", lambda *_args: seen.append(1))
    return seen


async def test_a_connection_given_back_goes_to_the_next_unit_without_the_pool(database: Database) -> None:
    async with database.unit_of_work() as session:
        await ADD.execute(session, id=1, name="first")
        pid = await Statement(select(func.pg_backend_pid())).scalar(session)
    checkouts = pool_checkouts(database)
    async with database.unit_of_work(read_only=True) as session:
        assert await Statement(select(func.pg_backend_pid())).scalar(session) == pid
        assert await COUNT.scalar(session) == 1  # the first unit's commit is what it reads
    assert checkouts == []  # handed over: no check-in, no check-out


async def test_a_connection_no_unit_takes_goes_back_to_the_pool(database: Database) -> None:
    async with database.unit_of_work() as session:
        await ADD.execute(session, id=1, name="first")
    pool = database.engine.sync_engine.pool
    assert spare_connections(database) == 1
    await asyncio.sleep(SPARE_SECONDS * 3)
    assert (spare_connections(database), pool.checkedout(), pool.checkedin()) == (0, 0, 1)  # type: ignore[attr-defined]
    checkouts = pool_checkouts(database)
    assert await count(database) == 1
    assert checkouts == [1]


async def test_a_connection_kept_for_the_next_unit_is_closed_with_the_database(
    settings: Settings, migrated: None
) -> None:
    """Disposed of with a connection kept: it goes back to the pool and is closed with it, not left open
    (an unclosed asyncpg connection is a ResourceWarning, an error in these tests)."""
    database = Database(settings)
    async with database.unit_of_work(read_only=True) as session:
        await Statement(select(func.now())).scalar(session)
    pool = database.engine.sync_engine.pool
    assert spare_connections(database) == 1
    await database.dispose()
    assert (spare_connections(database), pool.checkedout()) == (0, 0)  # type: ignore[attr-defined]


async def test_a_units_session_serves_the_next_unit_cleared(database: Database) -> None:
    async with database.unit_of_work() as session:
        first = session
        session.sync_session.info["left by a room"] = True
        await ADD.execute(session, id=1, name="first")
    async with database.unit_of_work() as session:
        assert session is first  # made once, not for every unit
        assert "left by a room" not in session.info
        assert session.sync_session.kasir_unit is not None  # type: ignore[attr-defined]
        loaded = await session.get(Probe, 1)  # the ORM: an object in the session's identity map
        assert loaded is not None
    assert inspect(loaded).detached  # let go, still readable
    assert loaded.name == "first"
    async with database.unit_of_work() as session:
        assert session is first
        assert len(session.sync_session.identity_map) == 0
        again = await session.get(Probe, 1)
        assert again is not loaded  # read afresh, not the last unit's object
        again.name = "renamed"
    async with database.unit_of_work(read_only=True) as session:
        assert await Statement(select(probe.c.name).where(probe.c.id == 1)).scalar(session) == "renamed"


async def test_the_schema_check_gets_its_turn_while_units_keep_every_connection_busy(database: Database) -> None:
    """/readyz under load: connections go from unit to unit without the pool, so the schema check
    waits for its turn with the units rather than for the pool."""
    busy = True

    async def steady_units() -> None:
        while busy:
            async with database.unit_of_work(read_only=True) as session:
                await Statement(select(func.pg_sleep(0.001))).scalar(session)

    units = [asyncio.create_task(steady_units()) for _ in range(4)]
    try:
        await asyncio.sleep(0.1)
        assert await asyncio.wait_for(current_revision(database), timeout=5) == head_revision()
    finally:
        busy = False
        await asyncio.gather(*units)

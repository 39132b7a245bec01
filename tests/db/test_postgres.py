"""PostgreSQL's own guarantees: units on a bounded pool, units that commit statement by statement,
connections the server cut, row locks waited for at most as long as asked.

Run with KASIR_TEST_DB=postgres (the session's throwaway server); skipped on a SQLite run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import pytest
from sqlalchemy import column, func, select, table, update

import kasir.db.postgres
from kasir.config import Settings
from kasir.db import (
    Database,
    DatabaseUnavailable,
    InsertUnlessTaken,
    LockTimeout,
    Statement,
    current_revision,
    fetch_value,
    head_revision,
    lock_wait_at_most,
    run,
)
from kasir.db.postgres import ConnectionQueue
from tests.conftest import TEST_DB
from tests.db.probe import ADD, COUNT, add, holding_a_unit, item, names
from tests.support.postgres import PostgresCluster

pytestmark = pytest.mark.skipif(TEST_DB != "postgres", reason="PostgreSQL's units (KASIR_TEST_DB=postgres)")

PROBE_DATABASE = "kasir_db_probe"
PID = Statement(select(func.pg_backend_pid()))
LOCK_TIMEOUT = Statement(select(func.current_setting("lock_timeout")))
TAKE_NAME = InsertUnlessTaken(item, ("name", "amount"), ("name",))
activity = table("pg_stat_activity", column("pid"), column("datname"), column("query"), column("wait_event_type"))


@pytest.fixture
async def observer(settings: Settings) -> AsyncIterator[Database]:
    """A Database on another database of the server (the session's): it watches pg_stat_activity and
    ends backends, and is not counted among the probe database's connections."""
    watching = Database(settings)
    yield watching
    await watching.dispose()


@pytest.fixture
def sized(lane_settings: Settings) -> Callable[..., Database]:
    """Databases on the probe database with their own settings (the table is the `database` fixture's)."""
    made: list[Database] = []

    def make(**overrides: Any) -> Database:
        made.append(Database(lane_settings.model_copy(update=overrides)))
        return made[-1]

    return make


async def backends(observer: Database, *where: Any) -> list[int]:
    """The probe database's backends (those matching `where`), as pg_stat_activity lists them."""
    async with observer.unit_of_work(read_only=True) as session:
        query = select(activity.c.pid).where(activity.c.datname == PROBE_DATABASE, *where)
        return [row[0] for row in await kasir.db.fetch(session, query)]


async def until(condition: Callable[[], Any], timeout: float = 10) -> None:
    """Wait for an event another party makes happen (a backend ends, a statement starts waiting)."""
    async with asyncio.timeout(timeout):
        while not await condition():
            await asyncio.sleep(0.01)


async def terminate(observer: Database, pid: int) -> None:
    async with observer.unit_of_work(read_only=True) as session:
        assert await fetch_value(session, select(func.pg_terminate_backend(pid))) is True

    async def gone() -> bool:
        return pid not in await backends(observer)

    await until(gone)


async def add_each(database: Database, rows: list[str]) -> tuple[list[DatabaseUnavailable], list[str]]:
    """Each row in a unit of its own: the units that failed as unavailable, the rows added. Any other
    error (the driver's own: a 500) fails the test."""
    failures: list[DatabaseUnavailable] = []
    added: list[str] = []
    for name in rows:
        try:
            await add(database, name)
        except DatabaseUnavailable as error:
            failures.append(error)
        else:
            added.append(name)
    return failures, added


async def test_a_unit_that_is_not_atomic_commits_each_statement_as_it_runs(database: Database) -> None:
    """`atomic=False`: no transaction; what a statement wrote is committed before the next runs, and
    stays when a later one fails."""

    async def kept_then_refused() -> None:
        async with database.unit_of_work(atomic=False) as session:
            await ADD.execute(session, name="kept")
            assert await names(database) == {"kept"}  # another unit sees it while this one runs
            await ADD.execute(session, name="kept")  # the name is taken: this statement alone fails

    with pytest.raises(asyncpg.UniqueViolationError):  # the driver's own error: a bug, not a 503
        await kept_then_refused()
    assert await names(database) == {"kept"}
    async with database.unit_of_work() as session:  # the pool's connection is back in transactions
        await ADD.execute(session, name="undone")
        assert await names(database) == {"kept"}
        await kasir.db.rollback_unit(session)
    assert await names(database) == {"kept"}


async def test_units_past_the_pool_size_wait_their_turn_and_all_complete(
    database: Database, sized: Callable[..., Database]
) -> None:
    narrow = sized(db_pool_size=2)
    pids: set[int] = set()
    inside = 0
    two_inside, go_on = asyncio.Event(), asyncio.Event()

    async def unit(n: int) -> None:
        nonlocal inside
        async with narrow.unit_of_work() as session:
            pids.add(await PID.scalar(session))
            await ADD.execute(session, name=f"unit {n}")
            inside += 1
            if inside == 2:
                two_inside.set()
            await go_on.wait()

    units = [asyncio.create_task(unit(n)) for n in range(6)]
    try:
        await asyncio.wait_for(two_inside.wait(), 10)
        go_on.set()
        await asyncio.wait_for(asyncio.gather(*units), 30)
    finally:
        go_on.set()
        await narrow.dispose()
    assert len(pids) == 2  # the pool's size is the most it opens: the four that waited ran on the same two
    assert await names(database) == {f"unit {n}" for n in range(6)}


async def test_no_connection_within_the_wait_is_an_unavailable_database(
    database: Database, sized: Callable[..., Database], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kasir.db.postgres, "ACQUIRE_TIMEOUT_SECONDS", 0.2)
    narrow = sized(db_pool_size=1)
    async with holding_a_unit(narrow):
        with pytest.raises(DatabaseUnavailable):
            await add(narrow, "no connection")
    await add(narrow, "after")  # the timed-out wait took nothing with it
    await narrow.dispose()
    assert await names(database) == {"held", "after"}


async def test_units_waiting_for_a_connection_get_one_in_the_order_they_asked(
    database: Database, sized: Callable[..., Database], monkeypatch: pytest.MonkeyPatch
) -> None:
    """postgres.py: "Connections are handed out in the order units asked". A unit that asks just as a
    connection comes back must not take it ahead of one that has waited (at load, some requests
    waited far longer than the rest)."""
    narrow = sized(db_pool_size=2)
    asked: list[str] = []
    real_acquire = ConnectionQueue.acquire

    def acquire(queue: ConnectionQueue) -> Any:  # the moment a unit asks for a connection
        asked.append("asked")
        return real_acquire(queue)

    monkeypatch.setattr(ConnectionQueue, "acquire", acquire)
    release = [asyncio.Event(), asyncio.Event()]
    served: list[str] = []

    async def unit(name: str, until_set: asyncio.Event | None = None) -> None:
        async with narrow.unit_of_work() as session:
            await COUNT.scalar(session)
            served.append(name)
            if until_set is not None:
                await until_set.wait()

    async def holder_then_newcomer() -> None:
        await unit("holder 0", release[0])
        await unit("asked last")  # asks in the same step its connection came back in, before the waiter runs

    holders = [asyncio.create_task(holder_then_newcomer()), asyncio.create_task(unit("holder 1", release[1]))]
    try:
        await until(lambda: asyncio.sleep(0, len(served) == 2))
        waiting = asyncio.create_task(unit("waited", release[1]))
        await until(lambda: asyncio.sleep(0, len(asked) == 3))
        release[0].set()
        await until(lambda: asyncio.sleep(0, len(served) == 3))
        release[1].set()
        await asyncio.wait_for(asyncio.gather(waiting, *holders), 10)
    finally:
        for event in release:
            event.set()
        await asyncio.gather(*holders, return_exceptions=True)
        await narrow.dispose()
    assert served[2:] == ["waited", "asked last"]


async def test_a_connection_the_server_ended_fails_one_unit_at_most_then_units_work(
    database: Database, sized: Callable[..., Database], observer: Database
) -> None:
    narrow = sized(db_pool_size=1)
    try:
        async with narrow.unit_of_work() as session:
            pid = await PID.scalar(session)
            await ADD.execute(session, name="before")
        await terminate(observer, pid)  # idle in the pool
        failures, added = await add_each(narrow, [f"after {n}" for n in range(3)])
        assert len(failures) <= 1, failures
        async with narrow.unit_of_work(read_only=True) as session:
            assert await PID.scalar(session) != pid
    finally:
        await narrow.dispose()
    assert await names(database) == {"before", *added}


async def test_a_unit_whose_connection_is_cut_fails_as_unavailable_and_leaves_nothing(
    database: Database, sized: Callable[..., Database], observer: Database
) -> None:
    narrow = sized(db_pool_size=1)

    async def cut_off() -> None:
        async with narrow.unit_of_work() as session:
            await ADD.execute(session, name="lost with the connection")
            await terminate(observer, await PID.scalar(session))  # as a restart or an admin would
            await ADD.execute(session, name="never")

    try:
        with pytest.raises(DatabaseUnavailable):
            await cut_off()
        await add(narrow, "next")
    finally:
        await narrow.dispose()
    assert await names(database) == {"next"}


@pytest.mark.slow  # restarts the server (pg_ctl)
async def test_after_a_server_restart_one_unit_fails_at_most_then_units_work(
    database: Database, sized: Callable[..., Database], postgres: PostgresCluster
) -> None:
    narrow = sized(db_pool_size=2)
    both_inside, go_on = asyncio.Event(), asyncio.Event()
    inside = 0

    async def open_a_connection(name: str) -> None:  # two at once: the pool keeps two to be cut
        nonlocal inside
        async with narrow.unit_of_work() as session:
            await ADD.execute(session, name=name)
            inside += 1
            if inside == 2:
                both_inside.set()
            await go_on.wait()

    try:
        opening = asyncio.gather(open_a_connection("a"), open_a_connection("b"))
        await asyncio.wait_for(both_inside.wait(), 10)
        go_on.set()
        await opening
        await asyncio.to_thread(postgres.restart)
        failures, added = await add_each(narrow, [f"after {n}" for n in range(4)])
        assert len(failures) <= 1, failures
    finally:
        go_on.set()
        await narrow.dispose()
    assert await names(database) == {"a", "b", *added}  # what was committed before the restart is still there


async def test_a_unit_cancelled_mid_statement_leaves_nothing_and_its_connection_serves_no_one_half_used(
    database: Database, sized: Callable[..., Database], observer: Database
) -> None:
    narrow = sized(db_pool_size=1)

    async def slow() -> None:
        async with narrow.unit_of_work() as session:
            await ADD.execute(session, name="cancelled")
            await fetch_value(session, select(func.pg_sleep(60)))

    task = asyncio.create_task(slow())
    try:

        async def sleeping() -> bool:
            return bool(await backends(observer, activity.c.query.like("%pg_sleep%"), activity.c.pid != 0))

        await until(sleeping)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for n in range(3):
            await asyncio.wait_for(add(narrow, f"after {n}"), 10)

        async def not_sleeping() -> bool:
            return not await sleeping()

        await until(not_sleeping)  # the server stopped the statement too
    finally:
        task.cancel()
        await narrow.dispose()
    assert await names(database) == {f"after {n}" for n in range(3)}


async def test_a_disposed_database_leaves_no_connection_open(
    database: Database, sized: Callable[..., Database], observer: Database
) -> None:
    busy = sized(db_pool_size=3)
    go_on, three_inside = asyncio.Event(), asyncio.Event()
    pids: set[int] = set()

    async def unit() -> None:
        async with busy.unit_of_work(read_only=True) as session:
            pids.add(await PID.scalar(session))
            if len(pids) == 3:
                three_inside.set()
            await go_on.wait()

    units = asyncio.gather(*(unit() for _ in range(3)))
    await asyncio.wait_for(three_inside.wait(), 10)
    go_on.set()
    await units
    assert pids <= set(await backends(observer))  # kept in the pool for the next units
    await busy.dispose()

    async def none_left() -> bool:
        return not pids & set(await backends(observer))

    await until(none_left)


async def test_a_row_another_unit_holds_is_waited_for_at_most_as_long_as_asked(database: Database) -> None:
    await add(database, "contested")
    holding, release = asyncio.Event(), asyncio.Event()
    touch = update(item).where(item.c.name == "contested").values(note="touched")

    async def holder() -> None:
        async with database.unit_of_work() as session:
            assert await run(session, touch) == 1
            holding.set()
            await release.wait()

    async def waits_at_most() -> None:
        async with database.unit_of_work() as session:
            await ADD.execute(session, name="goes with the unit")
            async with lock_wait_at_most(session, 0.1):
                await run(session, touch)

    task = asyncio.create_task(holder())
    try:
        await asyncio.wait_for(holding.wait(), 10)
        with pytest.raises(LockTimeout):
            await waits_at_most()
    finally:
        release.set()
        await asyncio.wait_for(task, 10)
    assert await names(database) == {"contested"}
    async with database.unit_of_work() as session:
        async with lock_wait_at_most(session, 0.1):
            assert await run(session, touch) == 1  # free now
        assert await LOCK_TIMEOUT.scalar(session) == "0"  # the block's wait ends with it


async def test_a_name_another_open_unit_is_taking_is_waited_for_at_most_as_long_as_asked(
    database: Database, observer: Database
) -> None:
    """InsertUnlessTaken: PostgreSQL waits for the unit inserting the same name; LockTimeout past the wait,
    the answer once that unit ends within it."""
    inserting, end_it = asyncio.Event(), asyncio.Event()

    async def other(commit: bool) -> None:
        async with database.unit_of_work() as session:
            assert await TAKE_NAME.execute(session, 1.0, name="contested", amount=1) is True
            inserting.set()
            await end_it.wait()
            if not commit:
                raise RuntimeError("the other unit fails")

    task = asyncio.create_task(other(commit=False))
    try:
        await asyncio.wait_for(inserting.wait(), 10)
        with pytest.raises(LockTimeout):
            async with database.unit_of_work() as session:
                await TAKE_NAME.execute(session, 0.1, name="contested", amount=2)

        async def waits_for_it() -> None:
            async with database.unit_of_work() as session:
                assert await TAKE_NAME.execute(session, 30, name="contested", amount=3) is True
                assert await LOCK_TIMEOUT.scalar(session) == "0"  # the row went in: the wait is set back

        waiting = asyncio.create_task(waits_for_it())

        async def blocked() -> bool:
            return bool(await backends(observer, activity.c.wait_event_type == "Lock"))

        await until(blocked)
        end_it.set()  # the other unit rolls back: the name is free
        await asyncio.wait_for(waiting, 10)
    finally:
        end_it.set()
        with pytest.raises(RuntimeError):
            await asyncio.wait_for(task, 10)
    async with database.unit_of_work() as session:
        assert await TAKE_NAME.execute(session, 0.1, name="contested", amount=4) is False
    async with database.unit_of_work(read_only=True) as session:
        assert await fetch_value(session, select(item.c.amount).where(item.c.name == "contested")) == 3


async def test_the_schema_check_gets_its_turn_while_units_keep_every_connection_busy(
    settings: Settings, migrated: None
) -> None:
    """/readyz under load: the schema check waits for a connection with the units, not behind all of them."""
    database = Database(settings.model_copy(update={"db_pool_size": 2}))
    busy = True
    rounds = 0

    async def steady_units() -> None:
        nonlocal rounds
        while busy:
            async with database.unit_of_work(read_only=True) as session:
                await fetch_value(session, select(func.pg_sleep(0.001)))
            rounds += 1

    units = [asyncio.create_task(steady_units()) for _ in range(4)]
    try:
        await until(lambda: asyncio.sleep(0, rounds >= 8))
        assert await asyncio.wait_for(current_revision(database), timeout=5) == head_revision()
    finally:
        busy = False
        await asyncio.gather(*units)
        await database.dispose()

"""A unit of work on either database: all of it commits, or none of it; after-commit actions
run only after the commit.

Every test here runs on this run's database (KASIR_TEST_DB): SQLite or PostgreSQL.
"""

from __future__ import annotations

import logging

import pytest

from kasir.config import Settings
from kasir.db import Database, held_rows, on_commit, rollback_unit
from tests.db.probe import ADD, COUNT, NAMES, add, holding_a_unit, names


class Refused(Exception):
    """What an endpoint raises after it wrote."""


async def test_a_unit_that_ends_normally_commits_everything_it_wrote(database: Database) -> None:
    async with database.unit_of_work() as session:
        assert await ADD.execute(session, name="a") == 1
        assert await ADD.execute(session, name="b") == 1
    assert await names(database) == {"a", "b"}


async def test_a_unit_that_raises_leaves_nothing_and_its_error_goes_on(database: Database) -> None:
    await add(database, "before")

    async def write_then_fail() -> None:
        async with database.unit_of_work() as session:
            await ADD.execute(session, name="a")
            await ADD.execute(session, name="b")
            raise Refused

    with pytest.raises(Refused):
        await write_then_fail()
    assert await names(database) == {"before"}
    await add(database, "after")  # the database goes on
    assert await names(database) == {"before", "after"}


async def test_a_unit_sees_its_own_writes_and_no_other_unit_sees_them_before_its_commit(database: Database) -> None:
    async with database.unit_of_work() as session:
        await ADD.execute(session, name="mine")
        assert await NAMES.rows(session) == [("mine",)]
        assert await names(database) == set()  # another unit reads only what is committed
    assert await names(database) == {"mine"}


async def test_rollback_unit_undoes_what_the_unit_wrote_and_the_unit_goes_on(database: Database) -> None:
    async with database.unit_of_work() as session:
        await ADD.execute(session, name="undone")
        held_rows(session)["undone"] = ("a row read locked",)
        await rollback_unit(session)
        assert held_rows(session) == {}  # its locks are gone with its writes (PostgreSQL)
        assert await COUNT.scalar(session) == 0
        await ADD.execute(session, name="kept")
    assert await names(database) == {"kept"}


async def test_after_commit_actions_run_after_the_commit_in_order_and_see_its_rows(database: Database) -> None:
    seen: list[tuple[str, set[str]]] = []

    async def look(label: str) -> None:
        seen.append((label, await names(database)))  # another unit: only what is committed

    async with database.unit_of_work() as session:
        await ADD.execute(session, name="committed")
        on_commit(session, lambda: look("first"))
        on_commit(session, lambda: seen.append(("second", set())))
        assert seen == []
    assert seen == [("first", {"committed"}), ("second", set())]


async def test_after_commit_actions_never_run_when_the_unit_rolls_back(database: Database) -> None:
    ran: list[str] = []

    async def write_then_fail() -> None:
        async with database.unit_of_work() as session:
            await ADD.execute(session, name="rolled back")
            on_commit(session, lambda: ran.append("ran"))
            raise Refused

    with pytest.raises(Refused):
        await write_then_fail()
    assert ran == []
    assert await names(database) == set()


async def test_a_failing_after_commit_action_keeps_the_commit_and_the_next_actions_run(
    database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []

    def fails() -> None:
        raise RuntimeError("the callback could not be queued")

    with caplog.at_level(logging.ERROR, logger="kasir.db"):
        async with database.unit_of_work() as session:
            await ADD.execute(session, name="stands")
            on_commit(session, fails)
            on_commit(session, lambda: ran.append("next"))
    assert ran == ["next"]
    assert await names(database) == {"stands"}
    assert "after-commit action failed" in caplog.text


async def test_nothing_a_unit_keeps_carries_over_to_the_next(database: Database) -> None:
    ran: list[str] = []
    async with database.unit_of_work() as session:
        await ADD.execute(session, name="first")
        held_rows(session)["first"] = ("row",)
        on_commit(session, lambda: ran.append("first"))
    async with database.unit_of_work() as session:
        assert held_rows(session) == {}
        await ADD.execute(session, name="second")
    assert ran == ["first"]


async def test_a_read_unit_reads_what_is_committed_when_each_statement_runs(database: Database) -> None:
    """A read unit takes no snapshot at its start (on PostgreSQL: no transaction; on SQLite: autocommit)."""
    async with database.unit_of_work(read_only=True) as reading:
        assert await COUNT.scalar(reading) == 0
        await add(database, "committed meanwhile")
        assert await COUNT.scalar(reading) == 1


async def test_a_unit_that_runs_no_statement_waits_for_nothing(database: Database, lane_settings: Settings) -> None:
    """A request refused before its first statement never waits for a connection (PostgreSQL) or the
    write seat (SQLite): here another unit holds the only one."""
    narrow = Database(lane_settings.model_copy(update={"db_pool_size": 1}))
    try:
        async with holding_a_unit(narrow) as task:
            ran: list[str] = []
            async with narrow.unit_of_work() as session:
                on_commit(session, lambda: ran.append("done"))
            async with narrow.unit_of_work(read_only=True):
                pass
            assert ran == ["done"]
            assert not task.done()  # the holder still holds it: nothing above waited for it
    finally:
        await narrow.dispose()
    assert await names(database) == {"held"}


async def test_a_unit_that_is_not_atomic_is_a_write_unit_as_any_other_on_sqlite(
    database: Database, on_postgres: bool
) -> None:
    """`atomic=False` asks nothing of SQLite (its writes share a batch's COMMIT anyway): a failure
    leaves nothing. On PostgreSQL each statement commits by itself (tests/db/test_postgres.py)."""
    if on_postgres:
        pytest.skip("PostgreSQL commits each statement of such a unit: test_postgres.py")

    async def write_then_fail() -> None:
        async with database.unit_of_work(atomic=False) as session:
            await ADD.execute(session, name="undone")
            raise Refused

    with pytest.raises(Refused):
        await write_then_fail()
    assert await names(database) == set()

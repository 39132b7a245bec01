"""SQLite group commit: the writers of a process share one transaction, a SAVEPOINT each, made durable
by one COMMIT (one fsync) per batch; a unit answers only once its batch is on disk.

The COMMITs are counted on the write connections themselves (sqlite3's trace callback,
tests/db/sqlite_trace.py), and what is durable is read with a connection of the test's own.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from kasir.config import Settings
from kasir.db import Database, on_commit
from tests.conftest import WRITE_SEAT_WATCHDOG_SECONDS
from tests.db.probe import ADD, add, metadata, names_on_disk
from tests.db.sqlite_trace import HeldCommit, WriteStatements, traced_writes
from tests.support.probe_tables import database_with_tables


class Refused(Exception):
    pass


def grouped_settings(tmp_path: Path, max_batch: int) -> Settings:
    return Settings(
        data_dir=tmp_path,
        secret_key="k",
        sqlite_group_commit_max=max_batch,
        debug_write_seat_seconds=WRITE_SEAT_WATCHDOG_SECONDS,
    )


@pytest.fixture
async def grouped(tmp_path: Path) -> AsyncIterator[Database]:
    async with database_with_tables(grouped_settings(tmp_path, max_batch=8), metadata) as database:
        yield database


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "kasir.db"


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[WriteStatements]:
    with traced_writes(monkeypatch) as seen:
        yield seen


async def test_writers_ready_together_share_one_transaction_and_one_commit(
    tmp_path: Path, path: Path, statements: WriteStatements
) -> None:
    durable_at_return: list[bool] = []

    async def unit(n: int) -> None:
        async with database.unit_of_work() as session:
            await ADD.execute(session, name=f"n{n}")
        durable_at_return.append(f"n{n}" in names_on_disk(path))

    async with database_with_tables(grouped_settings(tmp_path, max_batch=64), metadata) as database:
        await asyncio.gather(*(unit(n) for n in range(20)))
        assert names_on_disk(path) == {f"n{n}" for n in range(20)}
    assert statements.commits() == 1
    assert statements.begins() == 1
    assert durable_at_return == [True] * 20  # not one answered before the COMMIT was done


async def test_a_batch_takes_at_most_its_limit_and_a_failing_unit_rolls_back_alone(
    grouped: Database, path: Path, statements: WriteStatements
) -> None:
    seen_after_commit: dict[str, set[str]] = {}

    async def unit(name: str, fail: bool) -> str:
        try:
            async with grouped.unit_of_work() as session:
                await ADD.execute(session, name=name)
                on_commit(session, lambda: seen_after_commit.__setitem__(name, names_on_disk(path)))
                if fail:
                    raise Refused
        except Refused:
            return "failed"
        return "ok"

    results = await asyncio.gather(*(unit(f"n{i}", fail=i % 5 == 0) for i in range(40)))
    expected = {f"n{i}" for i in range(40) if i % 5}
    assert results.count("ok") == len(expected)
    assert names_on_disk(path) == expected
    assert set(seen_after_commit) == expected  # the failed units' actions never ran
    assert all(name in seen_after_commit[name] for name in expected)  # each ran once its row was on disk
    assert statements.commits() == math.ceil(len(expected) / 8)  # 8 units a COMMIT (sqlite_group_commit_max)


async def test_a_constraint_violation_fails_only_its_unit(grouped: Database, path: Path) -> None:
    async def insert(name: str) -> str:
        try:
            await add(grouped, name)
        except sqlite3.IntegrityError:  # the driver's own: a bug of the caller, not an unavailable database
            return "duplicate"
        return "ok"

    results = await asyncio.gather(*(insert(f"dup{i % 3}") for i in range(12)))
    assert results.count("ok") == 3
    assert results.count("duplicate") == 9
    assert names_on_disk(path) == {"dup0", "dup1", "dup2"}


async def test_a_unit_returns_only_once_its_batch_s_commit_is_done(
    grouped: Database, path: Path, statements: WriteStatements
) -> None:
    held = HeldCommit(statements)
    ran: list[str] = []

    async def unit() -> None:
        async with grouped.unit_of_work() as session:
            await ADD.execute(session, name="waits for the disk")
            on_commit(session, lambda: ran.append("after commit"))

    task = asyncio.create_task(unit())
    try:
        await asyncio.wait_for(held.started.wait(), 10)
        assert not task.done()  # its statements ran; its COMMIT has not
        assert ran == []
        assert names_on_disk(path) == set()
    finally:
        held.let_go()
    await asyncio.wait_for(task, 10)
    assert ran == ["after commit"]
    assert names_on_disk(path) == {"waits for the disk"}


async def test_a_writer_cancelled_during_its_batch_s_commit_leaves_the_batch_committed(
    grouped: Database, path: Path, statements: WriteStatements
) -> None:
    """A COMMIT on its way to the disk is never abandoned: the units that joined the batch hear how it went."""
    held = HeldCommit(statements)
    tasks = [asyncio.create_task(add(grouped, name)) for name in ("joined", "committer")]
    try:
        await asyncio.wait_for(held.started.wait(), 10)
        for task in tasks:
            assert not task.done()
            task.cancel()  # whichever sent the COMMIT is cancelled with the other
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(outcome, asyncio.CancelledError) for outcome in outcomes)
        after = asyncio.create_task(add(grouped, "after"))  # the next writer, while the COMMIT is still held
    finally:
        held.let_go()
    await asyncio.wait_for(after, 10)
    assert names_on_disk(path) == {"joined", "committer", "after"}  # the COMMIT went through all the same
    assert statements.commits() == 2


async def test_a_batch_left_to_a_writer_cancelled_while_waiting_for_the_seat_is_committed(
    grouped: Database, path: Path
) -> None:
    """The first unit leaves the COMMIT to the writer waiting behind it; that writer gives up right
    after the seat was handed to it: the first unit's batch is committed all the same."""
    first_wrote, release_first, second_asked = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with grouped.unit_of_work() as session:
            await ADD.execute(session, name="first")
            first_wrote.set()
            await release_first.wait()

    async def second() -> None:
        async with grouped.unit_of_work() as session:
            second_asked.set()
            await ADD.execute(session, name="second")  # waits for the seat `first` holds

    first_task = asyncio.create_task(first())
    await asyncio.wait_for(first_wrote.wait(), 10)
    second_task = asyncio.create_task(second())
    await asyncio.wait_for(second_asked.wait(), 10)
    release_first.set()
    second_task.cancel()  # in the same step: `first` hands over the seat, then `second` gives up
    await asyncio.wait_for(first_task, 10)  # committed, not waiting forever for a COMMIT nobody sends
    with pytest.raises(asyncio.CancelledError):
        await second_task
    assert names_on_disk(path) == {"first"}
    await add(grouped, "after")
    assert names_on_disk(path) == {"first", "after"}


async def test_a_writer_cancelled_while_holding_the_seat_is_undone_and_its_batch_commits(
    grouped: Database, path: Path
) -> None:
    """A request whose client went away while its unit held the seat: its writes are undone, and the
    batch that waited on it (`first` left its COMMIT to it) is committed."""
    first_wrote, release_first, second_asked, second_wrote = (asyncio.Event() for _ in range(4))

    async def first() -> None:
        async with grouped.unit_of_work() as session:
            await ADD.execute(session, name="first")
            first_wrote.set()
            await release_first.wait()

    async def second() -> None:
        async with grouped.unit_of_work() as session:
            second_asked.set()
            await ADD.execute(session, name="cancelled")
            second_wrote.set()
            await asyncio.Event().wait()  # until cancelled

    first_task = asyncio.create_task(first())
    await asyncio.wait_for(first_wrote.wait(), 10)
    second_task = asyncio.create_task(second())
    await asyncio.wait_for(second_asked.wait(), 10)  # waiting for the seat `first` holds
    release_first.set()
    await asyncio.wait_for(second_wrote.wait(), 10)
    assert not first_task.done()  # joined, waiting for its batch's COMMIT
    assert names_on_disk(path) == set()
    second_task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second_task
    await asyncio.wait_for(first_task, 10)
    assert names_on_disk(path) == {"first"}
    await add(grouped, "after")
    assert names_on_disk(path) == {"first", "after"}

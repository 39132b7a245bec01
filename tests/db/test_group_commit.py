"""SQLite group commit: shared transaction, savepoint per unit, durable before done."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import event, text

from kasir.config import Settings
from kasir.db import Database, on_commit


@pytest.fixture
async def grouped(tmp_path: Path):
    settings = Settings(data_dir=tmp_path, secret_key="k", sqlite_group_commit_max=8)
    database = Database(settings)
    async with database.engine.begin() as connection:
        await connection.execute(text("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT UNIQUE)"))
    yield database, tmp_path / "kasir.db"
    await database.dispose()


def committed_names(path: Path) -> set[str]:
    """Read with a separate sqlite3 connection: only what was really committed is visible."""
    with sqlite3.connect(path) as connection:
        return {row[0] for row in connection.execute("SELECT name FROM item")}


async def test_concurrent_units_commit_together_and_a_failing_unit_rolls_back_alone(grouped):
    database, path = grouped
    assert database.strategy.group is not None
    seen_after_commit: dict[str, set[str]] = {}

    async def unit(name: str, fail: bool) -> str:
        try:
            async with database.unit_of_work() as session:
                await session.execute(text("INSERT INTO item (name) VALUES (:n)"), {"n": name})
                # The after-commit action sees the unit's row through another connection: it is durable.
                on_commit(session, lambda: seen_after_commit.__setitem__(name, committed_names(path)))
                if fail:
                    raise RuntimeError("unit failed after writing")
        except RuntimeError:
            return "failed"
        return "ok"

    commits: list[int] = []
    event.listen(database.engine.sync_engine, "commit", lambda _connection: commits.append(1))
    results = await asyncio.gather(*(unit(f"n{i}", fail=i % 5 == 0) for i in range(40)))
    expected = {f"n{i}" for i in range(40) if i % 5}
    assert results.count("ok") == len(expected)
    assert committed_names(path) == expected
    assert set(seen_after_commit) == expected
    assert all(name in seen_after_commit[name] for name in expected)
    assert len(expected) / 8 <= len(commits) < len(expected)  # batched, at most 8 joined units per COMMIT


async def test_constraint_violation_fails_only_its_unit(grouped):
    database, path = grouped

    async def insert(name: str) -> str:
        try:
            async with database.unit_of_work() as session:
                await session.execute(text("INSERT INTO item (name) VALUES (:n)"), {"n": name})
        except Exception as error:  # IntegrityError of the duplicate
            return type(error).__name__
        return "ok"

    results = await asyncio.gather(*(insert(f"dup{i % 3}") for i in range(12)))
    assert results.count("ok") == 3
    assert set(results) == {"ok", "IntegrityError"}
    assert committed_names(path) == {"dup0", "dup1", "dup2"}


async def test_a_unit_that_never_writes_takes_no_seat(grouped):
    database, path = grouped
    async with database.unit_of_work() as session:
        assert session is not None
    async with database.unit_of_work() as session:
        await session.execute(text("INSERT INTO item (name) VALUES ('solo')"))
    assert committed_names(path) == {"solo"}


async def test_a_batch_is_committed_even_when_the_writer_expected_to_commit_it_is_cancelled(grouped, monkeypatch):
    database, path = grouped
    group = database.strategy.group
    assert group is not None
    first_wrote, release_first = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with database.unit_of_work() as session:
            await session.execute(text("INSERT INTO item (name) VALUES ('first')"))
            first_wrote.set()
            await release_first.wait()

    async def second() -> None:
        async with database.unit_of_work() as session:
            await session.execute(text("INSERT INTO item (name) VALUES ('second')"))

    first_task = asyncio.create_task(first())
    await asyncio.wait_for(first_wrote.wait(), 5)
    second_task = asyncio.create_task(second())  # waits for the seat, so `first` leaves the COMMIT to it
    while group._waiting == 0:
        await asyncio.sleep(0.001)

    release = group._lock.release

    def release_then_cancel_the_waiter() -> None:
        release()
        second_task.cancel()  # the waiter gives up right after `first` handed it the seat

    monkeypatch.setattr(group._lock, "release", release_then_cancel_the_waiter)
    release_first.set()
    await asyncio.wait_for(first_task, 5)  # committed by the fallback instead of waiting forever
    monkeypatch.undo()
    assert committed_names(path) == {"first"}
    with contextlib.suppress(asyncio.CancelledError):
        await second_task


async def test_the_seat_wakes_every_waiter_at_once_and_each_takes_it_in_turn():
    from kasir.db.sqlite import _Gate

    gate = _Gate()
    await gate.acquire()
    order: list[int] = []
    iterations: list[int] = []
    loop_turns = 0

    async def count_turns() -> None:
        nonlocal loop_turns
        while True:
            loop_turns += 1
            await asyncio.sleep(0)

    async def unit(number: int) -> None:
        await gate.acquire()
        order.append(number)
        iterations.append(loop_turns)
        gate.release()  # held without yielding, as a unit holds the seat

    counter = asyncio.create_task(count_turns())
    units = [asyncio.create_task(unit(n)) for n in range(5)]
    await asyncio.sleep(0)  # all five are waiting
    assert gate.locked()
    gate.release()
    await asyncio.gather(*units)
    counter.cancel()
    assert order == [0, 1, 2, 3, 4]  # in the order they came
    # asyncio.Lock would give the seat to one waiter per loop iteration; here all in one.
    assert len(set(iterations)) == 1


async def test_a_woken_unit_that_finds_the_seat_taken_waits_again_and_a_cancelled_one_leaves_no_trace():
    from kasir.db.sqlite import _Gate

    gate = _Gate()
    await gate.acquire()
    got: list[str] = []

    async def holder_that_yields() -> None:
        await gate.acquire()
        got.append("holder")
        await asyncio.sleep(0.01)  # a busy retry while holding the seat
        got.append("holder done")
        gate.release()

    async def unit(name: str) -> None:
        await gate.acquire()
        got.append(name)
        gate.release()

    holder = asyncio.create_task(holder_that_yields())
    late = asyncio.create_task(unit("late"))
    cancelled = asyncio.create_task(unit("cancelled"))
    await asyncio.sleep(0)
    cancelled.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await cancelled
    gate.release()
    await asyncio.gather(holder, late)
    assert got == ["holder", "holder done", "late"]  # "late", woken with the holder, found it taken and waited
    assert not gate.locked()
    await asyncio.wait_for(gate.acquire(), 1)  # nothing left waiting or holding

"""SQLite group commit (KASIR_SQLITE_GROUP_COMMIT): shared transaction, savepoint per unit, durable before done."""

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
    settings = Settings(data_dir=tmp_path, secret_key="k", sqlite_group_commit=True, sqlite_group_commit_max=8)
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
    assert database.group is not None
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
    group = database.group
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

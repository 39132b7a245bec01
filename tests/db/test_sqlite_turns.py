"""Processes sharing one SQLite file all write, each in its turn (kasir.db.sqlite_turns): a writer
waits for another process's turn or lock with the event loop free, gives up after the busy limit
as an unavailable database (503), and never keeps a turn it no longer needs."""

from __future__ import annotations

import asyncio
import fcntl
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

import kasir.db.sqlite
from kasir.config import Settings
from kasir.db import Database, DatabaseUnavailable
from tests.db.probe import COUNT, add, metadata, names, names_on_disk, python, read_line
from tests.support.loop import LoopTicks
from tests.support.probe_tables import database_with_tables

HOLD_THE_TURN = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.readline()  # until the test says so
"""


def file_settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path, secret_key="k")


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    async with database_with_tables(file_settings(tmp_path), metadata) as made:
        yield made


@pytest.fixture
def lock_path(tmp_path: Path) -> Path:
    return Path(f"{tmp_path / 'kasir.db'}-writer.lock")


@pytest.fixture
def other_process_holding() -> Iterator[Callable[[Path], subprocess.Popen[str]]]:
    """Starts another process that has the turn (as a kasir process in the middle of a write would)."""
    started: list[subprocess.Popen[str]] = []

    def start(lock_path: Path) -> subprocess.Popen[str]:
        other = subprocess.Popen(
            [sys.executable, "-c", HOLD_THE_TURN, str(lock_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(other)
        assert other.stdout is not None
        assert other.stdout.readline() == "held\n"
        return other

    yield start
    for other in started:  # a failed test leaves none behind
        if other.poll() is None:
            other.kill()
            other.wait()
        for stream in (other.stdin, other.stdout):
            if stream is not None and not stream.closed:
                stream.close()


def give_back(other: subprocess.Popen[str]) -> None:
    assert other.stdin is not None
    other.stdin.write("go\n")
    other.stdin.close()
    other.wait(5)


def turn_is_free(lock_path: Path) -> bool:
    """Whether a third party could take the turn now (a separate open file: flock is per open file)."""
    fd = os.open(lock_path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing gives back what it took
    return True


async def count(database: Database) -> int:
    async with database.unit_of_work(read_only=True) as session:
        return int(await COUNT.scalar(session))


async def loop_ran(ticks: LoopTicks, at_least: int) -> None:
    """Wait until the loop has run `at_least` more ticks: it was free meanwhile."""
    start = ticks.count
    async with asyncio.timeout(30):
        while ticks.count < start + at_least:
            await asyncio.sleep(0.01)


@pytest.mark.slow  # starts a process
async def test_a_write_waits_for_the_other_process_s_turn_with_the_loop_free_and_gives_it_back(
    database: Database, lock_path: Path, other_process_holding: Callable[[Path], subprocess.Popen[str]]
) -> None:
    await add(database, "first")  # the turn's file exists
    other = other_process_holding(lock_path)
    ticks = LoopTicks()
    writing = asyncio.create_task(add(database, "waited"))
    try:
        await loop_ran(ticks, 20)
        assert not writing.done()  # waiting for its turn: not failed, not written past the other process
        assert await count(database) == 1  # reads do not take turns
        give_back(other)
        await asyncio.wait_for(writing, 10)
    finally:
        ticks.stop()
    assert await names(database) == {"first", "waited"}
    assert turn_is_free(lock_path)  # given back with the COMMIT


async def test_a_write_waits_for_another_program_s_write_lock_with_the_loop_free(
    database: Database, tmp_path: Path
) -> None:
    """A writer that takes no turns (another program, the sqlite3 shell) holds SQLite's own lock:
    the BEGIN is retried without blocking the loop, and goes through once the lock is let go."""
    other_program = sqlite3.connect(tmp_path / "kasir.db", isolation_level=None)
    other_program.execute("BEGIN IMMEDIATE")
    ticks = LoopTicks()
    writing = asyncio.create_task(add(database, "waited"))
    try:
        await loop_ran(ticks, 20)
        assert not writing.done()
        other_program.rollback()
        await asyncio.wait_for(writing, 10)
    finally:
        ticks.stop()
        other_program.close()
    assert names_on_disk(tmp_path / "kasir.db") == {"waited"}


async def test_another_program_holding_the_lock_past_the_busy_limit_is_an_unavailable_database(
    database: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kasir.db.sqlite, "SQLITE_BUSY_SECONDS", 0.2)
    other_program = sqlite3.connect(tmp_path / "kasir.db", isolation_level=None)
    other_program.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(DatabaseUnavailable, match="locked"):
            await add(database, "refused")
    finally:
        other_program.rollback()
        other_program.close()
    await asyncio.wait_for(add(database, "after"), 10)
    assert await names(database) == {"after"}


@pytest.mark.slow  # starts a process
async def test_a_writer_cancelled_while_waiting_does_not_keep_the_turn(
    database: Database, lock_path: Path, other_process_holding: Callable[[Path], subprocess.Popen[str]]
) -> None:
    await add(database, "first")
    other = other_process_holding(lock_path)
    ticks = LoopTicks()
    writing = asyncio.create_task(add(database, "cancelled"))
    await loop_ran(ticks, 5)
    ticks.stop()
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    give_back(other)

    async def free() -> None:  # the wait on the worker thread gets the lock after the cancellation: it gives it back
        while not turn_is_free(lock_path):
            await asyncio.sleep(0.01)

    await asyncio.wait_for(free(), 10)
    await asyncio.wait_for(add(database, "after"), 10)  # and the next write of this process gets its turn
    assert await names(database) == {"first", "after"}


@pytest.mark.slow  # starts a process
async def test_no_turn_within_the_busy_limit_is_an_unavailable_database(
    database: Database,
    lock_path: Path,
    other_process_holding: Callable[[Path], subprocess.Popen[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await add(database, "first")
    monkeypatch.setattr(kasir.db.sqlite, "SQLITE_BUSY_SECONDS", 0.3)
    other = other_process_holding(lock_path)
    try:
        with pytest.raises(DatabaseUnavailable, match="locked"):
            await add(database, "refused")
    finally:
        give_back(other)
    await asyncio.wait_for(add(database, "after"), 10)
    assert await names(database) == {"first", "after"}


GIVE_UP_AND_EXIT = """
import asyncio, sys
import kasir.db.sqlite
from kasir.config import Settings
from kasir.db import Database
from tests.db.probe import ADD

kasir.db.sqlite.SQLITE_BUSY_SECONDS = 0.3

async def main():
    db = Database(Settings(data_dir=sys.argv[1], secret_key="k"))
    try:
        async with db.unit_of_work() as session:
            await ADD.execute(session, name="gave up")
    except Exception as exc:
        print(type(exc).__name__, flush=True)
    finally:
        await db.dispose()

asyncio.run(main())
"""


@pytest.mark.slow
async def test_a_process_that_gave_up_waiting_exits_while_the_other_still_holds_the_turn(
    database: Database,
    lock_path: Path,
    tmp_path: Path,
    other_process_holding: Callable[[Path], subprocess.Popen[str]],
) -> None:
    # Its wait in flock is abandoned, not finished: it must not hold up the interpreter's exit
    # (the loop's default executor joins its threads when asyncio.run ends; this wait is on a daemon thread).
    await add(database, "first")
    other = other_process_holding(lock_path)
    try:
        gave_up = await python(GIVE_UP_AND_EXIT, str(tmp_path))
        out, err = await asyncio.wait_for(gave_up.communicate(), 30)
        assert gave_up.returncode == 0, err.decode()
        assert out.decode().strip() == "DatabaseUnavailable"
        assert not turn_is_free(lock_path)  # the other process has it all along
    finally:
        give_back(other)


async def test_two_databases_on_one_file_in_one_process_both_write(database: Database, tmp_path: Path) -> None:
    """The CLI beside a server's Database, in tests: each takes turns with the other."""
    second = Database(file_settings(tmp_path))
    try:
        await asyncio.gather(
            *(add(database, f"first {n}") for n in range(30)), *(add(second, f"second {n}") for n in range(30))
        )
    finally:
        await second.dispose()
    assert await count(database) == 60


WRITE_MANY = """
import asyncio, sys
from kasir.config import Settings
from kasir.db import Database
from tests.db.probe import ADD

async def main():
    data_dir, label, units = sys.argv[1], sys.argv[2], int(sys.argv[3])
    db = Database(Settings(data_dir=data_dir, secret_key="k"))
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)

    async def unit(n):
        async with db.unit_of_work() as session:
            await ADD.execute(session, name=f"{label} {n}")

    await asyncio.gather(*(unit(n) for n in range(units)))
    await db.dispose()
    print("done", flush=True)

asyncio.run(main())
"""


@pytest.mark.slow
async def test_processes_sharing_the_file_all_write_without_errors(database: Database, tmp_path: Path) -> None:
    """`kasir serve --workers 2` beside a `kasir worker`: three processes writing at once."""
    others = [await python(WRITE_MANY, str(tmp_path), label, "100", stdin=True) for label in ("a", "b")]
    try:
        for other in others:
            assert await read_line(other) == "ready"
        for other in others:
            assert other.stdin is not None
            other.stdin.write(b"go\n")
        await asyncio.gather(*(add(database, f"here {n}") for n in range(100)))
        for other in others:
            assert await read_line(other) == "done"
            assert await asyncio.wait_for(other.wait(), 30) == 0
    finally:
        for other in others:
            if other.returncode is None:
                other.kill()
                await other.wait()
    assert names_on_disk(tmp_path / "kasir.db") == {f"{label} {n}" for label in ("a", "b", "here") for n in range(100)}

"""Processes sharing one SQLite file take turns at its write lock (kasir.db.sqlite_turns)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

import kasir.db.sqlite
from kasir.config import Settings
from kasir.db import Database
from tests.support.loop import LoopTicks

HOLD_THE_TURN = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.readline()  # until the test says so
"""


@pytest.fixture
async def database(tmp_path: Path):
    db = Database(Settings(data_dir=tmp_path, secret_key="k"))
    async with db.unit_of_work() as session:
        await session.execute(text("CREATE TABLE probe (x INTEGER)"))
    yield db, Path(f"{tmp_path / 'kasir.db'}-writer.lock")
    await db.dispose()


@pytest.fixture
def other_process_holding():
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


async def write(db: Database, x: int) -> None:
    async with db.unit_of_work() as session:
        await session.execute(text("INSERT INTO probe (x) VALUES (:x)"), {"x": x})


async def count(db: Database) -> int:
    async with db.unit_of_work(read_only=True) as session:
        return int((await session.execute(text("SELECT count(*) FROM probe"))).scalar_one())


async def test_a_write_waits_for_the_other_process_s_turn_with_the_loop_free_and_gives_it_back(
    database, other_process_holding
):
    db, lock_path = database
    other = other_process_holding(lock_path)
    ticks = LoopTicks()
    writing = asyncio.create_task(write(db, 1))
    await asyncio.sleep(0.5)
    assert not writing.done()  # waiting for its turn, not failed, not written past the other process
    assert ticks.count >= 20  # the loop was free meanwhile
    assert await count(db) == 0  # reads do not take turns
    give_back(other)
    await asyncio.wait_for(writing, 5)
    ticks.stop()
    assert await count(db) == 1
    assert turn_is_free(lock_path)  # given back with the COMMIT


async def test_a_writer_cancelled_while_waiting_does_not_keep_the_turn(database, other_process_holding):
    db, lock_path = database
    other = other_process_holding(lock_path)
    writing = asyncio.create_task(write(db, 1))
    await asyncio.sleep(0.2)
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing
    give_back(other)
    # The wait on the worker thread gets the lock after the cancellation: it gives it back.
    for _ in range(100):
        if turn_is_free(lock_path):
            break
        await asyncio.sleep(0.02)
    assert turn_is_free(lock_path)
    await asyncio.wait_for(write(db, 2), 5)  # and the next write of this process gets its turn
    assert await count(db) == 1


async def test_no_turn_within_the_busy_limit_fails_as_a_locked_database(database, other_process_holding, monkeypatch):
    db, lock_path = database
    monkeypatch.setattr(kasir.db.sqlite, "SQLITE_BUSY_SECONDS", 0.3)
    other = other_process_holding(lock_path)
    try:
        with pytest.raises(OperationalError, match="locked"):
            await write(db, 1)
    finally:
        give_back(other)
    await asyncio.wait_for(write(db, 2), 5)
    assert await count(db) == 1


GIVE_UP_AND_EXIT = """
import asyncio, sys
from sqlalchemy import text
import kasir.db.sqlite
from kasir.config import Settings
from kasir.db import Database

kasir.db.sqlite.SQLITE_BUSY_SECONDS = 0.3

async def main():
    db = Database(Settings(data_dir=sys.argv[1], secret_key="k"))
    try:
        async with db.unit_of_work() as session:
            await session.execute(text("INSERT INTO probe (x) VALUES (1)"))
    except Exception as exc:
        print(type(exc).__name__, flush=True)
    finally:
        await db.dispose()

asyncio.run(main())
"""


async def test_a_process_that_gave_up_waiting_exits_while_the_other_still_holds_the_turn(
    database, other_process_holding, tmp_path: Path
):
    # Its wait in flock is abandoned, not finished: it must not hold up the interpreter's exit
    # (the loop's default executor joins its threads when asyncio.run ends; this wait is on a daemon thread).
    _db, lock_path = database
    other = other_process_holding(lock_path)
    try:
        gave_up = await asyncio.create_subprocess_exec(
            sys.executable, "-c", GIVE_UP_AND_EXIT, str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        out, err = await asyncio.wait_for(gave_up.communicate(), 20)
        assert gave_up.returncode == 0, err.decode()
        assert out.decode().strip() == "OperationalError"
        assert not turn_is_free(lock_path)  # the other process has it all along
    finally:
        give_back(other)

"""Committed means kept: what a unit of work committed is there for a Database opened afterwards,
after the first one was disposed of, and after a process that wrote it was killed (SIGKILL) right
after its unit returned. On this run's database (KASIR_TEST_DB)."""

from __future__ import annotations

import asyncio
import signal

import pytest

from kasir.config import Settings
from kasir.db import Database
from tests.db.probe import ADD, add, names, python, read_line


async def test_what_was_committed_is_there_for_the_next_database_opened(
    database: Database, lane_settings: Settings
) -> None:
    first = Database(lane_settings)
    await add(first, "kept")

    async def rolled_back() -> None:
        async with first.unit_of_work() as session:
            await ADD.execute(session, name="rolled back")
            raise RuntimeError

    with pytest.raises(RuntimeError):
        await rolled_back()
    await first.dispose()
    reopened = Database(lane_settings)
    try:
        assert await names(reopened) == {"kept"}
        await add(reopened, "after")  # and it writes
    finally:
        await reopened.dispose()
    assert await names(database) == {"kept", "after"}


WRITE_THEN_WAIT_TO_BE_KILLED = """
import asyncio, sys
from kasir.config import Settings
from kasir.db import Database
from tests.db.probe import ADD

async def main():
    url, data_dir = sys.argv[1:3]
    database = Database(Settings(database_url=url, data_dir=data_dir, secret_key="k"))
    async with database.unit_of_work() as session:
        await ADD.execute(session, name="answered")
    print("returned", flush=True)  # what a request would answer now
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # killed while waiting here

asyncio.run(main())
"""


@pytest.mark.slow
async def test_a_unit_that_returned_is_kept_when_its_process_is_killed_at_once(
    database: Database, lane_settings: Settings
) -> None:
    process = await python(
        WRITE_THEN_WAIT_TO_BE_KILLED, lane_settings.resolved_database_url, str(lane_settings.data_dir), stdin=True
    )
    try:
        assert await read_line(process) == "returned"
        process.send_signal(signal.SIGKILL)  # no cleanup, no close, nothing flushed after this
        assert await asyncio.wait_for(process.wait(), 30) == -signal.SIGKILL
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    reopened = Database(lane_settings)
    try:
        assert await names(reopened) == {"answered"}
        await add(reopened, "after")  # the killed process's locks (and SQLite write turn) went with it
    finally:
        await reopened.dispose()
    assert await names(database) == {"answered", "after"}

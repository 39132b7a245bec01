"""Wake-ups after commit: `notify_after_commit` wakes the listeners of a channel (`Database.listen`)
once the unit has committed, in this process and in the others sharing the database; never when
the unit rolls back.

Two paths carry a wake-up: in this process, a call at the unit's end; to other processes, PostgreSQL's
NOTIFY (delivered at COMMIT) or, on a SQLite file, a datagram to each listening process's socket
(kasir.db.wakeup). Each is checked here on the database of this run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from kasir.config import Settings
from kasir.db import Database, notify_after_commit
from kasir.db.wakeup import wake_directory
from tests.db.probe import ADD, add, names, names_on_disk, python, read_line


class Refused(Exception):
    pass


class Listener:
    """What `Database.listen` calls, counted; `woken` is set at each call."""

    def __init__(self) -> None:
        self.calls = 0
        self.woken = asyncio.Event()
        self.seen_on_disk: list[set[str]] = []
        self.sqlite_file: Path | None = None

    def __call__(self) -> None:
        self.calls += 1
        if self.sqlite_file is not None:  # what another connection sees at the moment of the wake-up
            self.seen_on_disk.append(names_on_disk(self.sqlite_file))
        self.woken.set()

    async def next_wake(self, timeout: float = 30) -> None:
        await asyncio.wait_for(self.woken.wait(), timeout)
        self.woken.clear()


Listen = Callable[[str], Awaitable[Listener]]


def channel_name() -> str:
    return f"probe_{uuid.uuid4().hex[:8]}"


class NotificationsUpTo:
    """`async with NotificationsUpTo(settings, fence, also=channel) as received:` the PostgreSQL
    notifications of both channels, in the order they arrive, until the fence's has arrived.

    One connection listens to both, as Database.listen listens (asyncpg's add_listener): PostgreSQL
    delivers a session's notifications in commit order, so once the fence's has arrived, any sent
    before it has too.
    """

    def __init__(self, settings: Settings, fence: str, *, also: str) -> None:
        self.dsn = make_url(settings.resolved_database_url).set(drivername="postgresql")
        self.fence, self.also = fence, also
        self.received: list[str] = []
        self.fenced = asyncio.Event()

    def _arrived(self, _connection: object, _pid: int, channel: str, _payload: object) -> None:
        self.received.append(channel)
        if channel == self.fence:
            self.fenced.set()

    async def __aenter__(self) -> list[str]:
        self.connection = await asyncpg.connect(self.dsn.render_as_string(hide_password=False))
        await self.connection.add_listener(self.also, self._arrived)
        await self.connection.add_listener(self.fence, self._arrived)
        return self.received

    async def __aexit__(self, exc_type: object, *_exc: object) -> None:
        try:
            if exc_type is None:
                await asyncio.wait_for(self.fenced.wait(), 30)
        finally:
            await self.connection.close()


@pytest.fixture
async def listening(database: Database, on_postgres: bool) -> AsyncIterator[Listen]:
    """`await listening(channel)`: a Listener of `channel` on the test's database, listening from now on."""
    stops: list[Callable[[], None]] = []

    async def listen(channel: str) -> Listener:
        listener = Listener()
        if not on_postgres:
            listener.sqlite_file = Path(database.strategy.path)  # type: ignore[union-attr]
        stops.append(await database.listen(channel, listener))
        if on_postgres:
            # A listener looks once as its LISTEN begins (a commit just before it notified no one):
            # once it has, every later commit's NOTIFY reaches it.
            await listener.next_wake()
            listener.calls = 0
        return listener

    yield listen
    for stop in stops:
        stop()


async def test_a_commit_that_notifies_wakes_the_channels_listeners_after_it_commits(
    database: Database, listening: Listen, on_postgres: bool
) -> None:
    channel = channel_name()
    listener = await listening(channel)
    other = await listening(channel_name())
    async with database.unit_of_work() as session:
        await ADD.execute(session, name="notified")
        await notify_after_commit(session, channel)
        await notify_after_commit(session, channel)
        assert listener.calls == 0  # not before the commit
    assert listener.calls >= 1  # this process's listeners: as the unit ends
    if not on_postgres:
        assert listener.seen_on_disk[0] == {"notified"}  # the commit was on disk when the listener woke
    await listener.next_wake()
    assert other.calls == 0  # only the channel notified
    assert await names(database) == {"notified"}


async def test_a_unit_that_only_notifies_wakes_the_listeners_too(database: Database, listening: Listen) -> None:
    channel = channel_name()
    listener = await listening(channel)
    async with database.unit_of_work() as session:
        await notify_after_commit(session, channel)
    await listener.next_wake()


async def test_a_unit_that_rolls_back_wakes_no_listener_of_this_process(database: Database, listening: Listen) -> None:
    channel = channel_name()
    listener = await listening(channel)

    async def rolled_back() -> None:
        async with database.unit_of_work() as session:
            await ADD.execute(session, name="rolled back")
            await notify_after_commit(session, channel)
            raise Refused

    with pytest.raises(Refused):
        await rolled_back()
    assert listener.calls == 0  # this process's path runs as the unit ends: it has, and woke no one


async def test_a_unit_that_rolls_back_sends_no_wake_up_to_other_processes(
    database: Database, lane_settings: Settings, on_postgres: bool
) -> None:
    """What another process would receive, read where it arrives, in the order it arrives: a unit
    that rolled back, then one that committed; only the second one's wake-up may be there."""
    rolled_back, fence = channel_name(), channel_name()

    async def rolls_back() -> None:
        async with database.unit_of_work() as session:
            await ADD.execute(session, name="rolled back")
            await notify_after_commit(session, rolled_back)
            raise Refused

    async def rolls_back_then_commits(second_channel: str) -> None:
        with pytest.raises(Refused):
            await rolls_back()
        async with database.unit_of_work() as session:
            await ADD.execute(session, name="committed")
            await notify_after_commit(session, second_channel)

    if on_postgres:
        # One connection listening to both channels, as Database.listen listens (asyncpg's add_listener):
        # PostgreSQL delivers a session's notifications in commit order, so once the fence's has
        # arrived, one sent before it would have too.
        async with NotificationsUpTo(lane_settings, fence, also=rolled_back) as received:
            await rolls_back_then_commits(fence)
        assert received == [fence]
    else:
        # A listening process's socket in the channel's directory: a commit sends its datagram before
        # the unit returns, and datagrams queue in the order sent.
        directory = wake_directory(database.strategy.path, rolled_back)  # type: ignore[union-attr]
        assert directory is not None
        directory.mkdir(mode=0o700, exist_ok=True)
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        receiver.setblocking(False)
        receiver.bind(str(directory / f"{os.getpid()}-test"))
        try:
            await rolls_back_then_commits(rolled_back)
            assert receiver.recv(64) == b"\0"  # the commit's
            with pytest.raises(BlockingIOError):
                receiver.recv(64)  # and nothing before it
        finally:
            receiver.close()
            with contextlib.suppress(OSError):
                (directory / f"{os.getpid()}-test").unlink()
                directory.rmdir()
    assert await names(database) == {"committed"}


NOTIFY_FROM_ANOTHER_PROCESS = """
import asyncio, sys
from kasir.config import Settings
from kasir.db import Database, notify_after_commit
from tests.db.probe import ADD

async def main():
    url, data_dir, channel = sys.argv[1:4]
    database = Database(Settings(database_url=url, data_dir=data_dir, secret_key="k"))
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    async with database.unit_of_work() as session:
        await ADD.execute(session, name="from another process")
        await notify_after_commit(session, channel)
    print("committed", flush=True)
    await database.dispose()

asyncio.run(main())
"""


@pytest.mark.slow
async def test_a_commit_in_another_process_wakes_this_process_s_listener(
    database: Database, lane_settings: Settings, listening: Listen
) -> None:
    """Only the other process's path can wake this listener: the commit is not this process's."""
    channel = channel_name()
    listener = await listening(channel)
    other = await python(
        NOTIFY_FROM_ANOTHER_PROCESS,
        lane_settings.resolved_database_url,
        str(lane_settings.data_dir),
        channel,
        stdin=True,
    )
    try:
        assert await read_line(other) == "ready"
        assert listener.calls == 0
        assert other.stdin is not None
        other.stdin.write(b"go\n")
        await listener.next_wake()
        assert await read_line(other) == "committed"
        assert await asyncio.wait_for(other.wait(), 30) == 0
    finally:
        if other.returncode is None:
            other.kill()
            await other.wait()
    assert await names(database) == {"from another process"}


async def test_a_channel_named_in_capitals_reaches_other_processes_too(
    database: Database, lane_settings: Settings, on_postgres: bool
) -> None:
    """`notify_after_commit` takes any identifier; another process listening to the same name
    (Database.listen: asyncpg's add_listener, which quotes it) must hear it."""
    if not on_postgres:
        pytest.skip("the name is a directory's on SQLite: its case is kept")
    channel, fence = f"Probe_{uuid.uuid4().hex[:8]}", channel_name()
    async with NotificationsUpTo(lane_settings, fence, also=channel) as received:
        async with database.unit_of_work() as session:
            await notify_after_commit(session, channel)
        async with database.unit_of_work() as session:
            await notify_after_commit(session, fence)
    assert received == [channel, fence]


async def test_listeners_hear_commits_of_a_database_opened_after_them(
    database: Database, lane_settings: Settings, listening: Listen
) -> None:
    """Two Database objects on the same database (the CLI beside a server, in one process)."""
    channel = channel_name()
    listener = await listening(channel)
    second = Database(lane_settings)
    try:
        async with second.unit_of_work() as session:
            await ADD.execute(session, name="second")
            await notify_after_commit(session, channel)
        await listener.next_wake()
    finally:
        await second.dispose()
    await add(database, "first")
    assert await names(database) == {"first", "second"}

"""The SQLite strategy, the embedded default: Python's sqlite3 on the event loop's thread.

- Statements run inline: a statement on a local WAL file costs less than a hop to a worker
  thread and back. `busy_timeout` is 0, so nothing blocks the loop waiting for a lock: a BEGIN
  that finds the file busy is retried after an `asyncio.sleep`.
- WAL mode, `synchronous=FULL`: a COMMIT waits for the disk.
- Group commit (`GroupCommit`): the write units of one process share one write transaction on one
  connection; each unit is a SAVEPOINT inside it, and the transaction is committed (one fsync, on
  a worker thread) per batch of units. A unit answers only after its batch is durable; a unit that
  fails rolls back to its own savepoint only.
- Read units run on query-only connections of their own, in autocommit: each statement reads what
  is committed when it runs, and never waits for the write lock.
- Several processes may share the file (`kasir serve --workers N`, a `kasir worker`, the CLI
  beside a running server): they take turns at its write lock (kasir.db.sqlite_turns), and wake
  each other's listeners through Unix datagram sockets (kasir.db.wakeup).

The rule this strategy lives by: a write unit holds the process's write seat from its first
statement to its end, so it must never wait on anything slow (DNS, a network call) in between.
`KASIR_DEBUG_WRITE_SEAT_SECONDS` (set in the tests) fails a unit that does.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.dialects.sqlite.pysqlite import dialect as sqlite_dialect

from kasir.config import Settings
from kasir.db.session import DatabaseUnavailable, Session, run_after_commit
from kasir.db.sqlite_turns import WriterTurns
from kasir.db.wakeup import WakeSocket, subscribe, wake, wake_directory

log = logging.getLogger("kasir.db")

# How long a write may wait for another process's write lock before it fails (503).
SQLITE_BUSY_SECONDS = 30.0
_IDLE_READERS_MAX = 64
_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA busy_timeout=0",  # a busy file fails at once; BEGIN and COMMIT are retried without blocking the loop
    "PRAGMA foreign_keys=ON",
    # The savepoints' sub-journal (one savepoint per unit under group commit) and the temporary tables
    # of sorts no index serves live in memory: on files the sub-journal spills past 64 KiB, which a
    # batch of card charges passes. What it holds is bounded by the batch (GroupCommit.max_batch).
    "PRAGMA temp_store=MEMORY",
)
_READER_PRAGMAS = ("PRAGMA query_only=ON",)  # the read path cannot write, so it never takes the write lock
# Primary result codes that say the file cannot take the work now, not that the statement is wrong.
_UNAVAILABLE = {
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_PROTOCOL,
    sqlite3.SQLITE_NOMEM,
}
DIALECT = sqlite_dialect()


def translated(error: sqlite3.Error, *, reader: bool = False) -> Exception:
    """DatabaseUnavailable for a file that cannot take the work now; the error itself (a bug) otherwise.

    On a reader's connection (query-only) a refused write is the unit's mistake, not the file's state.
    """
    code = getattr(error, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    if reader and primary == sqlite3.SQLITE_READONLY:
        return error
    if isinstance(error, sqlite3.OperationalError) and (primary is None or primary in _UNAVAILABLE):
        return DatabaseUnavailable(f"SQLite: {error}")
    return error


def connect(path: str, *, reader: bool = False) -> sqlite3.Connection:
    """A sqlite3 connection as every unit uses it: transactions under Kasir's control (autocommit)."""
    try:
        # check_same_thread=False: a batch's COMMIT runs on a worker thread.
        # A file not yet in WAL mode is switched by its first opener; others opening it meanwhile wait
        # (a moment, at start-up) rather than fail: only here does a connection wait for a lock.
        connection = sqlite3.connect(path, timeout=SQLITE_BUSY_SECONDS, check_same_thread=False, isolation_level=None)
        for pragma in _PRAGMAS + (_READER_PRAGMAS if reader else ()):
            connection.execute(pragma)
    except sqlite3.Error as error:
        raise translated(error) from error
    return connection


class WriteSeatHeldTooLong(RuntimeError):
    """The watchdog's verdict: a unit of work held the SQLite write seat across a slow wait."""

    def __init__(self, held: float, limit: float) -> None:
        super().__init__(
            f"a unit of work held the SQLite write seat {held:.3f} s (KASIR_DEBUG_WRITE_SEAT_SECONDS={limit:g}): "
            "nothing slow (DNS, network) may run inside a write unit of work"
        )


class SqliteStrategy:
    """One SQLite file: its write group (per event loop) and its query-only readers."""

    dialect = DIALECT

    def __init__(self, settings: Settings, url: str) -> None:
        self.path = _ensure_sqlite_dir(url)
        if self.path == ":memory:":
            raise ValueError("KASIR_DATABASE_URL: an in-memory SQLite database is not supported; name a file")
        self.max_batch = settings.sqlite_group_commit_max
        self.watchdog_seconds = settings.debug_write_seat_seconds
        self.turns = WriterTurns(self.path)  # processes sharing the file take turns at its write lock
        self._groups: dict[asyncio.AbstractEventLoop, GroupCommit] = {}
        self._readers: list[sqlite3.Connection] = []
        # What the group commit has made durable: COMMITs (one fsync each) and the units they carried.
        self.batches_committed = 0
        self.units_committed = 0

    def unit_of_work(self, *, read_only: bool, atomic: bool) -> AbstractAsyncContextManager[Session]:
        # Not atomic asks nothing of SQLite: a write unit's transaction costs no round trip here, and
        # the group commit already shares its COMMIT with the writers beside it.
        return _Unit(self, read_only=read_only)

    def group(self) -> GroupCommit:
        """This event loop's write group (tests and the CLI run several loops in one process)."""
        loop = asyncio.get_running_loop()
        group = self._groups.get(loop)
        if group is None:
            group = self._groups[loop] = GroupCommit(self)
        return group

    def reader(self) -> sqlite3.Connection:
        return self._readers.pop() if self._readers else connect(self.path, reader=True)

    def give_back_reader(self, connection: sqlite3.Connection) -> None:
        if connection.in_transaction or len(self._readers) >= _IDLE_READERS_MAX:
            connection.close()  # a statement interrupted half-way: do not hand on its state
        else:
            self._readers.append(connection)

    async def current_revision(self) -> str | None:
        async with self.unit_of_work(read_only=True, atomic=True) as session:
            found = await session.fetch_rows("SELECT name FROM sqlite_master WHERE name = 'alembic_version'", ())
            if not found:
                return None
            rows = await session.fetch_rows("SELECT version_num FROM alembic_version", (), first=True)
            return str(rows[0][0]) if rows else None

    async def listen(self, channel: str, on_wake: Callable[[], None]) -> Callable[[], None]:
        """Call `on_wake` after every commit that notifies `channel`, in this process or another on the file."""
        unsubscribe = subscribe(channel, on_wake)
        loop = asyncio.get_running_loop()
        directory = wake_directory(self.path, channel)
        wake_socket: WakeSocket | None = None
        if directory is not None:
            wake_socket = WakeSocket(directory, on_wake)
            try:
                wake_socket.open(loop)
            except OSError:
                log.warning("no wake-up socket for %s; the listener polls instead", channel, exc_info=True)
                wake_socket = None

        def stop() -> None:
            unsubscribe()
            if wake_socket is not None:
                wake_socket.close(loop)

        return stop

    def wake(self, channels: Iterable[str]) -> None:
        for channel in channels:
            wake(channel, wake_directory(self.path, channel))

    async def dispose(self) -> None:
        groups, self._groups = self._groups, {}
        for group in groups.values():
            await group.close()
        self.turns.close()
        readers, self._readers = self._readers, []
        for reader in readers:
            reader.close()


def insert_or_nothing(table: Any, values: dict[str, Any], index_elements: Sequence[str]) -> Any:
    """kasir.db.InsertUnlessTaken's statement: no other unit of work holds rows while this one runs."""
    return sqlite_insert(table).values(values).on_conflict_do_nothing(index_elements=index_elements)


class SqliteSession(Session):
    __slots__ = ("connection", "seat", "strategy")

    dialect = DIALECT

    def __init__(self, strategy: SqliteStrategy, *, reader: sqlite3.Connection | None = None) -> None:
        super().__init__()
        self.strategy = strategy
        self.connection = reader  # a write unit's comes with its seat, at its first statement
        self.seat: _Seat | None = None

    async def _connection(self) -> sqlite3.Connection:
        if self.connection is None:
            self.seat = _Seat(self.strategy.group())
            self.connection = await self.seat.take()
        return self.connection

    async def fetch_rows(self, sql: str, values: Sequence[Any], *, first: bool = False) -> Sequence[Sequence[Any]]:
        connection = self.connection or await self._connection()
        try:
            cursor = connection.execute(sql, values)
            if not first:
                return cursor.fetchall()
            found = cursor.fetchone()
            cursor.close()
        except sqlite3.Error as error:
            raise translated(error, reader=self.seat is None) from error
        return () if found is None else (found,)

    async def count_rows(self, sql: str, values: Sequence[Any]) -> int:
        connection = self.connection or await self._connection()
        try:
            return connection.execute(sql, values).rowcount
        except sqlite3.Error as error:
            raise translated(error, reader=self.seat is None) from error

    async def rollback(self) -> None:
        if self.seat is not None:
            self.seat.rollback_to_start()

    def lock_wait(self, seconds: float) -> AbstractAsyncContextManager[None]:
        return contextlib.nullcontext()  # no other unit holds rows while a write unit runs


class _Unit:
    """A unit of work. A write unit is a savepoint in the process's shared write transaction, done once
    that transaction is durable; a read unit, a query-only connection in autocommit (no write lock, no
    transaction). A class rather than an @asynccontextmanager: every request enters one."""

    __slots__ = ("read_only", "session", "strategy")

    def __init__(self, strategy: SqliteStrategy, *, read_only: bool) -> None:
        self.strategy = strategy
        self.read_only = read_only

    async def __aenter__(self) -> Session:
        self.session = SqliteSession(self.strategy, reader=self.strategy.reader() if self.read_only else None)
        return self.session

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        session = self.session
        if self.read_only:
            assert session.connection is not None
            self.strategy.give_back_reader(session.connection)
        elif session.seat is not None:
            await session.seat.leave(ok=exc_type is None)  # on success, returns once the batch's COMMIT is on disk
        if exc_type is None:
            self.strategy.wake(session.channels)
            await run_after_commit(session.after_commit)


def _ensure_sqlite_dir(url: str) -> str:
    path = url.split(":///", 1)[-1].split("?", 1)[0]
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    return path or ":memory:"


def _busy(error: sqlite3.OperationalError) -> bool:
    return getattr(error, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


async def _retry_busy(statement: Callable[[], Any], seconds: float) -> None:
    """Run `statement`, retried while another process holds the file busy (it had no effect then)."""
    deadline, delay = time.monotonic() + seconds, 0.001
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as error:
            if not _busy(error) or time.monotonic() + delay > deadline:
                raise translated(error) from error
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


def _commit_sqlite(connection: sqlite3.Connection) -> None:
    """COMMIT (on a worker thread), retried while another process's reader or checkpoint holds SQLite busy."""
    deadline, delay = time.monotonic() + SQLITE_BUSY_SECONDS, 0.001
    while True:
        try:
            connection.execute("COMMIT")
            return
        except sqlite3.OperationalError as error:
            if not _busy(error) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


class GroupCommit:
    """SQLite group commit: the writers of one process share a write transaction, made durable once per batch.

    With `synchronous=FULL` every COMMIT waits for an fsync, and SQLite admits one writer at a
    time, so a process commits at most once per fsync however many requests wait. Here each
    unit of work is a SAVEPOINT inside one shared transaction: a unit that fails rolls back to
    its savepoint only; a unit that succeeds releases it and waits. The transaction is
    committed when no other writer is waiting for it (so a lone request commits at once), or
    after `max_batch` units, and every unit of the batch returns only after that COMMIT:
    nothing is answered, and no after-commit action runs, before its data is durable. If the
    COMMIT fails, every unit of the batch fails.

    The COMMIT (its fsync) runs on a worker thread, so the event loop goes on with the other
    requests meanwhile; the seat stays taken until it is done.
    """

    def __init__(self, strategy: SqliteStrategy) -> None:
        self.strategy = strategy
        self.max_batch = strategy.max_batch
        self.watchdog_seconds = strategy.watchdog_seconds
        self._gate = _Gate()
        self._waiting = 0
        self._connection: sqlite3.Connection | None = None  # the shared transaction's, while one is open
        self._idle: sqlite3.Connection | None = None  # the last batch's, kept for the next
        self._joined: list[asyncio.Future[None]] = []
        # The last batch's COMMIT, on its way to the disk; and the commits left to a task of their own.
        self._committing: asyncio.Task[None] | None = None
        self._orphans: set[asyncio.Task[None]] = set()

    async def enter(self) -> sqlite3.Connection:
        """Wait for the write seat; the shared transaction's connection (begun on first use)."""
        self._waiting += 1
        try:
            await self._gate.acquire()
        except BaseException:
            self._waiting -= 1
            self._commit_orphans()  # the units that left the COMMIT to this waiter must not wait forever
            raise
        self._waiting -= 1
        try:
            if self._connection is None:
                self._connection = await self._begin()
        except BaseException:
            self._gate.release()
            self._commit_orphans()
            raise
        return self._connection

    async def _begin(self) -> sqlite3.Connection:
        """Take the process's turn at the file, then BEGIN IMMEDIATE (the seat is held).

        A COMMIT still on its way (its unit was cancelled while waiting for it) ends first: it holds the
        process's turn and SQLite's lock until it does."""
        if self._committing is not None and not self._committing.done():
            await asyncio.shield(self._committing)
        connection, self._idle = self._idle or connect(self.strategy.path), None
        try:
            await self.strategy.turns.take(timeout=SQLITE_BUSY_SECONDS)
        except TimeoutError:
            connection.close()
            raise DatabaseUnavailable(
                f"SQLite: database is locked: another process kept the write turn {SQLITE_BUSY_SECONDS:g} s"
            ) from None
        try:
            await _retry_busy(lambda: connection.execute("BEGIN IMMEDIATE"), SQLITE_BUSY_SECONDS)
        except BaseException:
            self.strategy.turns.give_back()
            connection.close()
            raise
        return connection

    async def leave(self, *, joined: bool, broken: BaseException | None = None) -> None:
        """Give the seat back; with `joined`, return once the unit's batch is durable.

        `broken`: the unit could not restore its savepoint, so the shared transaction is rolled
        back and every unit of the batch fails with it.
        """
        if broken is not None:
            try:
                self._abort(broken)
            finally:
                self._gate.release()
            return
        done: asyncio.Future[None] | None = None
        if joined:
            done = asyncio.get_running_loop().create_future()
            self._joined.append(done)
        try:
            if self._waiting == 0 and len(self._joined) < self.max_batch:
                # Statements run without yielding: give the requests that are ready one turn of the
                # loop to reach the seat, so they join this batch instead of each paying an fsync.
                await asyncio.sleep(0)
            if self._waiting == 0 or len(self._joined) >= self.max_batch:
                await self._commit()
        finally:
            self._gate.release()
            if self._waiting == 0:
                self._commit_orphans()  # cancelled on the way out, before committing what joined
        if done is not None:
            await done  # the unit holding the seat next commits the batch (or this one did, above)

    def _commit_orphans(self) -> None:
        """A batch that joined but was left to a writer that gave up (cancelled, failed): commit it."""
        if self._joined and self._waiting == 0 and not self._gate.locked():
            task = asyncio.get_running_loop().create_task(self._commit_when_seated())
            self._orphans.add(task)
            task.add_done_callback(self._orphans.discard)

    async def _commit_when_seated(self) -> None:
        await self._gate.acquire()
        try:
            if self._joined:
                await self._commit()
        finally:
            self._gate.release()

    async def _commit(self) -> None:
        # The batch is handed over whole to a task of its own: a COMMIT already on its way to the
        # disk is never abandoned half-way by a cancelled request, and its units always hear how it went.
        connection, self._connection = self._connection, None
        joined, self._joined = self._joined, []
        if connection is None:
            _settle(joined, RuntimeError("no shared transaction to commit"))
            return
        loop = asyncio.get_running_loop()
        committed = loop.run_in_executor(None, _commit_sqlite, connection)  # sent now, whatever follows
        self._committing = loop.create_task(self._make_durable(connection, joined, committed))
        await asyncio.shield(self._committing)

    async def _make_durable(
        self, connection: sqlite3.Connection, joined: list[asyncio.Future[None]], committed: asyncio.Future[None]
    ) -> None:
        """Wait for the batch's COMMIT (on a worker thread: the loop goes on) and tell its units."""
        try:
            await committed
        except BaseException as error:
            _discard(connection)
            _settle(joined, translated(error) if isinstance(error, sqlite3.Error) else error)
            return
        finally:
            self.strategy.turns.give_back()
        _settle(joined, None)
        self.strategy.batches_committed += 1
        self.strategy.units_committed += len(joined)
        if self._idle is None:
            self._idle = connection
        else:
            connection.close()

    def _abort(self, error: BaseException) -> None:
        """Roll the shared transaction back; every unit that joined it fails with `error`."""
        connection, self._connection = self._connection, None
        joined, self._joined = self._joined, []
        _settle(joined, error)
        if connection is not None:
            self.strategy.turns.give_back()
            _discard(connection)

    async def close(self) -> None:
        """Give back the kept connections (when the database is disposed)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            self.strategy.turns.give_back()
            _discard(connection)
        idle, self._idle = self._idle, None
        if idle is not None:
            idle.close()


def _discard(connection: sqlite3.Connection) -> None:
    """Roll back what the connection holds and close it."""
    with contextlib.suppress(sqlite3.Error):
        connection.rollback()
    connection.close()


def _settle(joined: Iterable[asyncio.Future[Any]], error: BaseException | None) -> None:
    failure = error if error is None or isinstance(error, Exception) else RuntimeError("commit interrupted")
    for waiter in joined:
        if not waiter.done():
            if failure is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(failure)


class _Seat:
    """One write unit's place in the group: taken at its first statement, left at its end.

    Taking it opens the unit's savepoint on the shared transaction; leaving releases it, or
    first rolls back to it when the unit failed.
    """

    __slots__ = ("connection", "group", "taken_at")

    _SAVEPOINT = "kasir_unit"  # one at a time: units hold the seat in turn

    def __init__(self, group: GroupCommit) -> None:
        self.group = group
        self.connection: sqlite3.Connection | None = None
        self.taken_at = 0.0

    async def take(self) -> sqlite3.Connection:
        connection = await self.group.enter()
        try:
            connection.execute(f"SAVEPOINT {self._SAVEPOINT}")
        except BaseException as error:
            await self.group.leave(joined=False, broken=error)
            raise translated(error) if isinstance(error, sqlite3.Error) else error from error
        self.connection = connection
        self.taken_at = time.monotonic()
        return connection

    def rollback_to_start(self) -> None:
        if self.connection is not None:
            try:
                self.connection.execute(f"ROLLBACK TO {self._SAVEPOINT}")
            except sqlite3.Error as error:
                raise translated(error) from error

    async def leave(self, *, ok: bool) -> None:
        connection, self.connection = self.connection, None
        if connection is None:
            return
        overheld = self._overheld()
        if overheld is not None:
            ok = False  # the watchdog fails the unit: its writes are undone with it
        try:
            if not ok:
                connection.execute(f"ROLLBACK TO {self._SAVEPOINT}")
            connection.execute(f"RELEASE {self._SAVEPOINT}")
        except BaseException as error:
            # The shared transaction is in a state nobody can vouch for: the whole batch fails. With no
            # transaction left, SQLite rolled it back itself (an I/O error, a full disk): the file's state.
            if isinstance(error, sqlite3.Error):
                error = translated(error) if connection.in_transaction else DatabaseUnavailable(f"SQLite: {error}")
            await self.group.leave(joined=False, broken=error)
            raise error from None
        await self.group.leave(joined=ok)
        if overheld is not None:
            raise overheld

    def _overheld(self) -> WriteSeatHeldTooLong | None:
        """The watchdog (KASIR_DEBUG_WRITE_SEAT_SECONDS): a unit that held the seat longer than allowed.

        Statements run inline in microseconds, so a long hold means the unit waited on something
        else (DNS, a network call, a sleep) while every other writer of the process waited on it.
        """
        limit = self.group.watchdog_seconds
        if not limit:
            return None
        held = time.monotonic() - self.taken_at
        if held <= limit:
            return None
        log.error("write seat held %.3f s (limit %.3f s): a unit of work waited on something slow", held, limit)
        return WriteSeatHeldTooLong(held, limit)


class _Gate:
    """A lock whose release wakes every waiter at once: the group-commit seat.

    asyncio.Lock hands itself to one waiter per release, and that waiter runs in the loop's next
    iteration: the units waiting for a batch's COMMIT would get the seat one iteration each.
    Units hold the seat without yielding (statements run inline), so when all waiters are woken
    together, each finds the seat free in turn within one iteration. A woken unit that finds it
    taken (its holder yielded: a busy retry) waits again.
    """

    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def locked(self) -> bool:
        return self._held

    async def acquire(self) -> None:
        if not self._held and not self._waiters:
            self._held = True
            return
        loop = asyncio.get_running_loop()
        while True:
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
                raise
            if not self._held:
                self._held = True
                return

    def release(self) -> None:
        self._held = False
        waiters, self._waiters = self._waiters, collections.deque()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

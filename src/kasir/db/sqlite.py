"""The SQLite strategy: the embedded default.

- Statements run on the event loop's own thread (kasir.db.sqlite_inline): a statement on a
  local WAL file costs microseconds, a hop to a worker thread and back costs more than that.
- WAL mode, `synchronous=FULL`: a COMMIT waits for the disk.
- Group commit (`GroupCommit`): the writers of one process share one write transaction; each
  unit of work is a SAVEPOINT inside it, and the transaction is committed (one fsync) per batch
  of units. Every unit answers only after its batch is durable; a unit that fails rolls back
  to its own savepoint only.
- The processes sharing the file take turns at its write lock (kasir.db.sqlite_turns).
- After-commit wake-ups reach other processes through Unix datagram sockets (kasir.db.wakeup).

The rule this strategy lives by: a unit of work holds the process's write seat from its first
statement to its end, so it must never wait on anything slow (DNS, a network call) in
between. `KASIR_DEBUG_WRITE_SEAT_SECONDS` (set in the tests) fails a unit that does.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session
from sqlalchemy.util import await_only

from kasir.config import Settings
from kasir.db.sqlite_inline import InlineConnection, inline_connector
from kasir.db.sqlite_turns import WriterTurns
from kasir.db.unit import on_commit, run_after_commit
from kasir.db.wakeup import WakeSocket, subscribe, wake, wake_directory

log = logging.getLogger("kasir.db")

# How long a statement may wait for another process's write lock before it fails.
SQLITE_BUSY_SECONDS = 30.0

_IDLE_SESSIONS_MAX = 256
_IDLE_READERS_MAX = 64
_READER_PRAGMAS = (
    "PRAGMA busy_timeout=0",  # as the engine's connections: a busy file fails at once (kasir.db.sqlite_inline)
    "PRAGMA query_only=ON",  # the read path cannot write, so it never takes the write lock
    "PRAGMA temp_store=MEMORY",
)


class WriteSeatHeldTooLong(RuntimeError):
    """The watchdog's verdict: a unit of work held the SQLite write seat across a slow wait."""

    def __init__(self, held: float, limit: float) -> None:
        super().__init__(
            f"a unit of work held the SQLite write seat {held:.3f} s (KASIR_DEBUG_WRITE_SEAT_SECONDS={limit:g}): "
            "nothing slow (DNS, network) may run inside a write unit of work"
        )


class SqliteStrategy:
    """One engine on one SQLite file, its group commit, and the sessions made from it."""

    def __init__(self, settings: Settings, url: str) -> None:
        self.path = _ensure_sqlite_dir(url)
        if self.path == ":memory:":
            raise ValueError("KASIR_DATABASE_URL: an in-memory SQLite database is not supported; name a file")
        # Statement parameters never reach a log line or an exception message (merchant data, hashes, tokens).
        self.engine: AsyncEngine = create_async_engine(
            url, hide_parameters=True, async_creator=inline_connector(self.path, busy_seconds=SQLITE_BUSY_SECONDS)
        )
        # Processes sharing the file take turns at its write lock.
        self._turns = WriterTurns(self.path)
        _configure_sqlite(self.engine, turns=self._turns)
        self.group = GroupCommit(
            self.engine,
            max_batch=settings.sqlite_group_commit_max,
            watchdog_seconds=settings.debug_write_seat_seconds,
        )
        self._write_sessions = async_sessionmaker(
            self.engine,
            expire_on_commit=False,
            sync_session_class=_GroupSession,
            join_transaction_mode="create_savepoint",
        )
        self._idle_sessions: list[AsyncSession] = []
        # Read-only work starts a deferred transaction, so it never waits for the write lock.
        self._read_sessions = async_sessionmaker(
            self.engine.execution_options(sqlite_begin="DEFERRED"), expire_on_commit=False
        )
        # The read path (_ReadUnitOfWork): query-only connections of its own, and sessions kept for reuse.
        self._readers: list[sqlite3.Connection] = []
        self._idle_read_sessions: list[AsyncSession] = []

    def unit_of_work(self, *, read_only: bool, atomic: bool) -> AbstractAsyncContextManager[AsyncSession]:
        # Not atomic (`atomic=False`) asks nothing of SQLite: a write unit's transaction costs no round
        # trip here, and the group commit already shares its commit with the writers beside it.
        if read_only:
            return _ReadUnitOfWork(self)
        return _GroupUnitOfWork(self)

    def _reader(self) -> sqlite3.Connection:
        """A query-only sqlite3 connection of the read path (kept, not pooled by SQLAlchemy)."""
        if self._readers:
            return self._readers.pop()
        connection = sqlite3.connect(self.path, timeout=0, check_same_thread=False, isolation_level=None)
        for pragma in _READER_PRAGMAS:
            connection.execute(pragma)
        return connection

    def _give_back_reader(self, connection: sqlite3.Connection) -> None:
        if connection.in_transaction:  # a statement interrupted half-way: do not hand on its state
            connection.close()
        elif len(self._readers) < _IDLE_READERS_MAX:
            self._readers.append(connection)
        else:
            connection.close()

    def _read_session(self) -> AsyncSession:
        idle = self._idle_read_sessions
        return idle.pop() if idle else self._read_sessions()

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

    async def dispose(self) -> None:
        await self.group.close()
        await self.engine.dispose()
        self._turns.close()
        readers, self._readers = self._readers, []
        for reader in readers:
            reader.close()

    def _session(self) -> AsyncSession:
        idle = self._idle_sessions
        return idle.pop() if idle else self._write_sessions()

    async def _recycle(self, session: AsyncSession) -> None:
        """Keep a finished write session for the next unit: making one costs more than a card charge's SQL."""
        if session.sync_session.in_transaction() or len(session.sync_session.identity_map):
            await session.close()
        session.sync_session.info.clear()
        if len(self._idle_sessions) < _IDLE_SESSIONS_MAX:
            self._idle_sessions.append(session)


# --- what kasir.db asks of a SQLite session ------------------------------------------


def insert_or_nothing(table: Any, values: dict[str, Any], index_elements: Sequence[str]) -> Any:
    """kasir.db.InsertUnlessTaken's statement: no other unit of work holds rows while this one runs."""
    return sqlite_insert(table).values(values).on_conflict_do_nothing(index_elements=index_elements)


async def rollback_unit(session: AsyncSession) -> None:
    await session.rollback()
    seat: _Seat | None = session.sync_session.info.get("group_seat")
    if seat is not None:
        seat.rollback_to_start()


async def notify_after_commit(session: AsyncSession, channel: str) -> None:
    directory = wake_directory(session.bind.url.database, channel)  # type: ignore[union-attr]
    on_commit(session, lambda: wake(channel, directory))


async def raw_connection(session: AsyncSession) -> sqlite3.Connection:
    """The unit's sqlite3 connection: the seat's in a write unit, the reader's in a read unit."""
    info = session.sync_session.info
    seat: _Seat | None = info.get("group_seat")
    if seat is not None:
        return seat.sqlite or await seat.sqlite_connection()
    reader: sqlite3.Connection | None = info.get("reader")
    if reader is not None:
        return reader
    driver = (await session.connection()).sync_connection.connection.driver_connection  # type: ignore[union-attr]
    assert isinstance(driver, InlineConnection)
    return driver.sqlite


class _GroupUnitOfWork:
    """A write unit of work: a savepoint in the process's shared write transaction, done once that
    transaction is durable.

    The seat's savepoint holds all the unit's writes (ORM and kasir.db statements alike); the ORM
    session, when the unit uses it, nests a savepoint of its own inside. A class rather than an
    @asynccontextmanager: every write request enters one, and the generator machinery costs more.
    """

    __slots__ = ("_seat", "_session", "_strategy")

    def __init__(self, strategy: SqliteStrategy) -> None:
        self._strategy = strategy

    async def __aenter__(self) -> AsyncSession:
        session = self._session = self._strategy._session()
        seat = self._seat = _Seat(self._strategy.group)
        session.sync_session.info["group_seat"] = seat
        return session

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        session = self._session
        if exc_type is None:
            try:
                if session.sync_session.in_transaction():
                    await session.commit()  # flushes, and releases the ORM's savepoint
            except BaseException:
                await self._undo()
                raise
            try:
                await self._seat.leave(ok=True)  # returns once the batch's COMMIT is on disk
            except BaseException:
                await session.close()
                raise
            await run_after_commit(session)
            await self._strategy._recycle(session)
            return
        await self._undo()  # and the unit's exception goes on

    async def _undo(self) -> None:
        session = self._session
        try:
            if session.sync_session.in_transaction():
                await session.rollback()
        finally:
            try:
                await self._seat.leave(ok=False)  # back to the unit's savepoint: the batch's other work stands
            finally:
                await session.close()


class _ReadUnitOfWork:
    """A read unit of work: no write lock, no write transaction, no SQLAlchemy connection unless the ORM is used.

    kasir.db statements (the rooms' hot reads: an inquiry, a status, a credential) run on a sqlite3
    connection of the strategy's own, with `query_only` on (a write through it fails instead of
    taking the lock) and in autocommit: each statement reads what is committed when it runs, as
    in PostgreSQL's READ COMMITTED; there is no BEGIN or COMMIT to send, and no pool check-out.
    ORM queries of the unit, when it makes any, go through its session on a DEFERRED transaction
    as before (a separate connection: each of its statements also reads what is committed).
    """

    __slots__ = ("_reader", "_session", "_strategy")

    def __init__(self, strategy: SqliteStrategy) -> None:
        self._strategy = strategy

    async def __aenter__(self) -> AsyncSession:
        session = self._session = self._strategy._read_session()
        self._reader = self._strategy._reader()
        session.sync_session.info["reader"] = self._reader
        return session

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        session, strategy = self._session, self._strategy
        strategy._give_back_reader(self._reader)
        sync_session = session.sync_session
        if exc_type is not None:
            if sync_session.in_transaction():
                await session.rollback()
            await session.close()
            return
        if sync_session.in_transaction():
            await session.commit()
        await run_after_commit(session)
        if sync_session.in_transaction() or len(sync_session.identity_map):
            await session.close()
        sync_session.info.clear()
        if len(strategy._idle_read_sessions) < _IDLE_SESSIONS_MAX:
            strategy._idle_read_sessions.append(session)


def _ensure_sqlite_dir(url: str) -> str:
    path = url.split(":///", 1)[-1].split("?", 1)[0]
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    return path or ":memory:"


def _configure_sqlite(engine: AsyncEngine, *, turns: WriterTurns) -> None:
    # One writer at a time is SQLite's rule. Writers of this process queue on a FIFO lock taken
    # just before BEGIN IMMEDIATE and released when the connection returns to the pool, instead
    # of polling SQLite's busy handler (which sleeps up to 100 ms between tries). The holder of
    # that lock then waits for its process's turn among the processes sharing the file
    # (kasir.db.sqlite_turns), and gives the turn back when it gives back the lock.
    write_lock = _ProcessWriteLock(turns)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the driver: SQLAlchemy emits BEGIN itself below.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        # 0: the inline driver retries SQLITE_BUSY itself without blocking the loop.
        cursor.execute("PRAGMA busy_timeout=0")
        cursor.execute("PRAGMA foreign_keys=ON")
        # The sub-journal of savepoints (one per unit of work under group commit) and of statements
        # lives in memory: on files it spills past 64 KiB, which a batch of card charges passes, and
        # from then on every page a unit changes is also written to a temporary file as well.
        # What it holds is bounded by the batch (GroupCommit.max_batch).
        # Temporary tables of sorts that no index serves (admin lists) live in memory too.
        cursor.execute("PRAGMA temp_store=MEMORY")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.get_execution_options().get("sqlite_begin", "IMMEDIATE")
        record_info = connection.connection._connection_record.info
        if mode == "IMMEDIATE" and not record_info.get("holds_write_lock"):
            await_only(write_lock.acquire())
            record_info["holds_write_lock"] = True
            try:
                await_only(write_lock.take_turn())
            except BaseException:
                _release(record_info, write_lock)
                raise
        try:
            _begin(connection, mode)
        except BaseException:
            _release(record_info, write_lock)
            raise

    @event.listens_for(engine.sync_engine.pool, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        _release(record.info, write_lock)

    # A connection whose reset failed (a task cancelled mid-transaction) is invalidated or closed
    # instead of checked in: release there too, or every later writer of the process waits forever.
    @event.listens_for(engine.sync_engine.pool, "invalidate")
    def _on_invalidate(_dbapi_connection: Any, record: Any, _exception: Any) -> None:
        _release(record.info, write_lock)

    @event.listens_for(engine.sync_engine.pool, "close")
    def _on_close(_dbapi_connection: Any, record: Any) -> None:
        _release(record.info, write_lock)

    @event.listens_for(engine.sync_engine, "commit")
    def _on_commit(connection: Any) -> None:
        # Released as COMMIT is sent; the next writer's BEGIN IMMEDIATE waits at most for the fsync.
        _release(connection.connection._connection_record.info, write_lock)

    @event.listens_for(engine.sync_engine, "rollback")
    def _on_rollback(connection: Any) -> None:
        _release(connection.connection._connection_record.info, write_lock)


class GroupCommit:
    """SQLite group commit: the writers of one process share a write transaction, made durable once per batch.

    With `synchronous=FULL` every COMMIT waits for an fsync, and SQLite admits one writer at a
    time, so a process commits at most once per fsync however many requests wait. Here each
    unit of work is a SAVEPOINT inside one shared transaction: a unit that fails rolls back to
    its savepoint only; a unit that succeeds releases it and waits. The transaction is
    committed when no other writer is waiting for it (so a lone request commits at once, as
    before), or after `max_batch` units, and every unit of the batch returns only after that
    COMMIT: nothing is answered, and no after-commit action runs, before its data is durable.
    If the COMMIT fails, every unit of the batch fails.

    The COMMIT (its fsync) runs on a worker thread, so the event loop goes on with the other
    requests meanwhile; the seat stays taken until it is done.
    """

    def __init__(self, engine: AsyncEngine, *, max_batch: int, watchdog_seconds: float = 0.0) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self.watchdog_seconds = watchdog_seconds
        self._lock = _LoopLocalLock(_Gate)
        self._waiting = 0
        self._connection: AsyncConnection | None = None
        # The last batch's connection, kept: checking one out costs more than a batch's statements.
        self._idle: AsyncConnection | None = None
        self._joined: list[asyncio.Future[None]] = []

    async def enter(self) -> Connection:
        """Wait for the write seat; the shared transaction's connection (begun on first use)."""
        self._waiting += 1
        try:
            await self._lock.acquire()
        except BaseException:
            self._waiting -= 1
            self._commit_orphans()  # the units that left the COMMIT to this waiter must not wait forever
            raise
        self._waiting -= 1
        try:
            if self._connection is None:
                await self._begin()
        except BaseException:
            self._lock.release()
            self._commit_orphans()
            raise
        assert self._connection is not None
        return self._connection.sync_connection  # type: ignore[return-value]

    async def _begin(self) -> None:
        """Begin the shared transaction (the seat is held)."""
        connection, self._idle = self._idle or await self.engine.connect(), None
        try:
            await connection.begin()
        except BaseException:
            await connection.close()
            raise
        self._connection = connection

    async def leave(self, *, joined: bool, broken: BaseException | None = None) -> None:
        """Give the seat back; with `joined`, return once the unit's batch is durable.

        `broken`: the unit could not restore its savepoint, so the shared transaction is rolled
        back and every unit of the batch fails with it.
        """
        if broken is not None:
            try:
                await self._abort(broken)
            finally:
                self._lock.release()
            return
        done: asyncio.Future[None] | None = None
        if joined:
            done = asyncio.get_running_loop().create_future()
            self._joined.append(done)
        try:
            if self._waiting == 0 and len(self._joined) < self.max_batch:
                # Statements run without yielding (inline SQLite): give the requests that are ready
                # one turn of the loop to reach the seat, so they join this batch instead of each
                # paying an fsync of its own. Costs a lone request one loop iteration.
                await asyncio.sleep(0)
            if self._waiting == 0 or len(self._joined) >= self.max_batch:
                await self._commit()
        finally:
            self._lock.release()
            if self._waiting == 0:
                self._commit_orphans()  # cancelled on the way out, before committing what joined
        if done is not None:
            # The unit holding the seat next commits the batch (or this one did, above).
            await done

    def _commit_orphans(self) -> None:
        """A batch that joined but was left to a writer that gave up (cancelled, failed): commit it."""
        if self._joined and self._waiting == 0 and not self._lock.locked():
            asyncio.get_running_loop().create_task(self._commit_when_seated())

    async def _commit_when_seated(self) -> None:
        async with self._seat():
            if self._joined:
                await self._commit()

    @asynccontextmanager
    async def _seat(self) -> AsyncIterator[None]:
        await self._lock.acquire()
        try:
            yield
        finally:
            self._lock.release()

    async def _commit(self) -> None:
        # The batch is handed over whole to a task of its own: a COMMIT already on its way to the
        # disk is never abandoned half-way by a cancelled request, and its units always hear how it went.
        connection, self._connection = self._connection, None
        joined, self._joined = self._joined, []
        if connection is None:
            _settle(joined, RuntimeError("no shared transaction to commit"))
            return
        loop = asyncio.get_running_loop()
        raw = connection.sync_connection.connection.driver_connection.sqlite  # type: ignore[union-attr]
        committed = loop.run_in_executor(None, _commit_sqlite, raw)  # the COMMIT is sent now, whatever follows
        await asyncio.shield(loop.create_task(self._make_durable(connection, joined, committed)))

    async def _make_durable(
        self, connection: AsyncConnection, joined: list[asyncio.Future[None]], committed: asyncio.Future[None]
    ) -> None:
        """Wait for the batch's COMMIT (on a worker thread: the loop goes on) and tell its units."""
        try:
            try:
                await committed
            except sqlite3.Error as exc:
                # As SQLAlchemy's own COMMIT would say it: an OperationalError is a database that
                # cannot take writes now (503 and Retry-After on every route), not a bug.
                raise DBAPIError.instance("COMMIT", None, exc, sqlite3.Error, hide_parameters=True) from exc
            # SQLAlchemy's COMMIT finds nothing left to commit, and keeps its bookkeeping (events,
            # the process's write lock) as usual.
            await connection.commit()
        except BaseException as exc:
            _settle(joined, exc)
            await _discard(connection)
            return
        _settle(joined, None)
        if self._idle is None:
            self._idle = connection
        else:
            await connection.close()

    async def close(self) -> None:
        """Give back the kept connection (when the database is disposed)."""
        connection, self._idle = self._idle, None
        if connection is not None:
            await connection.close()

    async def _abort(self, exc: BaseException) -> None:
        """Roll the shared transaction back; every unit that joined it fails with `exc`."""
        connection, self._connection = self._connection, None
        joined, self._joined = self._joined, []
        _settle(joined, exc)
        if connection is not None:
            await _discard(connection)


async def _discard(connection: AsyncConnection) -> None:
    """Roll back what the connection holds and close it."""
    try:
        with contextlib.suppress(Exception):
            await connection.rollback()
    finally:
        await connection.close()


def _settle(joined: Iterable[asyncio.Future[Any]], exc: BaseException | None) -> None:
    error = exc if exc is None or isinstance(exc, Exception) else RuntimeError("commit interrupted")
    for waiter in joined:
        if not waiter.done():
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)


class _Seat:
    """One unit of work's place in the group: taken at its first statement, left at its end.

    Taking it opens the unit's savepoint on the shared transaction; leaving releases it, or
    first rolls back to it when the unit failed. Run on the sqlite3 connection directly: a
    SAVEPOINT through SQLAlchemy costs a statement compilation each time (its name changes).
    """

    _SAVEPOINT = "kasir_unit"  # one at a time: units hold the seat in turn

    def __init__(self, group: GroupCommit) -> None:
        self.group = group
        self.connection: Connection | None = None
        self.sqlite: sqlite3.Connection | None = None
        self.taken_at = 0.0
        self.nested = 0  # savepoints opened inside the unit's own (Database.savepoint)

    async def take(self) -> Connection:
        if self.connection is None:
            connection = await self.group.enter()
            raw: sqlite3.Connection = connection.connection.driver_connection.sqlite  # type: ignore[union-attr]
            try:
                raw.execute(f"SAVEPOINT {self._SAVEPOINT}")
            except BaseException:
                await self.group.leave(joined=False)
                raise
            self.connection, self.sqlite = connection, raw
            self.taken_at = time.monotonic()
        return self.connection

    async def sqlite_connection(self) -> sqlite3.Connection:
        await self.take()
        assert self.sqlite is not None
        return self.sqlite

    def connection_for_statement(self) -> Connection:
        # Runs inside SQLAlchemy's greenlet (sync Session code), so it may wait on the event loop.
        return self.connection if self.connection is not None else await_only(self.take())

    def rollback_to_start(self) -> None:
        if self.sqlite is not None:
            self.sqlite.execute(f"ROLLBACK TO {self._SAVEPOINT}")

    async def leave(self, *, ok: bool) -> None:
        if self.connection is None or self.sqlite is None:
            return  # never wrote: nothing to join
        raw, self.connection, self.sqlite = self.sqlite, None, None
        overheld = self._overheld()
        if overheld is not None:
            ok = False  # the watchdog fails the unit: its writes are undone with it
        try:
            if not ok:
                raw.execute(f"ROLLBACK TO {self._SAVEPOINT}")
            raw.execute(f"RELEASE {self._SAVEPOINT}")
        except BaseException as exc:
            # The shared transaction is in a state nobody can vouch for: the whole batch fails.
            await self.group.leave(joined=False, broken=exc)
            raise
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


class _GroupSession(Session):
    """A Session whose bind is the group's shared connection, taken lazily at the first statement."""

    def get_bind(self, mapper: Any = None, **kwargs: Any) -> Any:
        seat: _Seat | None = self.info.get("group_seat")
        if seat is None:
            return super().get_bind(mapper, **kwargs)
        return seat.connection_for_statement()


def _commit_sqlite(connection: sqlite3.Connection) -> None:
    """COMMIT, retried while another process's reader or checkpoint holds SQLite busy (no-op outside a transaction)."""
    deadline = time.monotonic() + SQLITE_BUSY_SECONDS
    delay = 0.001
    while True:
        try:
            connection.commit()
            return
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            if not busy or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _begin(connection: Connection, mode: str) -> None:
    """BEGIN on the driver's cursor: `exec_driver_sql` would run SQLAlchemy's execution machinery for
    every SQLite transaction (a read-only unit of work is one). Errors come out as SQLAlchemy's, as
    they would from `exec_driver_sql`."""
    statement = f"BEGIN {mode}"
    try:
        connection.connection.dbapi_connection.cursor().execute(statement)  # type: ignore[union-attr]
    except sqlite3.Error as exc:
        raise DBAPIError.instance(
            statement, None, exc, sqlite3.Error, hide_parameters=True, dialect=connection.dialect
        ) from exc


def _release(record_info: dict[str, Any], lock: _ProcessWriteLock) -> None:
    if record_info.pop("holds_write_lock", False):
        lock.release()


class _Gate:
    """A lock whose release wakes every waiter at once: the group-commit seat.

    asyncio.Lock hands itself to one waiter per release, and that waiter runs in the loop's next
    iteration: the units waiting for a batch's COMMIT would get the seat one iteration (and one
    epoll_wait) each. Units hold the seat without yielding (statements run inline), so when all
    waiters are woken together, each finds the seat free in turn within one iteration. A woken
    unit that finds it taken (its holder yielded: a busy retry) waits again.
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


class _LoopLocalLock:
    """An asyncio.Lock (or `factory()`) per event loop (tests and the CLI run several loops in one process)."""

    def __init__(self, factory: Callable[[], Any] = asyncio.Lock) -> None:
        self._factory = factory
        self._locks: dict[int, Any] = {}

    def _lock(self) -> Any:
        loop = asyncio.get_running_loop()
        lock = self._locks.get(id(loop))
        if lock is None:
            lock = self._locks[id(loop)] = self._factory()
        return lock

    async def acquire(self) -> None:
        await self._lock().acquire()

    def locked(self) -> bool:
        return self._lock().locked()

    def release(self) -> None:
        try:
            lock = self._lock()
        except RuntimeError:  # a connection checked in outside any loop (disposal): nothing to release
            return
        if lock.locked():
            lock.release()


class _ProcessWriteLock(_LoopLocalLock):
    """The process's write lock, and with it the process's turn among those sharing the file."""

    def __init__(self, turns: WriterTurns) -> None:
        super().__init__()
        self.turns = turns

    async def take_turn(self) -> None:
        try:
            await self.turns.take(timeout=SQLITE_BUSY_SECONDS)
        except TimeoutError:
            message = f"database is locked: another process kept the write turn {SQLITE_BUSY_SECONDS:g} s"
            raise OperationalError("BEGIN IMMEDIATE", None, sqlite3.OperationalError(message)) from None

    def release(self) -> None:
        self.turns.give_back()
        super().release()

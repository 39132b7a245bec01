"""Engine, sessions and the unit of work.

- SQLite (the embedded default) runs in WAL mode with `synchronous=FULL` and a busy
  timeout; write transactions start with `BEGIN IMMEDIATE` so two writers queue on the
  lock instead of failing when a reader upgrades.
- PostgreSQL runs through asyncpg.
- Services never commit. The request (or worker task) boundary commits or rolls back
  as a whole; work registered with `on_commit()` runs only after a successful commit.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends
from sqlalchemy import DateTime, MetaData, event, text
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Session
from sqlalchemy.types import TypeDecorator
from sqlalchemy.util import await_only
from starlette.requests import Request

from kasir.config import Settings
from kasir.kit.sqlite_inline import inline_connector
from kasir.kit.sqlite_turns import WriterTurns

log = logging.getLogger("kasir.db")

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(TypeDecorator[datetime]):
    """Aware datetimes in, aware UTC datetimes out, on SQLite (no time zones) and PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTCDateTime column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def bind_processor(self, dialect: Dialect) -> Any:
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)

        # SQLite: the text SQLAlchemy's DATETIME writes (`2026-11-23 08:00:00.000000`), made in C
        # instead of through two layers of processors: every payment row has three of these.
        def process(value: datetime | None) -> str | None:
            if value is None:
                return None
            if value.tzinfo is UTC:  # the clock's: the text without its "+00:00", at half the cost
                return value.isoformat(" ", "microseconds")[:26]
            if value.tzinfo is None:
                raise ValueError("naive datetime given to a UTCDateTime column")
            return value.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")

        return process

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


AfterCommit = Callable[[], Awaitable[None] | None]


def dialect_name(session: AsyncSession) -> str:
    """`sqlite` or `postgresql`, without taking a connection (a group-commit seat is taken lazily)."""
    bind = session.bind
    assert bind is not None, "sessions are made bound to the engine"
    return bind.dialect.name


async def rollback_unit(session: AsyncSession) -> None:
    """Undo what this unit of work wrote so far and go on in the same unit (a page re-read after a refusal).

    `session.rollback()` alone would undo only the ORM's part under group commit.
    """
    await session.rollback()
    seat: _Seat | None = session.info.get("group_seat")
    if seat is not None:
        seat.rollback_to_start()


async def each_in_own_unit_of_work(
    database: Database,
    keys: Iterable[str],
    action: Callable[[AsyncSession, str], Awaitable[bool]],
    *,
    what: str,
) -> int:
    """Run `action(session, key)` for each key in a unit of work of its own; how many returned True.

    For the worker's jobs (expiries): one bad row must not stop the others, and the next run retries it.
    """
    done = 0
    for key in keys:
        try:
            async with database.unit_of_work() as session:
                if await action(session, key):
                    done += 1
        except Exception:
            log.exception("%s failed", what, extra={"transaction_id": key})
    return done


def on_commit(session: AsyncSession, action: AfterCommit) -> None:
    """Run `action` after the session's transaction commits (never if it rolls back)."""
    session.info.setdefault("after_commit", []).append(action)


_IDLE_SESSIONS_MAX = 256

# How long a statement may wait for another process's write lock before it fails.
SQLITE_BUSY_SECONDS = 30.0


class Database:
    """One engine per process, and the sessions made from it."""

    group: GroupCommit | None = None
    inline_sqlite = False
    _turns: WriterTurns | None = None

    def __init__(self, settings: Settings) -> None:
        self.url = settings.resolved_database_url
        self._idle_group_sessions: list[AsyncSession] = []
        self.is_sqlite = self.url.startswith("sqlite")
        # Statement parameters never reach a log line or an exception message (merchant data, hashes, tokens).
        kwargs: dict[str, Any] = {"hide_parameters": True}
        if self.is_sqlite:
            path = _ensure_sqlite_dir(self.url)
            self.inline_sqlite = settings.sqlite_driver == "inline" and path != ":memory:"
            if self.inline_sqlite:
                kwargs["async_creator"] = inline_connector(path, busy_seconds=SQLITE_BUSY_SECONDS)
            else:
                kwargs["connect_args"] = {"timeout": SQLITE_BUSY_SECONDS}
        else:
            kwargs.update(pool_size=settings.db_pool_size, max_overflow=settings.db_pool_size, pool_pre_ping=True)
        self.engine: AsyncEngine = create_async_engine(self.url, **kwargs)
        if self.is_sqlite:
            busy_timeout_ms = 0 if self.inline_sqlite else int(SQLITE_BUSY_SECONDS * 1000)
            # Processes sharing the file take turns at its write lock (inline driver: the one that serves).
            self._turns = WriterTurns(path) if self.inline_sqlite else None
            _configure_sqlite(self.engine, busy_timeout_ms=busy_timeout_ms, turns=self._turns)
        self.sessionmaker = async_sessionmaker(self.engine, expire_on_commit=False)
        if self.inline_sqlite and settings.sqlite_group_commit:
            self.group = GroupCommit(self.engine, max_batch=settings.sqlite_group_commit_max)
            self.sessionmaker = async_sessionmaker(
                self.engine,
                expire_on_commit=False,
                sync_session_class=_GroupSession,
                join_transaction_mode="create_savepoint",
            )
        # Read-only work on SQLite starts a deferred transaction, so it never waits for the write lock.
        self.read_sessionmaker = async_sessionmaker(
            self.engine.execution_options(sqlite_begin="DEFERRED"), expire_on_commit=False
        )

    def unit_of_work(self, *, read_only: bool = False) -> AbstractAsyncContextManager[AsyncSession]:
        """Commit on success, roll back on any exception; then run the after-commit actions."""
        if self.group is not None and not read_only:
            return _GroupUnitOfWork(self, self.group)
        return self._session_unit_of_work(read_only=read_only)

    @asynccontextmanager
    async def _session_unit_of_work(self, *, read_only: bool) -> AsyncIterator[AsyncSession]:
        maker = self.read_sessionmaker if read_only else self.sessionmaker
        async with maker() as session:
            try:
                yield session
            except BaseException:
                await session.rollback()
                raise
            await session.commit()
            await run_after_commit(session)

    async def _recycle(self, session: AsyncSession) -> None:
        """Keep a finished group session for the next unit: making one costs more than a card charge's SQL."""
        if session.in_transaction() or len(session.identity_map):
            await session.close()
        session.info.clear()
        if len(self._idle_group_sessions) < _IDLE_SESSIONS_MAX:
            self._idle_group_sessions.append(session)

    async def dispose(self) -> None:
        if self.group is not None:
            await self.group.close()
        await self.engine.dispose()
        if self._turns is not None:
            self._turns.close()


class _GroupUnitOfWork:
    """A unit of work under group commit: a savepoint in the process's shared write transaction,
    done once that transaction is durable.

    The seat's savepoint holds all the unit's writes (ORM and kasir.prepared alike); the ORM
    session, when the unit uses it, nests a savepoint of its own inside. A class rather than
    an @asynccontextmanager: every write request enters one, and the generator machinery cost
    a card charge ~15 µs under load.
    """

    __slots__ = ("_database", "_group", "_seat", "_session")

    def __init__(self, database: Database, group: GroupCommit) -> None:
        self._database = database
        self._group = group

    async def __aenter__(self) -> AsyncSession:
        idle = self._database._idle_group_sessions
        session = self._session = idle.pop() if idle else self._database.sessionmaker()
        seat = self._seat = _Seat(self._group)
        session.info["group_seat"] = seat
        return session

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        session = self._session
        if exc_type is None:
            try:
                if session.in_transaction():
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
            await self._database._recycle(session)
            return
        await self._undo()  # and the unit's exception goes on

    async def _undo(self) -> None:
        session = self._session
        try:
            if session.in_transaction():
                await session.rollback()
        finally:
            try:
                await self._seat.leave(ok=False)  # back to the unit's savepoint: the batch's other work stands
            finally:
                await session.close()


async def run_after_commit(session: AsyncSession) -> None:
    actions: list[AfterCommit] = session.info.pop("after_commit", [])
    for action in actions:
        try:
            result = action()
            if result is not None:
                await result
        except Exception:  # the commit stands; a failed side effect is retried by its own machinery
            log.exception("after-commit action failed")


def _ensure_sqlite_dir(url: str) -> str:
    path = url.split(":///", 1)[-1].split("?", 1)[0]
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    return path or ":memory:"


def _configure_sqlite(engine: AsyncEngine, *, busy_timeout_ms: int, turns: WriterTurns | None) -> None:
    # One writer at a time is SQLite's rule. Writers of this process queue on a FIFO lock taken
    # just before BEGIN IMMEDIATE and released when the connection returns to the pool, instead
    # of polling SQLite's busy handler (which sleeps up to 100 ms between tries). With `turns`,
    # the holder of that lock then waits for its process's turn among the processes sharing the
    # file (kasir.kit.sqlite_turns), and gives the turn back when it gives back the lock.
    write_lock = _ProcessWriteLock(turns)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control away from the driver: SQLAlchemy emits BEGIN itself below.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        # 0 with the inline driver: it retries SQLITE_BUSY itself without blocking the loop.
        cursor.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
        cursor.execute("PRAGMA foreign_keys=ON")
        # The sub-journal of savepoints (one per unit of work under group commit) and of statements
        # lives in memory: on files it spills past 64 KiB, which a batch of card charges passes, and
        # from then on every page a unit changes is also written to a temporary file (a card charge
        # made ~12 extra writes, ~20 µs). What it holds is bounded by the batch (GroupCommit.max_batch).
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

    def __init__(self, engine: AsyncEngine, *, max_batch: int) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self._lock = _LoopLocalLock(_Gate)
        self._waiting = 0
        self._connection: AsyncConnection | None = None
        self._idle: AsyncConnection | None = None  # the last batch's, kept: checking one out costs ~130 µs
        self._joined: list[asyncio.Future[None]] = []
        self._programs: list[tuple[Program, asyncio.Future[Any]]] = []
        self._running_programs: asyncio.Task[None] | None = None

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

    async def run(self, program: Program) -> Any:
        """Run `program` as a unit of work of the next batch, and answer its result once the batch is durable.

        A program is a whole unit's statements as one function of the sqlite3 connection, for a
        unit that knows everything it writes before it writes (no await in between). It runs with
        the batch's other programs back to back, just before the COMMIT, inside a savepoint of its
        own. An exception rolls back to that savepoint and is raised here; the batch's other work
        stands. So the unit waits once, for its batch, where a unit of work waits for the seat and
        then for the batch, and pays for neither the seat nor its savepoint's round trips: an OPEN
        card charge went from 0.47x to 0.51x of the ceiling.

        A caller cancelled before its batch starts is left out of it; after, its program commits.
        """
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        self._programs.append((program, done))
        if self._running_programs is None:
            self._running_programs = loop.create_task(self._commit_programs())
        return await done

    async def _commit_programs(self) -> None:
        """Commit batches while programs wait: each batch takes the programs sent while the last one committed."""
        try:
            await asyncio.sleep(0)  # the requests ready now send theirs first: one batch, not two
            while self._programs:
                async with self._seat():
                    if self._programs:
                        await self._commit()
        except BaseException as exc:
            # Every program still waiting hears why, and its request answers (503 for a database
            # that cannot be reached). Nobody awaits this task: an error ends here, a cancel goes on.
            programs, self._programs = self._programs, []
            _settle(_futures_of(programs), exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._running_programs = None

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
        programs = [(program, done) for program, done in self._programs if not done.done()]  # not the cancelled
        self._programs = []
        if self._connection is None and programs:
            try:
                await self._begin()
            except BaseException as exc:
                _settle(_futures_of(programs), exc)
                raise
        connection, self._connection = self._connection, None
        joined, self._joined = self._joined, []
        if connection is None:
            _settle(joined, RuntimeError("no shared transaction to commit"))
            return
        loop = asyncio.get_running_loop()
        raw = connection.sync_connection.connection.driver_connection.sqlite  # type: ignore[union-attr]
        try:
            # On the loop, back to back: on the COMMIT's thread they cost more in GIL hand-overs than
            # SQLite's share they took off the loop (HTTP: 1,925-1,959 against 1,997-2,008 req/s).
            outcomes = _run_programs(raw, [program for program, _ in programs])
        except BaseException as exc:  # a savepoint that could not be undone: nobody can vouch for the batch
            _settle([*joined, *_futures_of(programs)], exc)
            await _discard(connection)
            return
        committed = loop.run_in_executor(None, _commit_sqlite, raw)  # the COMMIT is sent now, whatever follows
        durable = self._make_durable(connection, joined, programs, outcomes, committed)
        await asyncio.shield(loop.create_task(durable))

    async def _make_durable(
        self,
        connection: AsyncConnection,
        joined: list[asyncio.Future[None]],
        programs: list[tuple[Program, asyncio.Future[Any]]],
        outcomes: list[tuple[bool, Any]],
        committed: asyncio.Future[None],
    ) -> None:
        """Wait for the batch's COMMIT (on a worker thread: the loop goes on) and tell its units and programs."""
        try:
            await committed
            # SQLAlchemy's COMMIT finds nothing left to commit, and keeps its bookkeeping (events,
            # the process's write lock) as usual.
            await connection.commit()
        except BaseException as exc:
            _settle([*joined, *_futures_of(programs)], exc)
            await _discard(connection)
            return
        _settle(joined, None)
        for (_, done), (ok, value) in zip(programs, outcomes, strict=True):
            if not done.done():
                if ok:
                    done.set_result(value)
                else:
                    done.set_exception(value)
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


Program = Callable[[sqlite3.Connection], Any]

_UNIT_SAVEPOINT = "SAVEPOINT kasir_program"
_UNIT_ROLLBACK = "ROLLBACK TO kasir_program"
_UNIT_RELEASE = "RELEASE kasir_program"


async def _discard(connection: AsyncConnection) -> None:
    """Roll back what the connection holds and close it."""
    try:
        with contextlib.suppress(Exception):
            await connection.rollback()
    finally:
        await connection.close()


def _futures_of(programs: list[tuple[Program, asyncio.Future[Any]]]) -> list[asyncio.Future[Any]]:
    return [done for _, done in programs]


def _run_programs(connection: sqlite3.Connection, programs: list[Program]) -> list[tuple[bool, Any]]:
    """Each program in a savepoint of its own: (True, its result), or (False, its exception) with its
    writes undone. A savepoint that cannot be undone raises: the batch fails."""
    outcomes: list[tuple[bool, Any]] = []
    for program in programs:
        connection.execute(_UNIT_SAVEPOINT)
        try:
            result = program(connection)
        except Exception as exc:
            connection.execute(_UNIT_ROLLBACK)
            connection.execute(_UNIT_RELEASE)
            outcomes.append((False, exc))
        else:
            connection.execute(_UNIT_RELEASE)
            outcomes.append((True, result))
    return outcomes


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
        try:
            if not ok:
                raw.execute(f"ROLLBACK TO {self._SAVEPOINT}")
            raw.execute(f"RELEASE {self._SAVEPOINT}")
        except BaseException as exc:
            # The shared transaction is in a state nobody can vouch for: the whole batch fails.
            await self.group.leave(joined=False, broken=exc)
            raise
        await self.group.leave(joined=ok)


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
    """BEGIN on the driver's cursor: through `exec_driver_sql` it cost every SQLite transaction ~40 µs
    of SQLAlchemy's execution machinery (a read-only unit of work is one such transaction). Errors
    come out as SQLAlchemy's, as they would from `exec_driver_sql`."""
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

    def __init__(self, turns: WriterTurns | None) -> None:
        super().__init__()
        self.turns = turns

    async def take_turn(self) -> None:
        if self.turns is None:
            return
        try:
            await self.turns.take(timeout=SQLITE_BUSY_SECONDS)
        except TimeoutError:
            message = f"database is locked: another process kept the write turn {SQLITE_BUSY_SECONDS:g} s"
            raise OperationalError("BEGIN IMMEDIATE", None, sqlite3.OperationalError(message)) from None

    def release(self) -> None:
        if self.turns is not None:
            self.turns.give_back()
        super().release()


def _read_connection(database: Database) -> Any:
    """A connection whose transactions start DEFERRED on SQLite: checks never wait for the write lock."""
    return database.engine.execution_options(sqlite_begin="DEFERRED").connect()


async def ping(database: Database) -> None:
    async with _read_connection(database) as connection:
        await connection.execute(text("SELECT 1"))


# --- schema version -----------------------------------------------------------------

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


class SchemaBehind(RuntimeError):
    """The database's schema is older than the code (or missing)."""


def alembic_config() -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def current_revision(database: Database) -> str | None:
    from alembic.runtime.migration import MigrationContext

    async with _read_connection(database) as connection:
        return await connection.run_sync(lambda sync: MigrationContext.configure(sync).get_current_revision())


async def upgrade_schema(database: Database, revision: str = "head") -> None:
    from alembic import command

    def _upgrade(sync_connection: Any) -> None:
        config = alembic_config()
        config.attributes["connection"] = sync_connection
        command.upgrade(config, revision)

    async with database.engine.begin() as connection:
        await connection.run_sync(_upgrade)


async def check_schema(database: Database) -> None:
    """Raise SchemaBehind with the command to run when the database is not at head."""
    current, head = await current_revision(database), head_revision()
    if current != head:
        found = current or "no schema"
        raise SchemaBehind(
            f"database schema is behind (found {found}, code needs {head}); run `kasir db upgrade` "
            "with the same KASIR_DATABASE_URL, then start again"
        )


# --- FastAPI dependencies: the request is the unit of work ---------------------------


async def write_session(request: Request) -> AsyncIterator[AsyncSession]:
    """A session committed when the endpoint returns, rolled back when it raises."""
    async with request.app.state.database.unit_of_work() as session:
        yield session


async def read_session(request: Request) -> AsyncIterator[AsyncSession]:
    async with request.app.state.database.unit_of_work(read_only=True) as session:
        yield session


# What endpoints declare. scope="function": the unit of work ends (commits) when the endpoint
# returns, BEFORE the response is sent; FastAPI's default would commit after the client already
# has the answer, so a merchant reading back at once could miss what it was just told exists.
WriteSession = Annotated[AsyncSession, Depends(write_session, scope="function")]
ReadSession = Annotated[AsyncSession, Depends(read_session, scope="function")]

"""The PostgreSQL strategy, for many processes and machines: asyncpg's public API.

- A queue of at most `KASIR_DB_POOL_SIZE` `asyncpg.Connection`s per event loop (`ConnectionQueue`).
  A unit of work takes a connection at its first statement (a request refused before it reads anything never
  waits for one) and gives it back at its end. Connections are handed out in the order units asked.
- A write unit is a transaction: BEGIN before its first statement, COMMIT at its end with the
  unit's `NOTIFY`s in the COMMIT's own round trip (PostgreSQL delivers them at commit, never on
  rollback). A read unit, or one asked for with `atomic=False`, runs in autocommit: no BEGIN and
  no COMMIT, each statement reads (or writes) what is committed when it runs.
- Statements are prepared once per connection by asyncpg's statement cache.
- Listeners (`listen`) hold a connection of their own with `LISTEN`.

Errors are asyncpg's exception types: a connection that failed or cannot be had, a server
shutting down or out of resources, a read-only database (a standby), a deadlock or serialization
failure is DatabaseUnavailable (an outage answer, the client retries); a lock timeout is
LockTimeout; anything else is a bug.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import asyncpg
from sqlalchemy import String, bindparam, func, select, true
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect
from sqlalchemy.engine import make_url

from kasir.config import Settings
from kasir.db.session import DatabaseUnavailable, LockTimeout, Session, run_after_commit
from kasir.db.wakeup import subscribe, wake

log = logging.getLogger("kasir.db")

DIALECT = asyncpg_dialect()
# How long a unit waits for a connection when every one is in use before it answers 503.
ACQUIRE_TIMEOUT_SECONDS = 30.0
# Prepared statements kept per connection: more than the distinct statements Kasir runs.
STATEMENT_CACHE_SIZE = 1024
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError,  # refused, reset, unreachable (ConnectionError is one)
    TimeoutError,  # no connection free in time, or a connect that did not answer
    asyncpg.PostgresConnectionError,  # class 08, a connection that no longer exists included
    asyncpg.InsufficientResourcesError,  # class 53: disk full, too many connections
    asyncpg.OperatorInterventionError,  # class 57: shutting down, starting up, statement cancelled
    asyncpg.TransactionRollbackError,  # class 40: deadlock, serialization failure: retry the request
    asyncpg.ReadOnlySQLTransactionError,  # 25006: a standby a failover left the URL on, or a database set read-only
)


_LEAVES_CONNECTION_USABLE = (asyncpg.PostgresError, asyncio.CancelledError)


def translated(error: BaseException) -> BaseException:
    if isinstance(error, asyncpg.LockNotAvailableError):
        return LockTimeout(f"PostgreSQL: {error}")
    if isinstance(error, _UNAVAILABLE):
        return DatabaseUnavailable(f"PostgreSQL: {type(error).__name__}: {error}")
    if isinstance(error, asyncpg.InternalClientError):
        # The connection is in a state its protocol cannot go on from (the server ended it while it was idle,
        # and asyncpg has not yet seen the socket close): the connection's fault, not the statement's.
        return DatabaseUnavailable(f"PostgreSQL: {error}")
    if isinstance(error, asyncpg.InterfaceError) and ("closed" in str(error) or "released" in str(error)):
        # The server ended the connection under the unit (a restart, a terminated backend): asyncpg has
        # closed it.
        return DatabaseUnavailable(f"PostgreSQL: {error}")
    return error


def dsn_of(url: str) -> str:
    """The libpq URL asyncpg takes, from Kasir's `postgresql+asyncpg://` setting."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class ConnectionQueue:
    """At most `size` connections of one event loop, handed to units in the order they asked.

    asyncpg's Pool costs a task or two per acquire and release (its timeout and its shielded reset),
    more than the unit's own statements on a short request; units need none of what it adds (they
    never change a connection's session state). A connection idle for IDLE_SECONDS is closed: a
    process at rest holds none.
    """

    IDLE_SECONDS = 300.0

    def __init__(self, dsn: str, size: int) -> None:
        self.dsn = dsn
        self.size = size
        self.open = 0  # connections made and not yet closed: in units, idle or being connected
        self.idle: list[tuple[asyncpg.Connection, float]] = []  # last in, first out: few stay warm
        self._waiters: collections.deque[asyncio.Future[asyncpg.Connection | None]] = collections.deque()
        self._reaper: asyncio.TimerHandle | None = None

    async def acquire(self) -> asyncpg.Connection:
        while self.idle:
            connection, _ = self.idle.pop()
            if not connection.is_closed():
                return connection
            self.open -= 1
        if self.open >= self.size:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(ACQUIRE_TIMEOUT_SECONDS):
                    handed = await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled() and waiter.result() is not None:
                    self.release(waiter.result())  # handed over as the wait ended: pass it on
                elif waiter.done() and not waiter.cancelled():
                    self._vacate()
                raise
            if handed is not None:
                return handed
        else:
            self.open += 1
        try:
            return await asyncpg.connect(self.dsn, statement_cache_size=STATEMENT_CACHE_SIZE)
        except BaseException:
            self._vacate()
            raise

    def release(self, connection: asyncpg.Connection) -> None:
        """Hand the connection to the unit that has waited longest, or keep it idle."""
        if connection.is_closed():
            self._vacate()
            return
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        self.idle.append((connection, time.monotonic()))
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().call_later(self.IDLE_SECONDS, self._close_idle)

    def _vacate(self) -> None:
        """A connection is gone: the unit that has waited longest may open one in its place."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.open -= 1

    def _close_idle(self) -> None:
        self._reaper = None
        cutoff = time.monotonic() - self.IDLE_SECONDS
        stale = [connection for connection, since in self.idle if since <= cutoff]
        self.idle = [(connection, since) for connection, since in self.idle if since > cutoff]
        for connection in stale:
            self.open -= 1
            connection.terminate()
        if self.idle:
            self._reaper = asyncio.get_running_loop().call_later(self.IDLE_SECONDS, self._close_idle)

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        idle, self.idle = self.idle, []
        for connection, _ in idle:
            self.open -= 1
            with contextlib.suppress(Exception):
                await connection.close()


class PostgresStrategy:
    dialect = DIALECT

    def __init__(self, settings: Settings, url: str) -> None:
        self.url = url
        self.dsn = dsn_of(url)
        self.pool_size = settings.db_pool_size
        self._queues: dict[asyncio.AbstractEventLoop, ConnectionQueue] = {}

    def connections(self) -> ConnectionQueue:
        """This event loop's connections (tests and the CLI run several loops)."""
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = ConnectionQueue(self.dsn, self.pool_size)
        return queue

    def unit_of_work(self, *, read_only: bool, atomic: bool) -> AbstractAsyncContextManager[Session]:
        return _Unit(self, autocommit=read_only or not atomic)

    async def current_revision(self) -> str | None:
        async with self.unit_of_work(read_only=True, atomic=True) as session:
            found = await session.fetch_rows("SELECT to_regclass('alembic_version') IS NOT NULL", (), first=True)
            if not found or not found[0][0]:
                return None
            rows = await session.fetch_rows("SELECT version_num FROM alembic_version", (), first=True)
            return str(rows[0][0]) if rows else None

    async def listen(self, channel: str, on_wake: Callable[[], None]) -> Callable[[], None]:
        """Call `on_wake` after every commit that notifies `channel`, in this process or another."""
        unsubscribe = subscribe(channel, on_wake)
        task = asyncio.get_running_loop().create_task(self._listen(channel, on_wake))

        def stop() -> None:
            unsubscribe()
            task.cancel()

        return stop

    async def _listen(self, channel: str, on_wake: Callable[[], None]) -> None:
        while True:
            connection: Any = None
            try:
                connection = await asyncpg.connect(self.dsn)
                await connection.add_listener(channel, lambda *_args: on_wake())
                # A commit between the listener's last look and this LISTEN notified no one: look once more.
                on_wake()
                while not connection.is_closed():
                    await asyncio.sleep(5)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("LISTEN %s connection lost; polling until it is back", channel)
                await asyncio.sleep(2)
            finally:
                if connection is not None and not connection.is_closed():
                    with contextlib.suppress(Exception):
                        await connection.close()

    async def dispose(self) -> None:
        queues, self._queues = self._queues, {}
        queue = queues.get(asyncio.get_running_loop())  # a loop that has ended took its connections with it
        if queue is not None:
            await queue.close()


class PostgresSession(Session):
    __slots__ = ("autocommit", "broken", "connection", "queue", "strategy")

    dialect = DIALECT

    def __init__(self, strategy: PostgresStrategy, *, autocommit: bool) -> None:
        super().__init__()
        self.strategy = strategy
        self.autocommit = autocommit
        self.queue: ConnectionQueue | None = None
        self.connection: asyncpg.Connection | None = None
        # A statement ended by anything but the server's own error or a cancellation (a lost connection,
        # a driver's refusal) may leave the connection mid-exchange: it is closed, not reused. After a
        # cancellation asyncpg has asked the server to stop the statement, and the ROLLBACK at the unit's
        # end waits for that: the connection is clean again, and the server is not left running it.
        self.broken = False

    async def _connect(self) -> asyncpg.Connection:
        """The unit's connection, taken at its first statement; in a transaction unless in autocommit."""
        queue = self.queue = self.strategy.connections()
        for last_try in (False, True):
            try:
                connection = await queue.acquire()
            except BaseException as error:
                raise translated(error) from error
            self.connection = connection
            if self.autocommit:
                return connection
            try:
                await self._execute("BEGIN")
                return connection
            except DatabaseUnavailable:
                # An idle connection the server ended meanwhile (a restart, a terminated backend): nothing
                # of the unit has run on it, so it is closed and the unit begins on another.
                self.connection, self.broken = None, False
                connection.terminate()
                queue.release(connection)
                if last_try:
                    raise
        raise AssertionError("unreachable")

    async def _execute(self, sql: str) -> None:
        assert self.connection is not None
        try:
            await self.connection.execute(sql)
        except BaseException as error:
            self.broken = self.broken or not isinstance(error, _LEAVES_CONNECTION_USABLE)
            if isinstance(error, asyncio.CancelledError):
                raise
            raise translated(error) from error

    async def fetch_rows(self, sql: str, values: Sequence[Any], *, first: bool = False) -> Sequence[Sequence[Any]]:
        connection = self.connection or await self._connect()
        try:
            if first:
                found = await connection.fetchrow(sql, *values)
                return () if found is None else (found,)
            return await connection.fetch(sql, *values)
        except BaseException as error:
            self.broken = self.broken or not isinstance(error, _LEAVES_CONNECTION_USABLE)
            if isinstance(error, asyncio.CancelledError):
                raise
            if connection.is_closed():  # whatever the driver said, the server went away under the statement
                raise DatabaseUnavailable(f"PostgreSQL: the connection was lost ({type(error).__name__})") from error
            raise translated(error) from error

    async def count_rows(self, sql: str, values: Sequence[Any]) -> int:
        # kasir.db.statements gives a statement that changes rows `RETURNING 1`: one row per row changed.
        return len(await self.fetch_rows(sql, values))

    async def rollback(self) -> None:
        if self.connection is not None and not self.autocommit:
            await self._execute("ROLLBACK; BEGIN")

    def lock_wait(self, seconds: float) -> AbstractAsyncContextManager[None]:
        return self._lock_wait(seconds)

    @asynccontextmanager
    async def _lock_wait(self, seconds: float) -> AsyncIterator[None]:
        await self.fetch_rows(f"SET LOCAL lock_timeout = {milliseconds(seconds)}", ())
        yield
        await self.fetch_rows("SET LOCAL lock_timeout TO DEFAULT", ())

    async def commit(self) -> None:
        # Quoted, as asyncpg's add_listener quotes the channel it listens on.
        notify = "".join(f'NOTIFY "{channel}"; ' for channel in sorted(self.channels))
        if self.autocommit:
            if notify:
                await self._execute(notify)
        else:
            await self._execute(f"{notify}COMMIT")

    async def release(self, *, failed: bool) -> None:
        connection, self.connection = self.connection, None
        if connection is None or self.queue is None:
            return
        try:
            if self.broken:
                connection.terminate()
            elif failed and not connection.is_closed() and connection.is_in_transaction():
                await connection.execute("ROLLBACK")
        except BaseException as error:
            connection.terminate()  # lost, cancelled mid-ROLLBACK, or in a state nobody can vouch for
            if not isinstance(error, Exception):
                raise
        finally:
            self.queue.release(connection)  # a closed one is replaced by the next unit that needs one


class _Unit:
    """`async with _Unit(...) as session`: committed on success, rolled back on any exception, the
    after-commit actions run after the commit."""

    __slots__ = ("autocommit", "session", "strategy")

    def __init__(self, strategy: PostgresStrategy, *, autocommit: bool) -> None:
        self.strategy = strategy
        self.autocommit = autocommit

    async def __aenter__(self) -> Session:
        self.session = PostgresSession(self.strategy, autocommit=self.autocommit)
        return self.session

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        session = self.session
        if exc_type is not None:
            await session.release(failed=True)
            return
        try:
            if session.connection is not None:
                await session.commit()
            elif session.channels:
                await session.fetch_rows("SELECT 1", ())  # a unit that notifies without a statement
                await session.commit()
        except BaseException:
            await session.release(failed=True)
            raise
        await session.release(failed=False)
        for channel in session.channels:
            wake(channel)  # this process's listeners, at once
        await run_after_commit(session.after_commit)


def milliseconds(seconds: float) -> str:
    """A wait as `lock_timeout` takes it (whole milliseconds; 0 would mean no limit)."""
    return str(max(1, int(seconds * 1000)))


def insert_waiting(table: Any, values: dict[str, Any], index_elements: Sequence[str]) -> Any:
    """kasir.db.InsertUnlessTaken's statement: the row's INSERT with `lock_timeout` set to the
    `lock_wait` parameter while it goes in, and set back in its RETURNING clause.

        WITH kasir_wait AS MATERIALIZED (
            SELECT before, set_config('lock_timeout', :lock_wait, true)
            FROM (SELECT current_setting('lock_timeout') AS before OFFSET 0) AS kasir_before)
        INSERT INTO t (...) SELECT :a, :b, ... FROM kasir_wait ON CONFLICT (...) DO NOTHING
        RETURNING set_config('lock_timeout', (SELECT before FROM kasir_wait), true)

    The row is made from kasir_wait, so the timeout is set before PostgreSQL looks for a
    conflicting row (and waits); OFFSET 0 keeps the old value read in a subquery of its own,
    before the set. RETURNING runs only for a row that went in.
    """
    before = select(func.current_setting("lock_timeout").label("before")).offset(0).subquery("kasir_before")
    during = func.set_config("lock_timeout", bindparam("lock_wait", type_=String()), true())
    wait = select(before.c.before, during.label("during")).cte("kasir_wait").prefix_with("MATERIALIZED")
    rows = select(*(value.label(name) for name, value in values.items())).select_from(wait)
    restore = func.set_config("lock_timeout", select(wait.c.before).scalar_subquery(), true())
    return (
        postgresql_insert(table)
        .from_select(list(values), rows)
        .on_conflict_do_nothing(index_elements=index_elements)
        .returning(restore)
    )

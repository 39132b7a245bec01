"""The PostgreSQL unit of work on a pooled connection, with SQLAlchemy's session only where the ORM is used.

A unit of work through SQLAlchemy's session (`kasir.db.unit.session_unit_of_work`) crosses into
SQLAlchemy's greenlet to connect, again to commit and to close, and sets up the session's
transaction, connection and pool bookkeeping each time: more of the server's time than the
unit's statements themselves when those are kasir.db statements (`Statement`), which run on
the asyncpg connection directly. This unit:

- checks a connection out of the engine's pool (the same pool, events and ping as the ORM's);
- begins the transaction at the first kasir.db statement and commits or rolls it back on asyncpg,
  sending the unit's notifications (`notify_after_commit`) in the COMMIT's own round trip;
- gives the rooms an `AsyncSession` as ever. The first time the ORM needs the database (a query,
  a flush) the session is given a `Connection` over the unit's pooled connection: ORM and
  kasir.db statements share one transaction, in the order they run, and the session's commit
  commits it whole.

Under load a unit's connection and session go to the next unit without SQLAlchemy in between: a
connection given back is kept a moment (`Turns.keep`) for the next unit that takes a turn, and
goes back to the pool when none takes it within `SPARE_SECONDS`; a session, cleared, serves
the next unit. Checking a connection out of SQLAlchemy's pool (its fairy, events and reset)
and making a session cost more than a one-statement unit's own work on the connection.

A unit in autocommit (a read unit, or one whose statements need not stand or fall together:
`Database.unit_of_work(atomic=False)`) puts the connection in autocommit for its time: no BEGIN
and no COMMIT, each statement is a transaction of its own and reads what is committed when it runs.

The parts of SQLAlchemy's asyncpg adapter used here (`_transaction`, `_connection`, `autocommit`,
`_handle_exception`) are among those `kasir.db.postgres.ADAPTER_PARTS` names; the strategy uses
this unit only when `asyncpg_path_supported` says the adapter has them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from types import TracebackType
from typing import Any

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import Session
from sqlalchemy.pool import QueuePool
from sqlalchemy.util import await_, greenlet_spawn

from kasir.db.unit import run_after_commit

log = logging.getLogger("kasir.db")

# How long a connection a unit gave back waits for the next unit before it goes back to SQLAlchemy's
# pool: far below the pool's idle ping (kasir.db.postgres), and long enough that at any steady rate of
# units the next one comes first. Code that takes connections from the engine itself (a migration, a
# test's tables) waits at most this long for one.
SPARE_SECONDS = 0.05
# Sessions kept cleared for the next units (as kasir.db.sqlite keeps its read sessions).
IDLE_SESSIONS_MAX = 256


class UnitSession(Session):
    """The sync session of a `PooledUnit`: whatever it runs goes to the unit's connection."""

    kasir_unit: PooledUnit | None = None

    def get_bind(self, mapper: Any = None, *, clause: Any = None, bind: Any = None, **kw: Any) -> Any:
        unit = self.kasir_unit
        if unit is None or bind is not None:
            return super().get_bind(mapper, clause=clause, bind=bind, **kw)
        return unit.orm_connection()


def unit_sessions(engine: Any) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False, sync_session_class=UnitSession)


class PooledUnit:
    """`async with PooledUnit(...) as session`: committed on success, rolled back on any exception,
    the after-commit actions run after the commit. The connection is checked out when the unit's
    first statement needs it (a request refused before it reads anything never waits for the
    pool) and goes back to the pool when the unit ends, either way."""

    __slots__ = (
        "_connection",
        "adapter",
        "autocommit",
        "broken",
        "engine",
        "fairy",
        "idle_sessions",
        "session",
        "sessions",
        "turn",
        "turns",
    )

    def __init__(
        self,
        engine: Engine,
        sessions: async_sessionmaker[AsyncSession],
        turns: Turns,
        *,
        autocommit: bool,
        idle_sessions: list[AsyncSession],
    ) -> None:
        self.engine = engine
        self.sessions = sessions
        self.idle_sessions = idle_sessions  # the strategy's: cleared sessions the next units take
        self.turns = turns
        self.turn: asyncio.Semaphore | None = None
        self.autocommit = autocommit
        self.fairy: Any = None
        self.adapter: Any = None
        self._connection: Connection | None = None
        self.broken = False

    async def __aenter__(self) -> AsyncSession:
        idle = self.idle_sessions
        session = self.session = idle.pop() if idle else self.sessions()
        sync_session: Any = session.sync_session
        sync_session.kasir_unit = self
        return session

    async def connected_adapter(self) -> Any:
        """SQLAlchemy's asyncpg adapter of the unit's connection (on first use: one a unit just gave
        back, or one checked out of the pool), in the unit's transaction (its first statement begins
        it) unless the unit is in autocommit."""
        if self.fairy is None:
            turn = await self.turns.take()
            try:
                self._hold(self.turns.spare() or await checkout(self.engine), turn)
            except BaseException:
                turn.release()
                raise
        if self.adapter._transaction is None and not self.autocommit:
            await self._begin()
        return self.adapter

    async def _begin(self) -> None:
        connection = self.adapter._connection
        try:
            await connection.execute("BEGIN")
        except Exception as error:
            raise translated(self.adapter, self.engine.dialect, "BEGIN", (), error) from error
        self.adapter._transaction = UnitTransaction(connection)

    async def notify_at_commit(self, channel: str) -> bool:
        """Send `NOTIFY channel` with the unit's COMMIT, in its round trip; False (nothing done) when
        the unit has no transaction of its own to carry it (in autocommit, or one the ORM began)."""
        if self.autocommit:
            return False
        transaction = (await self.connected_adapter())._transaction
        if not isinstance(transaction, UnitTransaction):
            return False
        transaction.channels.add(channel)
        return True

    def orm_connection(self) -> Connection:
        """The unit's pooled connection as SQLAlchemy's `Connection`, made when the ORM first needs it
        (in SQLAlchemy's greenlet, where a checkout may wait on the loop)."""
        if self._connection is None:
            if self.fairy is None:
                turn = await_(self.turns.take())
                try:
                    self._hold(self.turns.spare() or checkout_in_greenlet(self.engine), turn)
                except BaseException:
                    turn.release()
                    raise
            self._connection = Connection(self.engine, connection=self.fairy)
        return self._connection

    def _hold(self, fairy: Any, turn: asyncio.Semaphore) -> None:
        self.fairy = fairy
        self.turn = turn
        self.adapter = fairy.dbapi_connection
        if self.autocommit:
            self.adapter.autocommit = True  # the adapter's own switch: no transaction is begun

    def _orm_used(self) -> bool:
        sync_session = self.session.sync_session
        return self._connection is not None or sync_session._transaction is not None

    def _in_transaction(self) -> bool:
        return self.adapter is not None and self.adapter._transaction is not None

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        committed = False
        try:
            if exc_type is None:
                try:
                    await self._commit()
                except BaseException:
                    await self._rollback_after_failure()
                    raise
                committed = True
            else:
                await self._rollback_after_failure()
        finally:
            await self._release()
        if committed:
            await run_after_commit(self.session)
        await self._recycle_session()

    async def _recycle_session(self) -> None:
        """Clear the session for the next unit. One the ORM used is closed already (`_release`: what it
        loaded is let go, usable and detached); what the rooms kept in its `info` is forgotten here."""
        sync_session: Any = self.session.sync_session
        sync_session.kasir_unit = None
        sync_session.info.clear()
        if len(self.idle_sessions) < IDLE_SESSIONS_MAX:
            self.idle_sessions.append(self.session)

    async def _commit(self) -> None:
        if self._orm_used():
            await self.session.commit()  # flushes, and commits the connection's transaction (ours too)
        if self._in_transaction():
            await end_transaction(self.adapter, self.engine.dialect, commit=True)

    async def rollback(self) -> None:
        """Undo what the unit wrote so far; a statement after it begins a new transaction."""
        if self.session.sync_session._transaction is not None:
            await self.session.rollback()
        if self._in_transaction():
            await end_transaction(self.adapter, self.engine.dialect, commit=False)

    async def _rollback_after_failure(self) -> None:
        """Roll back after the unit or its commit failed; the failure is what the caller sees. A rollback
        that fails too (the server gone, a cancelled statement) leaves the connection in a state nobody
        knows: it is closed, not given back."""
        try:
            await self.rollback()
        except Exception:
            log.warning("rollback failed; the connection is closed", exc_info=True)
            self.broken = True

    async def _release(self) -> None:
        """Give the connection back to the pool; one whose state is unknown is closed instead, and its
        place in the pool connects anew when next checked out."""
        try:
            if self._orm_used():
                await self.session.close()
        finally:
            if self.fairy is not None:
                try:
                    await self._give_back()
                finally:
                    if self.turn is not None:
                        self.turn.release()

    async def _give_back(self) -> None:
        if self.autocommit:
            self.adapter.autocommit = False
        healthy = not self.broken and not self._in_transaction() and not self.adapter._connection.is_closed()
        if not healthy:
            await greenlet_spawn((self._connection or self.fairy).invalidate)
        if self._connection is not None:
            await greenlet_spawn(self._connection.close)  # gives the pooled connection back
        elif healthy:
            self.turns.keep(self.fairy, self.engine)  # for the next unit, or back to the pool soon


class Turns:
    """Connections for units in the order they asked, and the connections units gave back a moment ago.

    The pool's own wait (an asyncio.Queue) lets a unit that asks just as a connection comes back
    take it ahead of one that has waited, which goes to the back of the line: at more concurrent
    requests than connections some waited many times longer than the rest. asyncio.Semaphore
    serves its waiters first come, first served; with as many turns as the pool has connections
    no unit waits in the pool itself. A unit waits at most the pool's timeout, then gets the
    pool's error (503 with Retry-After), as it would have from the pool.

    A connection a unit gives back whole is kept for the next unit that takes a turn (`keep`,
    `spare`): under load it goes from unit to unit without a check-in and a check-out of
    SQLAlchemy's pool. One no unit takes within SPARE_SECONDS goes back to the pool, so that a
    process at rest holds none and code that asks the engine itself gets one.
    """

    def __init__(self, size: int, timeout: float) -> None:
        self.size = size
        self.timeout = timeout
        self._state: _LoopTurns | None = None

    async def take(self) -> asyncio.Semaphore:
        """Wait for a turn (released by the caller when its connection is given back)."""
        turn = self.current()
        if not turn.locked():
            await turn.acquire()  # free: no wait, and no timer to set up
            return turn
        try:
            # Not asyncio.wait_for: on Python 3.11 it wraps the wait in a task of its own, and at more
            # concurrent requests than connections nearly every unit of work waits here.
            async with asyncio.timeout(self.timeout):
                await turn.acquire()
        except TimeoutError:
            raise PoolTimeout(
                f"no database connection came free within {self.timeout:g} seconds "
                f"(KASIR_DB_POOL_SIZE={self.size} per process)"
            ) from None
        return turn

    def current(self) -> asyncio.Semaphore:
        """The turns of the running event loop (a semaphore belongs to one loop)."""
        return self._loop_state().turns

    @property
    def spares(self) -> int:
        """How many connections given back wait for a unit now."""
        return 0 if self._state is None else len(self._state.spares)

    def spare(self) -> Any:
        """A connection a unit gave back a moment ago (the latest), or None."""
        spares = self._loop_state().spares
        return spares.pop()[0] if spares else None

    def keep(self, fairy: Any, engine: Engine) -> None:
        """Keep a connection given back whole (no transaction open) for the next unit."""
        state = self._loop_state()
        state.spares.append((fairy, time.monotonic()))
        if state.drain is None:
            state.drain = state.loop.call_later(SPARE_SECONDS, self._drain, state, engine)

    def _drain(self, state: _LoopTurns, engine: Engine) -> None:
        """Give the pool the connections no unit took in time; look again later for the rest."""
        state.drain = None
        spares = state.spares
        given_back_before = time.monotonic() - SPARE_SECONDS
        while spares and spares[0][1] <= given_back_before:
            fairy, _ = spares.popleft()
            _check_in_soon(engine, fairy, state.loop)
        if spares:
            state.drain = state.loop.call_later(SPARE_SECONDS, self._drain, state, engine)

    async def give_back_spares(self, engine: Engine) -> None:
        """Every kept connection back to the pool now (before the engine is disposed of)."""
        state = self._state
        if state is None or state.loop is not asyncio.get_running_loop():
            return
        if state.drain is not None:
            state.drain.cancel()
            state.drain = None
        while state.spares:
            fairy, _ = state.spares.popleft()
            await checkin(engine, fairy)

    def _loop_state(self) -> _LoopTurns:
        loop = asyncio.get_running_loop()
        state = self._state
        if state is None or state.loop is not loop:
            if state is not None:
                state.forget()
            state = self._state = _LoopTurns(loop, asyncio.Semaphore(self.size))
        return state


class _LoopTurns:
    """One event loop's turns and kept connections (asyncpg's connections belong to one loop too)."""

    __slots__ = ("drain", "loop", "spares", "turns")

    def __init__(self, loop: asyncio.AbstractEventLoop, turns: asyncio.Semaphore) -> None:
        self.loop = loop
        self.turns = turns
        self.spares: deque[tuple[Any, float]] = deque()  # (fairy, when it was given back)
        self.drain: asyncio.TimerHandle | None = None

    def forget(self) -> None:
        """The loop these belong to is no longer the running one: close what it kept, as best it can."""
        if self.drain is not None:
            self.drain.cancel()
        while self.spares:
            fairy, _ = self.spares.popleft()
            with contextlib.suppress(Exception):
                fairy.invalidate()


_CHECKING_IN: set[asyncio.Task[Any]] = set()  # a task the loop holds only weakly must be held here


def _check_in_soon(engine: Engine, fairy: Any, loop: asyncio.AbstractEventLoop) -> None:
    """`checkin` from a timer's callback: at once when the pool keeps the connection, else in a task."""
    if _pool_keeps(engine):
        fairy.close()
        return
    task = loop.create_task(greenlet_spawn(fairy.close))
    _CHECKING_IN.add(task)
    task.add_done_callback(_CHECKING_IN.discard)


class UnitTransaction:
    """A pooled unit's transaction on its asyncpg connection, in the adapter's place for asyncpg's own
    (SQLAlchemy's adapter commits and rolls back whatever it holds): BEGIN, and a COMMIT that carries
    the unit's notifications in the same simple query."""

    __slots__ = ("channels", "connection")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.channels: set[str] = set()

    async def commit(self) -> None:
        notify = "".join(f"NOTIFY {channel}; " for channel in sorted(self.channels))
        await self.connection.execute(notify + "COMMIT")

    async def rollback(self) -> None:
        await self.connection.execute("ROLLBACK")


async def checkout(engine: Engine) -> Any:
    """A connection from the engine's pool (a new connection or a ping waits on the loop: in the greenlet)."""
    return await greenlet_spawn(checkout_in_greenlet, engine)


def checkout_in_greenlet(engine: Engine) -> Any:
    """A connection from the engine's pool, with the errors SQLAlchemy's `Connection` raises for it."""
    try:
        return engine.pool.connect()
    except engine.dialect.loaded_dbapi.Error as error:
        Connection._handle_dbapi_exception_noconnection(error, engine.dialect, engine)
        raise


async def checkin(engine: Engine, fairy: Any) -> None:
    """Give a connection without an open transaction back to the pool.

    Nothing to reset, so no round trip: outside SQLAlchemy's greenlet. A pool that would close the
    connection instead of keeping it (one full already, or not a QueuePool) gets it inside the
    greenlet: asyncpg's close waits on the loop, and outside it the connection would be left open.
    """
    if _pool_keeps(engine):
        fairy.close()
    else:
        await greenlet_spawn(fairy.close)


def _pool_keeps(engine: Engine) -> bool:
    """Whether the pool keeps a connection given back (a QueuePool with room), rather than closing it."""
    pool = engine.pool
    return isinstance(pool, QueuePool) and pool.checkedin() < pool.size()


async def end_transaction(adapter: Any, dialect: Any, *, commit: bool) -> None:
    """COMMIT or ROLLBACK the adapter's transaction on asyncpg; it is over either way (as the adapter's own)."""
    transaction = adapter._transaction
    adapter._transaction = None
    try:
        await (transaction.commit() if commit else transaction.rollback())
    except Exception as error:
        raise translated(adapter, dialect, "COMMIT" if commit else "ROLLBACK", (), error) from error


def translated(adapter: Any, dialect: Any, sql: str, values: Any, error: Exception) -> Exception:
    """asyncpg's `error` as SQLAlchemy's exception (IntegrityError, OperationalError...), parameters hidden."""
    try:
        adapter._handle_exception(error)  # raises the DB-API error SQLAlchemy would see
    except Exception as dbapi_error:
        return DBAPIError.instance(
            sql, values, dbapi_error, dialect.loaded_dbapi.Error, hide_parameters=True, dialect=dialect
        )
    return error

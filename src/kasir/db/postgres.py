"""The PostgreSQL strategy: for many processes and machines.

- asyncpg through a SQLAlchemy pool; every unit of work is a transaction of its own, on a pooled
  connection, with SQLAlchemy's session only where the ORM is used (kasir.db.postgres_unit).
- After-commit wake-ups reach other processes through `NOTIFY <channel>` sent inside the
  transaction (with its COMMIT; PostgreSQL delivers it at commit, never on rollback) and
  `LISTEN` connections.
- kasir.db statements run on SQLAlchemy's asyncpg adapter directly (`asyncpg_adapter`): the
  statement is prepared in the adapter's cache and asyncpg's errors are translated as SQLAlchemy
  translates them. Those are private parts of SQLAlchemy's asyncpg dialect, so the path is taken
  only when the adapter has them as this module knows them (`ADAPTER_PARTS`); the SQLAlchemy
  version is pinned in pyproject.toml, and tests/db/test_statements.py and
  tests/db/test_postgres_unit.py fail when they change.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import String, bindparam, event, func, select, text, true
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from kasir.config import Settings
from kasir.db.postgres_unit import PooledUnit, Turns, translated, unit_sessions
from kasir.db.unit import on_commit, session_unit_of_work
from kasir.db.wakeup import subscribe, wake

log = logging.getLogger("kasir.db")

_LOCK_NOT_AVAILABLE = "55P03"  # SQLSTATE of a lock_timeout


class PostgresStrategy:
    def __init__(self, settings: Settings, url: str) -> None:
        self.url = url
        # Statement parameters never reach a log line or an exception message (merchant data, hashes, tokens).
        self.engine: AsyncEngine = create_async_engine(
            url,
            hide_parameters=True,
            pool_size=settings.db_pool_size,
            max_overflow=0,  # the pool size is the most: a unit past it waits for a connection
        )
        _ping_when_idle(self.engine)
        self._sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        # Read units run in autocommit: no BEGIN and no COMMIT to send (two round trips of an inquiry's
        # three), no write transaction; each statement reads what is committed when it runs, as every
        # statement of a READ COMMITTED transaction would. So do units that are not atomic: each of
        # their statements commits by itself.
        self._autocommit_sessions = async_sessionmaker(
            self.engine.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False
        )
        # Units on a pooled connection (kasir.db.postgres_unit) where the adapter is the one known here;
        # else through the session, as SQLAlchemy does it.
        self._pooled = self.engine.dialect.driver == "asyncpg" and asyncpg_path_supported(
            _adapter_type(), cast(Any, type(self.engine.dialect))
        )
        self._unit_sessions = unit_sessions(self.engine)
        self._idle_sessions: list[AsyncSession] = []  # the pooled units' sessions, cleared for the next
        self._turns = Turns(settings.db_pool_size, timeout=self.engine.sync_engine.pool.timeout())  # type: ignore[attr-defined]

    def unit_of_work(self, *, read_only: bool, atomic: bool) -> AbstractAsyncContextManager[AsyncSession]:
        autocommit = read_only or not atomic
        if self._pooled:
            return PooledUnit(
                self.engine.sync_engine,
                self._unit_sessions,
                self._turns,
                autocommit=autocommit,
                idle_sessions=self._idle_sessions,
            )
        return session_unit_of_work(self._autocommit_sessions if autocommit else self._sessions)

    @property
    def spare_connections(self) -> int:
        """Connections units gave back a moment ago, kept for the next units (kasir.db.postgres_unit.Turns)."""
        return self._turns.spares

    async def listen(self, channel: str, on_wake: Callable[[], None]) -> Callable[[], None]:
        """Call `on_wake` after every commit that notifies `channel`, in this process or another."""
        unsubscribe = subscribe(channel, on_wake)
        task = asyncio.get_running_loop().create_task(self._listen(channel, on_wake))

        def stop() -> None:
            unsubscribe()
            task.cancel()

        return stop

    async def _listen(self, channel: str, on_wake: Callable[[], None]) -> None:
        import asyncpg

        dsn = make_url(self.url).set(drivername="postgresql").render_as_string(hide_password=False)
        while True:
            connection: Any = None
            try:
                connection = await asyncpg.connect(dsn)
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
        await self._turns.give_back_spares(self.engine.sync_engine)
        await self.engine.dispose()


# A connection idle longer than this is checked (a ping) before it is used again.
PING_AFTER_IDLE_SECONDS = 10.0


def _ping_when_idle(engine: AsyncEngine) -> None:
    """Ping a pooled connection at check-out only when it sat idle: not on every unit of work.

    SQLAlchemy's `pool_pre_ping` checks every check-out with BEGIN, an empty query and ROLLBACK:
    three round trips, more than a wallet payment's own. A connection in steady use was answering
    a moment ago; one that sat idle may have been cut (a server restart, a firewall's idle timeout)
    and is checked. A busy connection the server dropped fails its unit of work once (503, retried
    by the client); SQLAlchemy then invalidates the pool, so the connections after it are new.
    """

    @event.listens_for(engine.sync_engine.pool, "connect")
    def _on_connect(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine.sync_engine.pool, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine.sync_engine.pool, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get("idle_since", 0.0) <= PING_AFTER_IDLE_SECONDS:
            return
        try:
            dbapi_connection.ping()
        except Exception as error:
            raise DisconnectionError("a pooled connection did not answer its ping") from error  # the pool retries


# --- what kasir.db asks of a PostgreSQL session ------------------------------------------


async def _run(session: AsyncSession, sql: str) -> None:
    """A fixed statement without parameters on the unit's connection, as kasir.db statements run:
    on the asyncpg adapter, without SQLAlchemy's execution machinery (or through it, when the
    adapter is not the one this module knows)."""
    adapter = await asyncpg_adapter(session)
    if adapter is None:
        await session.execute(text(sql))
        return
    bind = session.sync_session.bind
    assert bind is not None, "sessions are made bound to the engine"
    await run_on_adapter(adapter, bind.dialect, sql, ())


async def rollback_unit(session: AsyncSession) -> None:
    """Undo what the unit wrote so far; it goes on in a new transaction."""
    unit = getattr(session.sync_session, "kasir_unit", None)
    if unit is not None:
        await unit.rollback()
    else:
        await session.rollback()


async def notify_after_commit(session: AsyncSession, channel: str) -> None:
    assert channel.isidentifier(), "channels are names written into the statement"
    on_commit(session, lambda: wake(channel))  # this process's listeners, at once
    unit = getattr(session.sync_session, "kasir_unit", None)
    if unit is not None and await unit.notify_at_commit(channel):
        return  # other processes', sent with the COMMIT
    await _run(session, f"NOTIFY {channel}")  # other processes', at commit


def milliseconds(seconds: float) -> str:
    """A wait as `lock_timeout` takes it (whole milliseconds; 0 would mean no limit)."""
    return str(max(1, int(seconds * 1000)))


@asynccontextmanager
async def lock_wait_at_most(session: AsyncSession, seconds: float) -> AsyncIterator[None]:
    """Statements of the block wait at most `seconds` for a row another transaction holds."""
    await _run(session, f"SET LOCAL lock_timeout = {milliseconds(seconds)}")
    yield
    await _run(session, "SET LOCAL lock_timeout TO DEFAULT")


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


def is_lock_timeout(error: BaseException) -> bool:
    original = getattr(error, "orig", None)
    code = getattr(original, "sqlstate", None) or getattr(original, "pgcode", None)
    return isinstance(error, DBAPIError) and code == _LOCK_NOT_AVAILABLE


async def asyncpg_adapter(session: AsyncSession) -> Any:
    """SQLAlchemy's asyncpg connection adapter of the session's transaction (flushing the ORM first), or
    None when the adapter is not the one this module knows."""
    sync_session = session.sync_session
    if not sync_session._is_clean():
        await session.flush()
    unit = getattr(sync_session, "kasir_unit", None)
    if unit is not None:
        return await unit.connected_adapter()
    # One look-up per transaction: `session.connection()` crosses into SQLAlchemy's greenlet and its
    # transaction bookkeeping each time, which costs more than a statement's own work here. The
    # connection is the transaction's until it ends; a new transaction (after a rollback) looks again.
    transaction = sync_session._transaction
    cached = sync_session.info.get("kasir_adapter")
    if cached is not None and cached[0] is transaction and transaction is not None and transaction.is_active:
        return cached[1]
    connection = await session.connection()
    adapter: Any = connection.sync_connection.connection.dbapi_connection  # type: ignore[union-attr]
    adapter_type: Any = type(adapter)
    dialect_type: Any = type(connection.dialect)
    adapter = adapter if asyncpg_path_supported(adapter_type, dialect_type) else None
    sync_session.info["kasir_adapter"] = (sync_session._transaction, adapter)
    return adapter


ADAPTER_PARTS = (
    "_execute_mutex",
    "_transaction",
    "_start_transaction",
    "_prepare",
    "_handle_exception",
    "_connection",
    "autocommit",
)


def _adapter_type() -> Any:
    from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection

    return AsyncAdapt_asyncpg_connection


@lru_cache(maxsize=4)
def asyncpg_path_supported(adapter_type: Any, dialect_type: Any) -> bool:
    """Whether SQLAlchemy's asyncpg adapter has the private parts `run_on_adapter` uses, as it uses them."""
    if not all(hasattr(adapter_type, name) for name in ADAPTER_PARTS):  # slots count: they are class attributes
        return False
    if not hasattr(dialect_type, "_invalidate_schema_cache_asof"):
        return False
    prepare = inspect.signature(adapter_type._prepare)
    return list(prepare.parameters) == ["self", "operation", "invalidate_timestamp"]


async def run_on_adapter(adapter: Any, dialect: Dialect, sql: str, values: Any) -> tuple[list[Any], str]:
    """Run `sql` on the asyncpg connection of the session's transaction: (records, status message)."""
    async with adapter._execute_mutex:
        try:
            if adapter._transaction is None:
                await adapter._start_transaction()
            statement, _ = await adapter._prepare(sql, dialect._invalidate_schema_cache_asof)  # type: ignore[attr-defined]
            records = await statement.fetch(*values)
        except Exception as error:
            raise translated(adapter, dialect, sql, values, error) from error
    return records, statement.get_statusmsg() or ""

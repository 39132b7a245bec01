"""The one Database: units of work, after-commit notification, schema version.

Services never commit. The request (or worker task) boundary opens a unit of work, which
commits on success and rolls back on any exception; actions registered with `on_commit()`
run only after a successful commit. How that is done is the strategy's business:

- `kasir.db.sqlite`: the embedded file, statements inline on the event loop, group commit.
- `kasir.db.postgres`: asyncpg through a pool, a transaction per unit, LISTEN/NOTIFY.

Nothing outside this package names a dialect or a driver.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends
from sqlalchemy import text
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from starlette.requests import Request

from kasir.config import Settings
from kasir.db import postgres, sqlite
from kasir.db.postgres import PostgresStrategy
from kasir.db.sqlite import SqliteStrategy
from kasir.db.statements import Statement, binds

log = logging.getLogger("kasir.db")

# What a database that cannot be reached or is overloaded raises: every route answers it with
# 503 and Retry-After in its own wire format (kasir.errors). An OperationalError can also be a
# bug; the handler logs it with its cause so it does not pass for an outage.
UNAVAILABLE: tuple[type[Exception], ...] = (OperationalError, InterfaceError, PoolTimeout, ConnectionError)


class LockTimeout(Exception):
    """A row another transaction holds was not free within the wait allowed (`lock_wait_at_most`)."""


class Database:
    """One engine per process, and the units of work made from it."""

    def __init__(self, settings: Settings) -> None:
        self.url = settings.resolved_database_url
        self.strategy: SqliteStrategy | PostgresStrategy = (
            SqliteStrategy(settings, self.url)
            if self.url.startswith("sqlite")
            else PostgresStrategy(settings, self.url)
        )
        self.engine: AsyncEngine = self.strategy.engine

    @property
    def keeps_counters(self) -> bool:
        """Whether short-lived counters (rate limits, lockouts) belong in this database's rows.

        PostgreSQL: yes; several server processes share it, and a counter's upsert is a cheap row
        update that every process sees. SQLite: no; every write takes the process's write seat and
        a place in a group commit (an fsync), so counters stay in each process's memory (one writer,
        and limits hold per process).
        """
        return isinstance(self.strategy, PostgresStrategy)

    def unit_of_work(
        self, *, read_only: bool = False, atomic: bool = True
    ) -> AbstractAsyncContextManager[AsyncSession]:
        """Commit on success, roll back on any exception; then run the after-commit actions.

        `read_only`: the unit only reads (on SQLite it never waits for the write lock).
        `atomic=False`: the unit's statements need not stand or fall together (one UPDATE, or writes
        each whole by itself), so each may commit as it runs: on PostgreSQL no BEGIN and no COMMIT,
        two round trips fewer. A failure may then keep what the statements before it wrote (on
        PostgreSQL it does; on SQLite the unit is a write unit as any other).
        """
        return self.strategy.unit_of_work(read_only=read_only, atomic=atomic)

    async def listen(self, channel: str, on_wake: Callable[[], None]) -> Callable[[], None]:
        """Call `on_wake` after every commit that notified `channel` (`notify_after_commit`), in this
        process or in another sharing the database; returns the function that stops listening."""
        return await self.strategy.listen(channel, on_wake)

    async def dispose(self) -> None:
        await self.strategy.dispose()


# --- what a unit of work's session offers the rooms ------------------------------------------


def _is_sqlite(session: AsyncSession) -> bool:
    bind = session.sync_session.bind  # the sync session's own attribute: no proxy call
    assert bind is not None, "sessions are made bound to the engine"
    return bind.dialect.name == "sqlite"


async def rollback_unit(session: AsyncSession) -> None:
    """Undo what this unit of work wrote so far and go on in the same unit (a page re-read after a refusal)."""
    session.sync_session.info.pop("held_rows", None)  # their changes are undone, and on PostgreSQL their locks
    if _is_sqlite(session):
        await sqlite.rollback_unit(session)
    else:
        await postgres.rollback_unit(session)


async def notify_after_commit(session: AsyncSession, channel: str) -> None:
    """Wake the listeners of `channel` (Database.listen) once this unit of work commits; never on rollback."""
    if _is_sqlite(session):
        await sqlite.notify_after_commit(session, channel)
    else:
        await postgres.notify_after_commit(session, channel)


def lock_wait_at_most(session: AsyncSession, seconds: float) -> AbstractAsyncContextManager[None]:
    """The block's statements wait at most `seconds` for a row another unit of work holds, then raise
    LockTimeout (and the unit must end). On SQLite no other unit holds rows while this one runs."""
    if _is_sqlite(session):
        return _NOTHING_TO_WAIT_FOR
    return _postgres_lock_wait(session, seconds)


@asynccontextmanager
async def _postgres_lock_wait(session: AsyncSession, seconds: float) -> AsyncIterator[None]:
    try:
        async with postgres.lock_wait_at_most(session, seconds):
            yield
    except Exception as exc:
        if postgres.is_lock_timeout(exc):
            raise LockTimeout(str(exc)) from None
        raise


class InsertUnlessTaken:
    """`INSERT ... ON CONFLICT (index) DO NOTHING` that waits at most `seconds` for a conflicting row
    another unit of work is inserting (PostgreSQL waits for that unit to end), then raises LockTimeout.

    The same as the INSERT inside `lock_wait_at_most`, in one round trip where that takes three (SET
    LOCAL, the INSERT, the reset): on PostgreSQL the statement sets `lock_timeout` itself before its
    row goes in, and sets it back in its RETURNING clause once the row is in. A row not inserted (the
    name is taken) leaves the wait set: the caller goes on inside `lock_wait_at_most`, which ends it,
    or ends the unit. On SQLite no other unit holds rows while this one runs: the plain INSERT.
    """

    def __init__(self, table: Any, columns: Sequence[str], index_elements: Sequence[str]) -> None:
        values = binds(table, columns)
        self._sqlite = Statement(sqlite.insert_or_nothing(table, values, index_elements))
        self._postgres = Statement(postgres.insert_waiting(table, values, index_elements))

    async def execute(self, session: AsyncSession, seconds: float, **params: Any) -> bool:
        """True when the row went in; False when another unit's row has the name."""
        if _is_sqlite(session):
            return await self._sqlite.execute(session, **params) == 1
        try:
            return await self._postgres.execute(session, lock_wait=postgres.milliseconds(seconds), **params) == 1
        except Exception as exc:
            if postgres.is_lock_timeout(exc):
                raise LockTimeout(str(exc)) from None
            raise


class _NoWait:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


_NOTHING_TO_WAIT_FOR = _NoWait()


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


async def ping(database: Database) -> None:
    async with database.unit_of_work(read_only=True) as session:
        await session.execute(text("SELECT 1"))


# --- schema version -----------------------------------------------------------------

MIGRATIONS_DIR = Path(__file__).resolve().parents[3] / "migrations"


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

    # In a read unit of work, as every request's reads: it waits its turn for a connection with them
    # (/readyz under load), and on SQLite never waits for the write lock.
    async with database.unit_of_work(read_only=True) as session:
        connection = await session.connection()
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

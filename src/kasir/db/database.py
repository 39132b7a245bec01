"""The one Database: units of work, wake-ups across processes, schema version.

Services never commit. The request (or job) boundary opens a unit of work, which commits on
success and rolls back on any exception; actions registered with `on_commit()` run only after a
successful commit. `Database(settings)` chooses the strategy once, from the URL:

- `kasir.db.sqlite`: the embedded file on Python's sqlite3, statements inline, group commit.
- `kasir.db.postgres`: a queue of asyncpg connections, a transaction per write unit, LISTEN/NOTIFY.

Nothing outside this package names a dialect or a driver.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends
from starlette.requests import Request

from kasir.config import Settings
from kasir.db import postgres, sqlite
from kasir.db.postgres import PostgresStrategy
from kasir.db.session import DatabaseUnavailable, Session, UnsupportedDatabaseUrl
from kasir.db.sqlite import SqliteStrategy
from kasir.db.statements import Statement, binds

log = logging.getLogger("kasir.db")

# What a database that cannot be reached or cannot take the work raises: every route answers it with
# an outage and Retry-After in its own wire format (kasir.errors.ServiceUnavailable).
UNAVAILABLE: tuple[type[Exception], ...] = (DatabaseUnavailable,)


class Database:
    """One per process: its strategy, chosen once at start-up, and the units of work made from it."""

    def __init__(self, settings: Settings) -> None:
        self.url = url = settings.resolved_database_url
        self.strategy: SqliteStrategy | PostgresStrategy
        if url.startswith(("sqlite+aiosqlite:///", "sqlite:///")):
            self.strategy = SqliteStrategy(settings, url)
        elif url.startswith(("postgresql+asyncpg://", "postgresql://", "postgres://")):
            self.strategy = PostgresStrategy(settings, url)
        else:
            raise UnsupportedDatabaseUrl(f"{url.partition('://')[0] or url!r} is neither SQLite nor PostgreSQL")

    @property
    def keeps_counters(self) -> bool:
        """Whether short-lived counters (rate limits, lockouts) belong in this database's rows.

        PostgreSQL: yes; several server processes share it, and a counter's upsert is a cheap row
        update that every process sees. SQLite: no; every write takes the process's write seat and
        a place in a group commit (an fsync), so counters stay in each process's memory (one writer,
        and limits hold per process).
        """
        return isinstance(self.strategy, PostgresStrategy)

    def unit_of_work(self, *, read_only: bool = False, atomic: bool = True) -> AbstractAsyncContextManager[Session]:
        """Commit on success, roll back on any exception; then run the after-commit actions.

        `read_only`: the unit only reads (it never waits for a write lock).
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
        self._statements = {
            "sqlite": Statement(sqlite.insert_or_nothing(table, values, index_elements)),
            "postgresql": Statement(postgres.insert_waiting(table, values, index_elements)),
        }

    def statement(self, dialect_name: str) -> Statement:
        """The statement run on that dialect (its `lock_wait` parameter is the wait, in milliseconds)."""
        return self._statements[dialect_name]

    async def execute(self, session: Session, seconds: float, **params: Any) -> bool:
        """True when the row went in; False when another unit's row has the name."""
        if session.dialect.name == "postgresql":
            params["lock_wait"] = postgres.milliseconds(seconds)
        return await self._statements[session.dialect.name].execute(session, **params) == 1


async def each_in_own_unit_of_work(
    database: Database,
    keys: Iterable[str],
    action: Callable[[Session, str], Awaitable[bool]],
    *,
    what: str,
) -> int:
    """Run `action(session, key)` for each key in a unit of work of its own; how many returned True.

    For the jobs (expiries): one bad row must not stop the others, and the next run retries it.
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


async def ping(database: Database, *, write: bool = False) -> None:
    """A statement on the database; with `write`, a write that changes nothing, committed (a full disk fails it)."""
    async with database.unit_of_work(read_only=not write) as session:
        if write:
            await session.count_rows("UPDATE alembic_version SET version_num = version_num", ())
        else:
            await session.fetch_rows("SELECT 1", ())


async def database_time(database: Database) -> datetime:
    """The database's own clock (PostgreSQL's server; an SQLite file's is this machine's), aware, in UTC."""
    async with database.unit_of_work(read_only=True) as session:
        [(value,)] = await session.fetch_rows("SELECT CURRENT_TIMESTAMP", ())
    if isinstance(value, str):  # SQLite: 'YYYY-MM-DD HH:MM:SS', in UTC
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


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
    """The schema's revision, read in a read unit as every request's reads are (it waits its turn with them)."""
    return await database.strategy.current_revision()


async def run_migrations(url: str, migrate: Callable[[Any], None]) -> None:
    """Run `migrate(connection)` (Alembic's work) on a SQLAlchemy connection of its own, in a transaction.

    Migrations are the one place SQLAlchemy's engine is used: Alembic runs on it. The engine is made
    for the migration and disposed after it.
    """
    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(migrate)
    finally:
        await engine.dispose()


async def upgrade_schema(database: Database, revision: str = "head") -> None:
    from alembic import command

    def upgrade(sync_connection: Any) -> None:
        config = alembic_config()
        config.attributes["connection"] = sync_connection
        command.upgrade(config, revision)

    await run_migrations(database.url, upgrade)


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


async def write_session(request: Request) -> AsyncIterator[Session]:
    """A session committed when the endpoint returns, rolled back when it raises."""
    async with request.app.state.database.unit_of_work() as session:
        yield session


async def read_session(request: Request) -> AsyncIterator[Session]:
    async with request.app.state.database.unit_of_work(read_only=True) as session:
        yield session


# What endpoints declare. scope="function": the unit of work ends (commits) when the endpoint
# returns, BEFORE the response is sent; FastAPI's default would commit after the client already
# has the answer, so a merchant reading back at once could miss what it was just told exists.
WriteSession = Annotated[Session, Depends(write_session, scope="function")]
ReadSession = Annotated[Session, Depends(read_session, scope="function")]

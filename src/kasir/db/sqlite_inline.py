"""SQLite for the async engine, run on the event loop's own thread.

SQLAlchemy's aiosqlite dialect sends every statement to a worker thread and back. That round
trip costs tens of times what the statement itself (a primary-key look-up in a local WAL file)
costs: a card charge spent most of its time waking threads. This module gives the aiosqlite
dialect (through `async_creator`) a connection with aiosqlite's interface whose calls run
inline instead.

Blocking the loop is only acceptable for work that is short, so:

- `busy_timeout` is 0 on these connections: a statement that finds the database locked (another
  process writing) raises SQLITE_BUSY at once, and is retried here after an `asyncio.sleep`,
  for up to `busy_seconds` in all (the thread driver's 30 s busy timeout, without blocking).
  A statement that failed with SQLITE_BUSY had no effect, so repeating it is safe.
- Writers of one process never meet SQLITE_BUSY from each other: they queue on the process's
  write lock (kasir.db.sqlite) before BEGIN IMMEDIATE.
- WAL auto-checkpoints run inline too; a COMMIT's fsync runs on a worker thread, and group
  commit (kasir.db.sqlite.GroupCommit) keeps COMMITs to one per batch of writers.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

_FIRST_RETRY_SECONDS = 0.001
_MAX_RETRY_SECONDS = 0.05


class InlineCursor:
    def __init__(self, connection: InlineConnection) -> None:
        self._connection = connection
        self._cursor = connection._conn.cursor()

    async def __aenter__(self) -> InlineCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._cursor.close()

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    @property
    def arraysize(self) -> int:
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value

    async def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> InlineCursor:
        if parameters is None:
            await self._connection.retry_busy(lambda: self._cursor.execute(sql))
        else:
            await self._connection.retry_busy(lambda: self._cursor.execute(sql, parameters))
        return self

    async def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]]) -> InlineCursor:
        rows = list(seq_of_parameters)
        await self._connection.retry_busy(lambda: self._cursor.executemany(sql, rows))
        return self

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._cursor.fetchmany(size) if size is not None else self._cursor.fetchmany()

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def close(self) -> None:
        self._cursor.close()


class _RunAtOnce:
    """Stands in for aiosqlite's request queue, which SQLAlchemy uses to set `isolation_level`."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def put_nowait(self, item: tuple[asyncio.Future[Any], Callable[[], Any]]) -> None:
        future, function = item
        try:
            future.set_result(function())
        except Exception as exc:
            future.set_exception(exc)


class InlineConnection:
    """The part of `aiosqlite.Connection` that SQLAlchemy's aiosqlite dialect uses."""

    def __init__(self, connection: sqlite3.Connection, *, busy_seconds: float) -> None:
        self._conn = connection
        self._connection: sqlite3.Connection | None = connection
        self._tx = _RunAtOnce(connection)
        self.busy_seconds = busy_seconds

    async def retry_busy(self, statement: Callable[[], T]) -> T:
        deadline = time.monotonic() + self.busy_seconds
        delay = _FIRST_RETRY_SECONDS
        while True:
            try:
                return statement()
            except sqlite3.OperationalError as exc:
                busy = getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
                if not busy or time.monotonic() + delay > deadline:
                    raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_RETRY_SECONDS)

    @property
    def sqlite(self) -> sqlite3.Connection:
        """The sqlite3 connection itself (kasir.prepared runs statements on it directly)."""
        return self._conn

    @property
    def isolation_level(self) -> str | None:
        return self._conn.isolation_level

    @isolation_level.setter
    def isolation_level(self, value: str | None) -> None:
        self._conn.isolation_level = value  # type: ignore[assignment]  # checked by sqlite3 itself

    def cursor(self) -> InlineCursor:
        return InlineCursor(self)

    async def execute(self, sql: str, parameters: Sequence[Any] | None = None) -> InlineCursor:
        return await self.cursor().execute(sql, parameters)

    async def commit(self) -> None:
        await self.retry_busy(self._conn.commit)

    async def rollback(self) -> None:
        self._conn.rollback()

    async def close(self) -> None:
        if self._connection is not None:
            self._connection = None
            self._conn.close()

    def stop(self) -> None:
        if self._connection is not None:
            self._connection = None
            self._conn.close()

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        self._conn.create_function(*args, **kwargs)


def inline_connector(path: str, *, busy_seconds: float = 30.0) -> Callable[[], Any]:
    """`async_creator` for `create_async_engine("sqlite+aiosqlite://...")`."""

    async def connect() -> InlineConnection:
        # check_same_thread=False: the pool may close a connection from a finaliser on another thread.
        connection = sqlite3.connect(path, timeout=0, check_same_thread=False, isolation_level=None)
        return InlineConnection(connection, busy_seconds=busy_seconds)

    return connect

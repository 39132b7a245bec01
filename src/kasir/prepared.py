"""Prepared statements: Core statements of the hot paths, compiled once, run on the driver itself.

Executing a Core statement through SQLAlchemy costs ~90 µs of Python per statement on the
small machines Kasir is benchmarked on (cache-key generation, execution context, result
set-up), ORM statements more; the statement itself, on the embedded SQLite, costs ~5-25 µs.
A card charge runs five of them. `Prepared` keeps the statement a SQLAlchemy Core
construct (the repository still reads as SQLAlchemy, the dialect still writes the SQL)
but compiles it once per dialect, with the column types' bind and result processors, so
each run is the driver call alone:

- On the inline SQLite driver (kasir.kit.sqlite_inline) it runs on the unit of work's
  `sqlite3` connection: the group-commit seat's, or the session's own connection.
- On PostgreSQL (asyncpg) it runs on the asyncpg connection of the session's transaction,
  through SQLAlchemy's own connection adapter: the adapter begins the transaction if no
  statement has yet, prepares the statement in its statement cache, and translates asyncpg's
  errors. Those are private parts of SQLAlchemy's asyncpg dialect, so the path is taken only
  when the adapter has them as this module knows them (`_asyncpg_path_supported`); otherwise,
  and with any other driver (the SQLite thread driver), statements run through
  `session.execute`, as any Core statement would. A card charge on PostgreSQL spent a third
  of the server's time in `session.execute`.

Either way SQLAlchemy's execution events (`before_cursor_execute`) do not see these statements.

Values go through the same type processors SQLAlchemy applies (a UTC datetime is stored
exactly as the ORM stores it), and database errors come out as SQLAlchemy's exceptions
(`IntegrityError`, `OperationalError`) with parameters hidden. Pending ORM changes of the
session are flushed first, as `session.execute` would. Statements with expanding
parameters (`IN` lists) are refused when built: their SQL depends on the values.
"""

from __future__ import annotations

import inspect
import operator
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import bindparam
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Executable
from sqlalchemy.sql.elements import BindParameter

from kasir.kit.sqlite_inline import InlineConnection

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]  # the positional parameters, in order
    defaults: dict[str, Any]  # values written into the statement (a LIMIT), used when not given
    bind: tuple[tuple[int, Callable[[Any], Any]], ...]  # (position, processor) of the parameters that have one
    result: tuple[Processor, ...]
    any_result_processor: bool
    pick: Callable[[dict[str, Any]], Sequence[Any]]  # the parameters' values, in order, from the dict

    def values(self, params: dict[str, Any]) -> Sequence[Any]:
        """The positional parameters, through their types' bind processors.

        Picked in one C call (a card order's INSERT has 28 parameters, 5 with a processor): a
        Python loop over every parameter cost the charge ~20 µs under load.
        """
        picked = self.pick(params)
        if not self.bind:
            return picked
        values = list(picked)
        for position, process in self.bind:
            values[position] = process(values[position])
        return values


def _picker(names: tuple[str, ...]) -> Callable[[dict[str, Any]], Sequence[Any]]:
    if len(names) > 1:
        return operator.itemgetter(*names)  # type: ignore[return-value]
    return lambda params: tuple(params[name] for name in names)  # itemgetter of one name gives the bare value


class Prepared:
    """A Core statement (or, per dialect, `build(dialect_name)`) compiled once per dialect."""

    def __init__(self, statement: Executable | Callable[[str], Executable]) -> None:
        self._build = statement if callable(statement) and not isinstance(statement, Executable) else None
        self._statement = None if self._build is not None else statement
        self._statements: dict[str, Executable] = {}
        self._compiled: dict[str, _Compiled] = {}

    def statement(self, dialect_name: str) -> Executable:
        if self._build is None:
            assert self._statement is not None
            return self._statement  # type: ignore[return-value]
        statement = self._statements.get(dialect_name)
        if statement is None:
            statement = self._statements[dialect_name] = self._build(dialect_name)
        return statement

    def _compile(self, dialect: Dialect) -> _Compiled:
        compiled = self.statement(dialect.name).compile(dialect=dialect)  # type: ignore[attr-defined]
        if compiled.post_compile_params or compiled.literal_execute_params:
            raise ValueError("Prepared statements cannot have expanding (IN) or literal-execute parameters")
        names = tuple(compiled.positiontup or ())
        defaults = {
            name: compiled.binds[name].value
            for name in names
            if not compiled.binds[name].required  # a value written in the statement, None (NULL) included
        }
        processors = (compiled.binds[name].type._cached_bind_processor(dialect) for name in names)
        bind = tuple((position, process) for position, process in enumerate(processors) if process is not None)
        result = tuple(
            column.type._cached_result_processor(dialect, None) for column in (compiled._result_columns or ())
        )
        any_result_processor = any(p is not None for p in result)
        return _Compiled(str(compiled), names, defaults, bind, result, any_result_processor, _picker(names))

    def _for(self, dialect: Dialect) -> _Compiled:
        compiled = self._compiled.get(dialect.name)
        if compiled is None:
            compiled = self._compiled[dialect.name] = self._compile(dialect)
        return compiled

    # --- running ------------------------------------------------------------------------

    async def rows(self, session: AsyncSession, **params: Any) -> list[tuple[Any, ...]]:
        """Every row, as tuples."""
        dialect = _dialect(session)
        raw = await _sqlite_connection(session, dialect)
        if raw is None:
            adapter = await _asyncpg_adapter(session, dialect)
            if adapter is not None:
                compiled, records, _ = await self._run_asyncpg(dialect, adapter, params)
                return [_processed(compiled, record) for record in records]
            result = await session.execute(self.statement(dialect.name), params)
            return [tuple(row) for row in result.all()]
        compiled, cursor = self._run(dialect, raw, params)
        rows = cursor.fetchall()
        return [_processed(compiled, row) for row in rows] if compiled.any_result_processor else rows

    async def first(self, session: AsyncSession, **params: Any) -> tuple[Any, ...] | None:
        """The first row, or None."""
        dialect = _dialect(session)
        raw = await _sqlite_connection(session, dialect)
        if raw is None:
            adapter = await _asyncpg_adapter(session, dialect)
            if adapter is not None:
                compiled, records, _ = await self._run_asyncpg(dialect, adapter, params)
                if not records:
                    return None
                return _processed(compiled, records[0])
            row = (await session.execute(self.statement(dialect.name), params)).first()
            return None if row is None else tuple(row)
        compiled, cursor = self._run(dialect, raw, params)
        found = cursor.fetchone()
        cursor.close()
        if found is None:
            return None
        return _processed(compiled, found)

    async def scalar(self, session: AsyncSession, **params: Any) -> Any:
        """The first column of the first row, or None."""
        row = await self.first(session, **params)
        return None if row is None else row[0]

    async def execute(self, session: AsyncSession, **params: Any) -> int:
        """Run a statement without rows (INSERT, UPDATE, DELETE); how many rows it changed."""
        dialect = _dialect(session)
        raw = await _sqlite_connection(session, dialect)
        if raw is None:
            adapter = await _asyncpg_adapter(session, dialect)
            if adapter is not None:
                _, _, changed = await self._run_asyncpg(dialect, adapter, params)
                return changed
            result = await session.execute(self.statement(dialect.name), params)
            return int(getattr(result, "rowcount", 0))
        return self.execute_on(raw, dialect, **params)

    def execute_on(self, raw: sqlite3.Connection, dialect: Dialect, **params: Any) -> int:
        """`execute` on a sqlite3 connection given outright (a batch program of the group commit); rows changed."""
        _, cursor = self._run(dialect, raw, params)
        changed = cursor.rowcount
        cursor.close()
        return int(changed)

    def _bound(self, dialect: Dialect, params: dict[str, Any]) -> tuple[_Compiled, Sequence[Any]]:
        """The statement compiled for `dialect`, and its positional values from `params`."""
        compiled = self._compiled.get(dialect.name) or self._for(dialect)
        if compiled.defaults:
            params = {**compiled.defaults, **params}
        try:
            return compiled, compiled.values(params)
        except KeyError as missing:
            raise TypeError(f"Prepared statement is missing the parameter {missing}") from None

    def _run(self, dialect: Dialect, raw: sqlite3.Connection, params: dict[str, Any]) -> tuple[_Compiled, Any]:
        compiled, values = self._bound(dialect, params)
        try:
            return compiled, raw.execute(compiled.sql, values)
        except sqlite3.Error as exc:
            raise DBAPIError.instance(
                compiled.sql, values, exc, sqlite3.Error, hide_parameters=True, dialect=dialect
            ) from exc

    async def _run_asyncpg(
        self, dialect: Dialect, adapter: Any, params: dict[str, Any]
    ) -> tuple[_Compiled, list[Any], int]:
        """Run on the asyncpg connection of the session's transaction: (compiled, records, rows changed)."""
        compiled, values = self._bound(dialect, params)
        async with adapter._execute_mutex:
            try:
                if adapter._transaction is None:
                    await adapter._start_transaction()
                statement, _ = await adapter._prepare(compiled.sql, dialect._invalidate_schema_cache_asof)  # type: ignore[attr-defined]
                records = await statement.fetch(*values)
            except Exception as error:
                try:
                    adapter._handle_exception(error)  # raises the DB-API error SQLAlchemy would see
                except Exception as dbapi_error:
                    raise DBAPIError.instance(
                        compiled.sql,
                        values,
                        dbapi_error,
                        dialect.loaded_dbapi.Error,
                        hide_parameters=True,
                        dialect=dialect,
                    ) from error
                raise
        status = _CHANGED.match(statement.get_statusmsg() or "")
        return compiled, records, int(status.group(1)) if status else -1


def dialect_insert(dialect_name: str, table: Any) -> Any:
    """The dialect's INSERT of `table`, which has `on_conflict_do_nothing()` on SQLite and PostgreSQL alike.

    For `Prepared(lambda dialect: dialect_insert(dialect, Model).values(...).on_conflict_do_nothing())`.
    """
    return postgresql_insert(table) if dialect_name == "postgresql" else sqlite_insert(table)


def binds(table: Any, names: Sequence[str] | None = None) -> dict[str, BindParameter[Any]]:
    """`{column: bindparam(column)}` with the column's type: the `.values()` of a prepared INSERT or UPDATE."""
    columns = table.__table__.columns if hasattr(table, "__table__") else table.columns
    chosen = names if names is not None else [column.name for column in columns]
    return {name: bindparam(name, type_=columns[name].type) for name in chosen}


def _processed(compiled: _Compiled, row: Sequence[Any]) -> tuple[Any, ...]:
    """A driver's row as a tuple, through the result columns' processors when any has one."""
    if not compiled.any_result_processor:
        return tuple(row)  # a sqlite3 row is a tuple already: no copy
    pairs = zip(row, compiled.result, strict=True)
    return tuple(value if process is None else process(value) for value, process in pairs)


def _dialect(session: AsyncSession) -> Dialect:
    bind = session.bind
    assert bind is not None, "sessions are made bound to the engine"
    return bind.dialect


_CHANGED = re.compile(r"(?:SELECT|UPDATE|DELETE|INSERT \d+) (\d+)")


async def _asyncpg_adapter(session: AsyncSession, dialect: Dialect) -> Any:
    """SQLAlchemy's asyncpg connection adapter of the session's transaction (flushing the ORM first); else None."""
    if dialect.driver != "asyncpg":
        return None
    if not session.sync_session._is_clean():
        await session.flush()
    connection = await session.connection()
    adapter: Any = connection.sync_connection.connection.dbapi_connection  # type: ignore[union-attr]
    dialect_type: Any = type(dialect)
    adapter_type: Any = type(adapter)
    return adapter if _asyncpg_path_supported(adapter_type, dialect_type) else None


@lru_cache(maxsize=4)
def _asyncpg_path_supported(adapter_type: Any, dialect_type: Any) -> bool:
    """Whether SQLAlchemy's asyncpg adapter has the private parts `_run_asyncpg` uses, as it uses them."""
    needed = ("_execute_mutex", "_transaction", "_start_transaction", "_prepare", "_handle_exception")
    if not all(hasattr(adapter_type, name) for name in needed):  # slots count: they are class attributes
        return False
    if not hasattr(dialect_type, "_invalidate_schema_cache_asof"):
        return False
    prepare = inspect.signature(adapter_type._prepare)
    return list(prepare.parameters) == ["self", "operation", "invalidate_timestamp"]


async def _sqlite_connection(session: AsyncSession, dialect: Dialect) -> sqlite3.Connection | None:
    """The unit of work's sqlite3 connection on the inline driver (flushing the ORM first); else None."""
    if dialect.name != "sqlite":
        return None
    # What session.execute's autoflush does. `_is_clean` is the Session's own O(1) test; the public
    # `new`/`dirty`/`deleted` build a set each, for every statement of the hot paths.
    if not session.sync_session._is_clean():
        await session.flush()
    seat = session.info.get("group_seat")
    if seat is not None:
        return seat.sqlite or await seat.sqlite_connection()  # type: ignore[no-any-return]
    driver = (await session.connection()).sync_connection.connection.driver_connection  # type: ignore[union-attr]
    return driver.sqlite if isinstance(driver, InlineConnection) else None

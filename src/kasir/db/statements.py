"""Statements compiled once: the Core statements every repository runs through kasir.db.

A repository writes its queries as SQLAlchemy Core constructs over the mapped tables and wraps
them in `Statement`: compiled once per dialect with the column types' bind and result
processors, then run on the unit of work's connection by the driver alone, without
SQLAlchemy's per-execution machinery (cache-key generation, execution context, result set-up),
which costs more than a hot path's statement itself.

- SQLite: on the unit's sqlite3 connection (kasir.db.sqlite.raw_connection).
- PostgreSQL: on the asyncpg connection of the unit's transaction (kasir.db.postgres), or
  through `session.execute` when SQLAlchemy's adapter is not the one that module knows.

Either way SQLAlchemy's execution events (`before_cursor_execute`) do not see these statements.
Values go through the same type processors SQLAlchemy applies (a UTC datetime is stored exactly
as the ORM stores it), and database errors come out as SQLAlchemy's exceptions
(`IntegrityError`, `OperationalError`) with parameters hidden. Pending ORM changes of the
session are flushed first, as `session.execute` would. Statements with expanding parameters
(`IN` lists) are refused when built: their SQL depends on the values.

A statement that needs the dialect's own INSERT (for `ON CONFLICT DO NOTHING`) is given as a
function of it: `Statement(lambda insert: insert(Table).values(...).on_conflict_do_nothing())`.
"""

from __future__ import annotations

import operator
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Executable
from sqlalchemy.sql.elements import BindParameter

from kasir.db import postgres, sqlite


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]  # the positional parameters, in order
    defaults: dict[str, Any]  # values written into the statement (a LIMIT), used when not given
    bind: tuple[tuple[int, Callable[[Any], Any]], ...]  # (position, processor) of the parameters that have one
    result: tuple[tuple[int, Callable[[Any], Any]], ...]  # (column, processor) of the result columns that have one
    pick: Callable[[dict[str, Any]], Sequence[Any]]  # the parameters' values, in order, from the dict

    def values(self, params: dict[str, Any]) -> Sequence[Any]:
        """The positional parameters, through their types' bind processors.

        Picked in one C call: a card order's INSERT has 28 parameters, and a Python loop over
        every one of them shows in the charge's profile.
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


_INSERTS: dict[str, Callable[[Any], Any]] = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}

InsertFactory = Callable[[Any], Any]


class Statement:
    """A Core statement (or `build(insert)`, given the dialect's INSERT) compiled once per dialect."""

    def __init__(self, statement: Executable | Callable[[InsertFactory], Executable]) -> None:
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
            statement = self._statements[dialect_name] = self._build(_INSERTS[dialect_name])
        return statement

    def _compile(self, dialect: Dialect) -> _Compiled:
        statement: Any = self.statement(dialect.name)
        compiled = statement.compile(dialect=dialect)
        if compiled.post_compile_params or compiled.literal_execute_params:
            raise ValueError("kasir.db statements cannot have expanding (IN) or literal-execute parameters")
        names = tuple(compiled.positiontup or ())
        defaults = {
            name: compiled.binds[name].value
            for name in names
            if not compiled.binds[name].required  # a value written in the statement, None (NULL) included
        }
        # The dialect's own implementation of each type does the conversion (SQLite's DATETIME
        # writes text): what SQLAlchemy's execution would apply.
        processors = (compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names)
        bind = tuple((position, process) for position, process in enumerate(processors) if process is not None)
        # The columns a SELECT or a RETURNING clause answers with, in order.
        processors_out = (
            column.type.dialect_impl(dialect).result_processor(dialect, None) for column in statement.exported_columns
        )
        result = tuple((column, process) for column, process in enumerate(processors_out) if process is not None)
        return _Compiled(str(compiled), names, defaults, bind, result, _picker(names))

    def _for(self, dialect: Dialect) -> _Compiled:
        compiled = self._compiled.get(dialect.name)
        if compiled is None:
            compiled = self._compiled[dialect.name] = self._compile(dialect)
        return compiled

    # --- running ------------------------------------------------------------------------

    async def rows(self, session: AsyncSession, **params: Any) -> list[tuple[Any, ...]]:
        """Every row, as tuples."""
        compiled, rows, _ = await self._run(session, params)
        if not compiled.result:
            return [tuple(row) for row in rows]
        return [_processed(compiled, row) for row in rows]

    async def first(self, session: AsyncSession, **params: Any) -> tuple[Any, ...] | None:
        """The first row, or None."""
        compiled, rows, _ = await self._run(session, params, first=True)
        if not rows:
            return None
        return _processed(compiled, rows[0])

    async def scalar(self, session: AsyncSession, **params: Any) -> Any:
        """The first column of the first row, or None."""
        row = await self.first(session, **params)
        return None if row is None else row[0]

    async def execute(self, session: AsyncSession, **params: Any) -> int:
        """Run a statement without rows (INSERT, UPDATE, DELETE); how many rows it changed."""
        _, _, changed = await self._run(session, params, rows=False)
        return changed

    async def _run(
        self, session: AsyncSession, params: dict[str, Any], *, first: bool = False, rows: bool = True
    ) -> tuple[_Compiled, Sequence[Any], int]:
        """(compiled, the driver's rows, rows changed) on the unit of work's connection."""
        sync_session = session.sync_session  # its own attributes: AsyncSession proxies each one
        bind = sync_session.bind
        assert bind is not None, "sessions are made bound to the engine"
        dialect = bind.dialect
        if dialect.name == "sqlite":
            if not sync_session._is_clean():  # what session.execute's autoflush does
                await session.flush()
            seat = sync_session.info.get("group_seat")
            raw = seat.sqlite if seat is not None and seat.sqlite is not None else await sqlite.raw_connection(session)
            compiled, values = self._bound(dialect, params)
            try:
                cursor = raw.execute(compiled.sql, values)
            except sqlite3.Error as exc:
                raise DBAPIError.instance(
                    compiled.sql, values, exc, sqlite3.Error, hide_parameters=True, dialect=dialect
                ) from exc
            if not rows:
                changed = cursor.rowcount
                cursor.close()
                return compiled, (), int(changed)
            if first:
                found = cursor.fetchone()
                cursor.close()
                return compiled, () if found is None else (found,), -1
            return compiled, cursor.fetchall(), -1
        adapter = await postgres.asyncpg_adapter(session)
        if adapter is not None:
            compiled, values = self._bound(dialect, params)
            records, status = await postgres.run_on_adapter(adapter, dialect, compiled.sql, values)
            count = _CHANGED.match(status)
            return compiled, records, int(count.group(1)) if count else -1
        compiled = self._for(dialect)
        result = await session.execute(self.statement(dialect.name), params)
        if not rows:
            return compiled, (), int(getattr(result, "rowcount", 0))
        return compiled, [tuple(row) for row in result.all()], -1

    def _bound(self, dialect: Dialect, params: dict[str, Any]) -> tuple[_Compiled, Sequence[Any]]:
        """The statement compiled for `dialect`, and its positional values from `params`."""
        compiled = self._compiled.get(dialect.name) or self._for(dialect)
        if compiled.defaults:
            params = {**compiled.defaults, **params}
        try:
            return compiled, compiled.values(params)
        except KeyError as missing:
            raise TypeError(f"kasir.db statement is missing the parameter {missing}") from None


def binds(table: Any, names: Sequence[str] | None = None) -> dict[str, BindParameter[Any]]:
    """`{column: bindparam(column)}` with the column's type: the `.values()` of a prepared INSERT or UPDATE."""
    columns = table.__table__.columns if hasattr(table, "__table__") else table.columns
    chosen = names if names is not None else [column.name for column in columns]
    return {name: bindparam(name, type_=columns[name].type) for name in chosen}


def _processed(compiled: _Compiled, row: Sequence[Any]) -> tuple[Any, ...]:
    """A driver's row as a tuple, through the result columns' processors when any has one.

    Only the columns with a processor are visited: a wallet transaction's row has 25 columns, a
    few of them datetimes or amounts, and every inquiry reads one.
    """
    if not compiled.result:
        return tuple(row)  # a sqlite3 row is a tuple already: no copy
    values = list(row)
    for column, process in compiled.result:
        values[column] = process(values[column])
    return tuple(values)


_CHANGED = re.compile(r"(?:SELECT|UPDATE|DELETE|INSERT \d+) (\d+)")

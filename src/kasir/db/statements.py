"""Statements: SQLAlchemy Core constructs, compiled for the unit's dialect and run by its driver.

    S = Statement(select(T.a, T.b).where(T.id == bindparam("id")))   fixed: compiled once per dialect
    await S.rows(session, id=...)  .first(...)  .scalar(...)  .execute(...) -> rows changed

    await fetch(session, select(...).where(T.c.in_(values)))          built per call: compiled each time
    await fetch_one(...)  fetch_value(...)  run(...) -> rows changed

A repository writes its queries as Core constructs over the mapped tables. The compiled SQL
runs on the driver alone (sqlite3, asyncpg), with the column types' bind and result processors
applied as SQLAlchemy's own execution would apply them (a UTC datetime is stored the same way),
so a fixed statement costs its round trip and little else. Rows are tuples; `fetch`'s rows can
also be read by column name (`row.amount`). A fixed statement cannot have expanding (IN)
parameters, whose SQL depends on the values: such a statement is built per call.

A statement that needs the dialect's own INSERT (for `ON CONFLICT DO NOTHING`) is given as a
function of it: `Statement(lambda insert: insert(Table).values(...).on_conflict_do_nothing())`.
"""

from __future__ import annotations

import operator
from collections import namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import Float, Numeric, bindparam, literal_column
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import Executable
from sqlalchemy.sql.dml import UpdateBase
from sqlalchemy.sql.elements import BindParameter

from kasir.db.session import Session

InsertFactory = Callable[[Any], Any]
_INSERTS: dict[str, InsertFactory] = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}


@dataclass(frozen=True, slots=True)
class Compiled:
    sql: str
    names: tuple[str, ...]  # the positional parameters, in order
    defaults: dict[str, Any]  # values the statement carries itself, used when not given
    bind: tuple[tuple[int, Callable[[Any], Any]], ...]  # (position, processor) of the parameters that have one
    result: tuple[tuple[int, Callable[[Any], Any]], ...]  # (column, processor) of the result columns that have one
    keys: tuple[str, ...]  # the result columns' names
    pick: Callable[[dict[str, Any]], Sequence[Any]]  # the parameters' values, in order, from the dict

    def values(self, params: dict[str, Any]) -> Sequence[Any]:
        """The positional parameters, through their types' bind processors (picked in one C call)."""
        if self.defaults:
            params = {**self.defaults, **params}
        try:
            picked = self.pick(params)
        except KeyError as missing:
            raise TypeError(f"kasir.db statement is missing the parameter {missing}") from None
        if not self.bind:
            return picked
        values = list(picked)
        for position, process in self.bind:
            values[position] = process(values[position])
        return values

    def row(self, row: Sequence[Any]) -> tuple[Any, ...]:
        """A driver's row as a tuple, through the processors of the columns that have one."""
        if not self.result:
            return tuple(row)
        values = list(row)
        for column, process in self.result:
            values[column] = process(values[column])
        return tuple(values)


def compile_for(statement: Any, dialect: Dialect, *, per_call: bool = False) -> Compiled:
    """`statement` compiled for `dialect`: its SQL, parameters and processors.

    On PostgreSQL a statement that changes rows without answering any is given `RETURNING 1`: the
    rows it changed are the rows it answers, counted from the driver's result.
    """
    if dialect.name == "postgresql" and isinstance(statement, UpdateBase) and not statement.exported_columns:
        statement = statement.returning(literal_column("1"))  # type: ignore[attr-defined]
    compiled = statement.compile(dialect=dialect, compile_kwargs={"render_postcompile": per_call})
    if not per_call and (compiled.post_compile_params or compiled.literal_execute_params):
        raise ValueError("a fixed kasir.db statement cannot have expanding (IN) parameters: build it per call")
    names = tuple(compiled.positiontup or ())
    if per_call:
        defaults = dict(compiled.construct_params())
    else:
        # A value written in the statement (a LIMIT, None for NULL) is used when the call gives none.
        defaults = {name: compiled.binds[name].value for name in names if not compiled.binds[name].required}
    # Python-side column defaults (`default=0`) for the columns an INSERT or UPDATE does not name.
    for column in (*compiled.insert_prefetch, *compiled.update_prefetch):
        default = column.default if column in compiled.insert_prefetch else column.onupdate
        if default is None or not default.is_scalar:
            raise ValueError(f"kasir.db statements take scalar column defaults only ({column})")
        if per_call or defaults.get(column.key) is None:
            defaults[column.key] = default.arg
    binds = compiled.binds
    types = (_bind_of(binds, name).type for name in names)
    processors = (type_.dialect_impl(dialect).bind_processor(dialect) for type_ in types)
    bind = tuple((position, process) for position, process in enumerate(processors) if process is not None)
    columns = list(statement.exported_columns) if hasattr(statement, "exported_columns") else []
    results = (_result_processor(column.type, dialect) for column in columns)
    result = tuple((position, process) for position, process in enumerate(results) if process is not None)
    keys = tuple(getattr(column, "key", None) or column.name for column in columns)
    return Compiled(str(compiled), names, defaults, bind, result, keys, _picker(names))


def _result_processor(type_: Any, dialect: Dialect) -> Callable[[Any], Any] | None:
    """The type's result processor. A driver's numeric processor asks which type the column came back
    as (the result's type code): it is the column's own, known when compiled (PostgreSQL: numeric or
    double precision)."""
    impl = type_.dialect_impl(dialect)
    code = None
    if dialect.name == "postgresql" and isinstance(impl, Numeric):
        code = _PG_DOUBLE if isinstance(impl, Float) else _PG_NUMERIC
    processor: Callable[[Any], Any] | None = impl.result_processor(dialect, code)
    return processor


_PG_NUMERIC, _PG_DOUBLE = 1700, 701  # PostgreSQL's type OIDs of numeric and double precision


def _bind_of(binds: dict[str, BindParameter[Any]], name: str) -> BindParameter[Any]:
    found = binds.get(name)
    if found is None:  # one value of an expanded IN list, named after its parameter: `id_1_2` of `id_1`
        found = binds[name.rsplit("_", 1)[0]]
    return found


def _picker(names: tuple[str, ...]) -> Callable[[dict[str, Any]], Sequence[Any]]:
    if len(names) > 1:
        return operator.itemgetter(*names)  # type: ignore[return-value]
    return lambda params: tuple(params[name] for name in names)  # itemgetter of one name gives the bare value


class Statement:
    """A Core statement (or `build(insert)`, given the dialect's INSERT) compiled once per dialect."""

    __slots__ = ("_build", "_compiled", "_statement")

    def __init__(self, statement: Executable | Callable[[InsertFactory], Executable]) -> None:
        is_builder = callable(statement) and not isinstance(statement, Executable)
        self._build: Callable[[InsertFactory], Executable] | None = statement if is_builder else None  # type: ignore[assignment]
        self._statement = None if is_builder else statement
        self._compiled: dict[str, Compiled] = {}

    def statement(self, dialect_name: str) -> Executable:
        if self._build is not None:
            return self._build(_INSERTS[dialect_name])
        assert self._statement is not None
        return self._statement  # type: ignore[return-value]

    def compiled(self, dialect: Dialect) -> Compiled:
        compiled = self._compiled.get(dialect.name)
        if compiled is None:
            compiled = self._compiled[dialect.name] = compile_for(self.statement(dialect.name), dialect)
        return compiled

    async def rows(self, session: Session, **params: Any) -> list[tuple[Any, ...]]:
        """Every row, as tuples."""
        compiled = self._compiled.get(session.dialect.name) or self.compiled(session.dialect)
        rows = await session.fetch_rows(compiled.sql, compiled.values(params))
        if not compiled.result:
            return [tuple(row) for row in rows]
        return [compiled.row(row) for row in rows]

    async def first(self, session: Session, **params: Any) -> tuple[Any, ...] | None:
        """The first row, or None."""
        compiled = self._compiled.get(session.dialect.name) or self.compiled(session.dialect)
        rows = await session.fetch_rows(compiled.sql, compiled.values(params), first=True)
        return compiled.row(rows[0]) if rows else None

    async def scalar(self, session: Session, **params: Any) -> Any:
        """The first column of the first row, or None."""
        row = await self.first(session, **params)
        return None if row is None else row[0]

    async def execute(self, session: Session, **params: Any) -> int:
        """Run a statement that changes rows (INSERT, UPDATE, DELETE); how many it changed."""
        compiled = self._compiled.get(session.dialect.name) or self.compiled(session.dialect)
        return await session.count_rows(compiled.sql, compiled.values(params))


def binds(table: Any, names: Sequence[str] | None = None) -> dict[str, BindParameter[Any]]:
    """`{column: bindparam(column)}` with the column's type: the `.values()` of a prepared INSERT or UPDATE."""
    columns = table.__table__.columns if hasattr(table, "__table__") else table.columns
    chosen = names if names is not None else [column.name for column in columns]
    return {name: bindparam(name, type_=columns[name].type) for name in chosen}


# --- statements built per call ------------------------------------------------------------


@lru_cache(maxsize=256)
def _row_type(keys: tuple[str, ...]) -> Any:
    if not keys:  # a textual statement names no columns: its rows are plain tuples
        return tuple
    return namedtuple("Row", keys, rename=True)  # type: ignore[misc]  # noqa: PYI024


async def fetch(session: Session, statement: Executable) -> list[Any]:
    """Every row of a statement built per call, readable by position and by column name."""
    compiled = compile_for(statement, session.dialect, per_call=True)
    rows = await session.fetch_rows(compiled.sql, compiled.values({}))
    make = _row_type(compiled.keys)
    return [make(compiled.row(row)) if make is tuple else make._make(compiled.row(row)) for row in rows]


async def fetch_one(session: Session, statement: Executable) -> Any:
    """The first row, or None."""
    compiled = compile_for(statement, session.dialect, per_call=True)
    rows = await session.fetch_rows(compiled.sql, compiled.values({}), first=True)
    if not rows:
        return None
    make = _row_type(compiled.keys)
    return compiled.row(rows[0]) if make is tuple else make._make(compiled.row(rows[0]))


async def fetch_value(session: Session, statement: Executable) -> Any:
    """The first column of the first row, or None."""
    row = await fetch_one(session, statement)
    return None if row is None else row[0]


async def run(session: Session, statement: Executable) -> int:
    """Run a statement built per call that changes rows; how many it changed."""
    compiled = compile_for(statement, session.dialect, per_call=True)
    return await session.count_rows(compiled.sql, compiled.values({}))

"""Statements built per call (a list's filters, an IN list), run through the unit of work's session.

`Statement` compiles a fixed statement once; these take any Core statement and run it as it is:

    rows = await fetch(session, select(T.a, T.b).where(T.c.in_(values)))
    row = await fetch_one(session, ...)      # the first row or None
    value = await fetch_value(session, ...)  # the first column of the first row or None
    changed = await run(session, update(T)...)  # rows changed by an INSERT, UPDATE or DELETE

Rows are tuples whose columns can also be read by name (`row.amount`). Select columns, never
mapped classes: what comes back is values, not ORM objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Executable


async def fetch(session: AsyncSession, statement: Executable) -> Sequence[Any]:
    return (await session.execute(statement)).all()


async def fetch_one(session: AsyncSession, statement: Executable) -> Any:
    return (await session.execute(statement)).first()


async def fetch_value(session: AsyncSession, statement: Executable) -> Any:
    row = (await session.execute(statement)).first()
    return None if row is None else row[0]


async def run(session: AsyncSession, statement: Executable) -> int:
    result: Any = await session.execute(statement)
    return int(getattr(result, "rowcount", -1))

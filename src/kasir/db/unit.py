"""What every strategy's unit of work shares: after-commit actions and the plain session unit."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import object_session
from sqlalchemy.orm.exc import UnmappedInstanceError

log = logging.getLogger("kasir.db")

AfterCommit = Callable[[], Awaitable[None] | None]


def on_commit(session: AsyncSession, action: AfterCommit) -> None:
    """Run `action` after the session's transaction commits (never if it rolls back)."""
    session.sync_session.info.setdefault("after_commit", []).append(action)


def held_rows(session: AsyncSession) -> dict[Any, Any]:
    """The rows this unit of work has read locked, by their repository's key.

    Until the unit ends no other unit can change them, so reading one again (a service that locks
    what the endpoint locked already) can be answered with the first read's row, changes included,
    without a statement. Forgotten when the unit ends or rolls back (`rollback_unit`).
    """
    held: dict[Any, Any] = session.sync_session.info.setdefault("held_rows", {})
    return held


def on_commit_of(instance: object, action: AfterCommit) -> bool:
    """Run `action` after the transaction of the unit of work holding the model `instance` commits;
    False (and nothing) when no unit holds it."""
    try:
        session = object_session(instance)
    except UnmappedInstanceError:
        return False
    if session is None:
        return False
    session.info.setdefault("after_commit", []).append(action)
    return True


async def run_after_commit(session: AsyncSession) -> None:
    actions: list[AfterCommit] = session.sync_session.info.pop("after_commit", [])
    for action in actions:
        try:
            result = action()
            if result is not None:
                await result
        except Exception:  # the commit stands; a failed side effect is retried by its own machinery
            log.exception("after-commit action failed")


@asynccontextmanager
async def session_unit_of_work(maker: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session of its own transaction: committed on success, rolled back on any exception."""
    async with maker() as session:
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        await session.commit()
        await run_after_commit(session)

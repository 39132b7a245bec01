"""What a unit of work hands the rooms: a `Session`, and the errors a database raises.

A session belongs to one unit of work. Its statements run on the unit's connection, by the
database's driver (kasir.db.sqlite, kasir.db.postgres); what it keeps besides is the unit's
own: the actions to run after the commit, the channels to wake, the rows read locked.

    DatabaseError
     ├── UnsupportedDatabaseUrl  KASIR_DATABASE_URL is neither sqlite+aiosqlite:/// nor postgresql+asyncpg://
     ├── DatabaseUnavailable   cannot be reached or cannot take the work now: Retry-After (kasir.errors)
     └── LockTimeout           a row another unit holds was not free in time (lock_wait_at_most)

Any other error of the driver is a bug and goes on as the driver raised it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from sqlalchemy.engine import Dialect

log = logging.getLogger("kasir.db")

AfterCommit = Callable[[], Awaitable[None] | None]


class DatabaseError(Exception):
    """What kasir.db raises of its own."""


class UnsupportedDatabaseUrl(DatabaseError, ValueError):
    """KASIR_DATABASE_URL names no database Kasir can use."""


class DatabaseUnavailable(DatabaseError):
    """The database cannot be reached, is overloaded, or cannot take a write now (disk full, locked)."""


class LockTimeout(DatabaseError):
    """A row another transaction holds was not free within the wait allowed (`lock_wait_at_most`)."""


class Session:
    """One unit of work's handle: its statements, its after-commit actions, its locked rows.

    The strategies subclass it with the two ways a statement runs on their driver.
    """

    __slots__ = ("after_commit", "channels", "held")

    dialect: Dialect  # the strategy's: statements are compiled for it

    def __init__(self) -> None:
        self.after_commit: list[AfterCommit] = []
        self.channels: set[str] = set()
        self.held: dict[Any, Any] = {}

    async def fetch_rows(self, sql: str, values: Sequence[Any], *, first: bool = False) -> Sequence[Sequence[Any]]:
        """The rows of `sql` (only the first, with `first`), as the driver gives them."""
        raise NotImplementedError

    async def count_rows(self, sql: str, values: Sequence[Any]) -> int:
        """Run a statement that changes rows; how many it changed."""
        raise NotImplementedError

    async def rollback(self) -> None:
        """Undo what the unit wrote so far; it goes on."""
        raise NotImplementedError

    def lock_wait(self, seconds: float) -> AbstractAsyncContextManager[None]:
        """Statements of the block wait at most `seconds` for a row another unit holds."""
        raise NotImplementedError

    def clear(self) -> None:
        self.after_commit.clear()
        self.channels.clear()
        self.held.clear()


async def run_after_commit(actions: list[AfterCommit]) -> None:
    for action in actions:
        try:
            result = action()
            if result is not None:
                await result
        except Exception:  # the commit stands; a failed side effect is retried by its own machinery
            log.exception("after-commit action failed")


def on_commit(session: Session, action: AfterCommit) -> None:
    """Run `action` after the unit of work commits (never if it rolls back)."""
    session.after_commit.append(action)


def held_rows(session: Session) -> dict[Any, Any]:
    """The rows this unit of work has read locked, by their repository's key.

    Until the unit ends no other unit can change them, so reading one again (a service that locks
    what the endpoint locked already) can be answered with the first read's row, changes included,
    without a statement. Forgotten when the unit ends or rolls back (`rollback_unit`).
    """
    return session.held


async def locked_once(session: Session, key: Any, read: Callable[[], Awaitable[Any]]) -> Any:
    """The row `read()` reads locked, read once per unit: a second locked read of `key` in the unit (the
    endpoint's, then the service's) is the first's row, with the changes the unit made to it."""
    row = session.held.get(key)
    if row is None:
        row = await read()
        if row is not None:
            session.held[key] = row
    return row


async def notify_after_commit(session: Session, channel: str) -> None:
    """Wake the listeners of `channel` (Database.listen) once this unit of work commits; never on rollback."""
    assert channel.isidentifier(), "channels are names written into statements"
    session.channels.add(channel)


async def rollback_unit(session: Session) -> None:
    """Undo what this unit of work wrote so far and go on in the same unit (a page re-read after a refusal)."""
    session.held.clear()  # their changes are undone, and on PostgreSQL their locks
    await session.rollback()


def lock_wait_at_most(session: Session, seconds: float) -> AbstractAsyncContextManager[None]:
    """The block's statements wait at most `seconds` for a row another unit of work holds, then raise
    LockTimeout (and the unit must end). On SQLite no other unit holds rows while this one runs."""
    return session.lock_wait(seconds)

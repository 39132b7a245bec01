"""Every query of console users and sessions.

Statements are compiled once (kasir.db.Statement) and hand back plain rows (`ConsoleUserRow`,
`ConsoleSessionRow`). The service changes a user's row and `save`s the columns it changed;
the failed sign-ins that concurrent tries count together are counted in the database (`count_failure`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select, update

from kasir.console.models import ConsoleSession, ConsoleUser
from kasir.db import Session, Statement, binds


@dataclass(slots=True)
class ConsoleUserRow:
    """A console user as read (or just written): every column of `console_user`."""

    id: int
    email: str
    role: str
    merchant_id: str | None
    password_hash: str
    failed_sign_ins: int
    locked_until: datetime | None
    disabled_at: datetime | None
    created_at: datetime
    updated_at: datetime
    last_sign_in_at: datetime | None


@dataclass(frozen=True, slots=True)
class ConsoleSessionRow:
    """A signed-in browser: every column of `console_session`."""

    id: str
    user_id: int
    csrf_token: str
    ip: str | None
    created_at: datetime
    last_seen_at: datetime
    expires_at: datetime
    revoked_at: datetime | None


USER_COLUMNS = tuple(field.name for field in fields(ConsoleUserRow))
SESSION_COLUMNS = tuple(field.name for field in fields(ConsoleSessionRow))

_user_table = ConsoleUser.__table__
_session_table = ConsoleSession.__table__
_user = select(*(_user_table.c[name] for name in USER_COLUMNS))

# The id is the database's (the admin API and the CLI name a user by it).
_ADD_USER = Statement(insert(ConsoleUser).values(binds(ConsoleUser, USER_COLUMNS[1:])).returning(ConsoleUser.id))
_USER = Statement(_user.where(ConsoleUser.id == bindparam("user_id")))
_USER_BY_EMAIL = Statement(_user.where(ConsoleUser.email == bindparam("email")))
_USERS = Statement(_user.order_by(ConsoleUser.id))
_USERS_OF = Statement(_user.where(ConsoleUser.merchant_id == bindparam("merchant_id")).order_by(ConsoleUser.id))
# The UPDATE of each set of columns the service changes (disabling, a new password, a sign-in).
_SAVES: dict[tuple[str, ...], Statement] = {}
_COUNT_FAILURE = Statement(
    update(ConsoleUser)
    .where(ConsoleUser.id == bindparam("user_id"))
    .values(
        failed_sign_ins=ConsoleUser.failed_sign_ins + 1, updated_at=bindparam("now", type_=ConsoleUser.updated_at.type)
    )
)
_FAILURES = Statement(select(ConsoleUser.failed_sign_ins).where(ConsoleUser.id == bindparam("user_id")))
_LOCK = Statement(
    update(ConsoleUser)
    .where(ConsoleUser.id == bindparam("user_id"))
    .values(locked_until=bindparam("until", type_=ConsoleUser.locked_until.type), failed_sign_ins=0)
)

_ADD_SESSION = Statement(insert(ConsoleSession).values(binds(ConsoleSession, SESSION_COLUMNS)))
_SESSION_WITH_USER = Statement(
    select(*(_session_table.c[name] for name in SESSION_COLUMNS), *(_user_table.c[name] for name in USER_COLUMNS))
    .join_from(ConsoleSession, ConsoleUser, ConsoleUser.id == ConsoleSession.user_id)
    .where(ConsoleSession.id == bindparam("session_id"))
)
_TOUCH = Statement(
    update(ConsoleSession)
    .where(ConsoleSession.id == bindparam("session_id"))
    .values(last_seen_at=bindparam("now", type_=ConsoleSession.last_seen_at.type))
)
_REVOKE = Statement(
    update(ConsoleSession)
    .where(ConsoleSession.id == bindparam("session_id"), ConsoleSession.revoked_at.is_(None))
    .values(revoked_at=bindparam("now", type_=ConsoleSession.revoked_at.type))
)
_REVOKE_ALL = Statement(
    update(ConsoleSession)
    .where(ConsoleSession.user_id == bindparam("user_id"), ConsoleSession.revoked_at.is_(None))
    .values(revoked_at=bindparam("now", type_=ConsoleSession.revoked_at.type))
)


class ConsoleRepository:
    async def add_user(
        self,
        session: Session,
        *,
        email: str,
        role: str,
        merchant_id: str | None,
        password_hash: str,
        created_at: datetime,
    ) -> ConsoleUserRow:
        """A new user (every column); an email taken meanwhile is refused by the unique constraint."""
        values: dict[str, Any] = {
            "email": email,
            "role": role,
            "merchant_id": merchant_id,
            "password_hash": password_hash,
            "failed_sign_ins": 0,
            "locked_until": None,
            "disabled_at": None,
            "created_at": created_at,
            "updated_at": created_at,
            "last_sign_in_at": None,
        }
        user_id = await _ADD_USER.scalar(session, **values)
        return ConsoleUserRow(id=int(user_id), **values)

    async def user(self, session: Session, user_id: int) -> ConsoleUserRow | None:
        found = await _USER.first(session, user_id=user_id)
        return None if found is None else ConsoleUserRow(*found)

    async def user_by_email(self, session: Session, email: str) -> ConsoleUserRow | None:
        found = await _USER_BY_EMAIL.first(session, email=email)
        return None if found is None else ConsoleUserRow(*found)

    async def users(self, session: Session) -> list[ConsoleUserRow]:
        return [ConsoleUserRow(*row) for row in await _USERS.rows(session)]

    async def users_of(self, session: Session, merchant_id: str) -> list[ConsoleUserRow]:
        return [ConsoleUserRow(*row) for row in await _USERS_OF.rows(session, merchant_id=merchant_id)]

    async def save_user(self, session: Session, user: ConsoleUserRow, columns: tuple[str, ...]) -> None:
        """Write the `columns` the service changed, and only those: what another unit changed meanwhile
        in the user's other columns (a failed sign-in counted, an operator disabling it) stays."""
        statement = _SAVES.get(columns)
        if statement is None:
            statement = _SAVES[columns] = Statement(
                update(ConsoleUser).where(ConsoleUser.id == bindparam("user_id")).values(binds(ConsoleUser, columns))
            )
        await statement.execute(session, user_id=user.id, **{name: getattr(user, name) for name in columns})

    async def count_failure(self, session: Session, user_id: int, now: datetime) -> int:
        """One more failed sign-in in a row, counted in the database (concurrent tries each count); the count."""
        await _COUNT_FAILURE.execute(session, user_id=user_id, now=now)
        count = await _FAILURES.scalar(session, user_id=user_id)
        return int(count or 0)

    async def lock(self, session: Session, user_id: int, until: datetime) -> None:
        await _LOCK.execute(session, user_id=user_id, until=until)

    async def add_session(self, session: Session, row: ConsoleSessionRow) -> None:
        await _ADD_SESSION.execute(session, **{name: getattr(row, name) for name in SESSION_COLUMNS})

    async def session_with_user(
        self, session: Session, session_id: str
    ) -> tuple[ConsoleSessionRow, ConsoleUserRow] | None:
        found = await _SESSION_WITH_USER.first(session, session_id=session_id)
        if found is None:
            return None
        split = len(SESSION_COLUMNS)
        return ConsoleSessionRow(*found[:split]), ConsoleUserRow(*found[split:])

    async def touch(self, session: Session, session_id: str, now: datetime) -> None:
        await _TOUCH.execute(session, session_id=session_id, now=now)

    async def revoke(self, session: Session, session_id: str, now: datetime) -> None:
        await _REVOKE.execute(session, session_id=session_id, now=now)

    async def revoke_all(self, session: Session, user_id: int, now: datetime) -> None:
        await _REVOKE_ALL.execute(session, user_id=user_id, now=now)


console_repository = ConsoleRepository()

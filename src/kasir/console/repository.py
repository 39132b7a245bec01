"""Every query of console users and sessions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update

from kasir.console.models import ConsoleSession, ConsoleUser
from kasir.db import Session


class ConsoleRepository:
    async def add(self, session: Session, row: ConsoleUser | ConsoleSession) -> None:
        session.add(row)
        await session.flush()

    async def user(self, session: Session, user_id: int) -> ConsoleUser | None:
        return await session.get(ConsoleUser, user_id)

    async def user_by_email(self, session: Session, email: str) -> ConsoleUser | None:
        return (await session.scalars(select(ConsoleUser).where(ConsoleUser.email == email))).one_or_none()

    async def users(self, session: Session) -> Sequence[ConsoleUser]:
        return (await session.scalars(select(ConsoleUser).order_by(ConsoleUser.id))).all()

    async def count_failure(self, session: Session, user_id: int, now: datetime) -> int:
        """One more failed sign-in in a row, counted in the database (concurrent tries each count); the count."""
        await session.execute(
            update(ConsoleUser)
            .where(ConsoleUser.id == user_id)
            .values(failed_sign_ins=ConsoleUser.failed_sign_ins + 1, updated_at=now)
        )
        count = await session.scalar(select(ConsoleUser.failed_sign_ins).where(ConsoleUser.id == user_id))
        return int(count or 0)

    async def lock(self, session: Session, user_id: int, until: datetime) -> None:
        await session.execute(
            update(ConsoleUser).where(ConsoleUser.id == user_id).values(locked_until=until, failed_sign_ins=0)
        )

    async def session_with_user(
        self, session: Session, session_id: str
    ) -> tuple[ConsoleSession, ConsoleUser] | None:
        row = (
            await session.execute(
                select(ConsoleSession, ConsoleUser)
                .join(ConsoleUser, ConsoleUser.id == ConsoleSession.user_id)
                .where(ConsoleSession.id == session_id)
            )
        ).one_or_none()
        return None if row is None else (row[0], row[1])

    async def touch(self, session: Session, session_id: str, now: datetime) -> None:
        await session.execute(update(ConsoleSession).where(ConsoleSession.id == session_id).values(last_seen_at=now))

    async def revoke(self, session: Session, session_id: str, now: datetime) -> None:
        await session.execute(
            update(ConsoleSession)
            .where(ConsoleSession.id == session_id, ConsoleSession.revoked_at.is_(None))
            .values(revoked_at=now)
        )

    async def revoke_all(self, session: Session, user_id: int, now: datetime) -> None:
        await session.execute(
            update(ConsoleSession)
            .where(ConsoleSession.user_id == user_id, ConsoleSession.revoked_at.is_(None))
            .values(revoked_at=now)
        )


console_repository = ConsoleRepository()

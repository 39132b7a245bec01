from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, func, insert, null, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from kasir.callbacks.models import Callback, CallbackAttempt
from kasir.db import Statement, binds

# Every attempt writes these two (kasir.db.Statement: compiled once, no ORM unit of work per attempt).
_ATTEMPT_COLUMNS = (
    "callback_id",
    "number",
    "fence",
    "worker",
    "started_at",
    "latency_ms",
    "http_status",
    "error",
    "response_excerpt",
    "accepted",
)
_ADD_ATTEMPT = Statement(insert(CallbackAttempt).values(binds(CallbackAttempt, _ATTEMPT_COLUMNS)))
_OUTCOME_COLUMNS = ("status", "attempts_made", "next_attempt_at", "delivered_at", "last_error")
_RECORD_OUTCOME = Statement(
    update(Callback)
    .where(Callback.id == bindparam("callback_id"), Callback.fence == bindparam("held_fence"))
    .values(lease_owner=null(), lease_expires_at=null(), **binds(Callback, _OUTCOME_COLUMNS))
)


class CallbackRepository:
    async def add(self, session: AsyncSession, callback: Callback) -> None:
        session.add(callback)
        await session.flush()

    async def add_attempt(self, session: AsyncSession, **values: Any) -> None:
        """One attempt as it went: every column of `_ATTEMPT_COLUMNS`."""
        await _ADD_ATTEMPT.execute(session, **values)

    async def record_outcome(self, session: AsyncSession, callback_id: int, fence: int, **values: Any) -> bool:
        """The callback's state after an attempt, and its lease let go; False when the fence moved on."""
        return await _RECORD_OUTCOME.execute(session, callback_id=callback_id, held_fence=fence, **values) == 1

    async def get(self, session: AsyncSession, callback_id: int) -> Callback | None:
        return await session.get(Callback, callback_id)

    async def attempts(self, session: AsyncSession, callback_id: int) -> Sequence[CallbackAttempt]:
        result = await session.execute(
            select(CallbackAttempt).where(CallbackAttempt.callback_id == callback_id).order_by(CallbackAttempt.id)
        )
        return result.scalars().all()

    async def search(
        self,
        session: AsyncSession,
        *,
        status: str | None = None,
        merchant_id: str | None = None,
        transaction_ref: str | None = None,
        limit: int = 100,
    ) -> Sequence[Callback]:
        query = select(Callback).order_by(Callback.id.desc()).limit(limit)
        if status is not None:
            query = query.where(Callback.status == status)
        if merchant_id is not None:
            query = query.where(Callback.merchant_id == merchant_id)
        if transaction_ref is not None:
            query = query.where(Callback.transaction_ref == transaction_ref)
        return (await session.execute(query)).scalars().all()

    async def count_by_status(self, session: AsyncSession) -> dict[str, int]:
        result = await session.execute(select(Callback.status, func.count()).group_by(Callback.status))
        return {status: count for status, count in result.all()}

    async def for_transaction(self, session: AsyncSession, transaction_ref: str) -> Sequence[Callback]:
        result = await session.execute(
            select(Callback).where(Callback.transaction_ref == transaction_ref).order_by(Callback.id)
        )
        return result.scalars().all()


callback_repository = CallbackRepository()

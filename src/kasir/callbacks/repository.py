from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kasir.callbacks.models import Callback, CallbackAttempt


class CallbackRepository:
    async def add(self, session: AsyncSession, callback: Callback) -> None:
        session.add(callback)
        await session.flush()

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

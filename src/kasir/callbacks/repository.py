from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
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

    async def for_transaction(self, session: AsyncSession, transaction_ref: str) -> Sequence[Callback]:
        result = await session.execute(
            select(Callback).where(Callback.transaction_ref == transaction_ref).order_by(Callback.id)
        )
        return result.scalars().all()


callback_repository = CallbackRepository()

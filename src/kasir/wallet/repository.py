"""Every wallet query."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kasir.db import add_unless_duplicate
from kasir.wallet.models import WalletRefund, WalletTransaction
from kasir.wallet.states import WalletStatus


class WalletRepository:
    async def add_transaction(self, session: AsyncSession, tx: WalletTransaction) -> bool:
        """False when the merchant already used the external_id (the unique constraint decides races)."""
        return await add_unless_duplicate(session, tx)

    async def by_external_id(
        self, session: AsyncSession, merchant_id: str, external_id: str
    ) -> WalletTransaction | None:
        return await session.scalar(
            select(WalletTransaction).where(
                WalletTransaction.merchant_id == merchant_id, WalletTransaction.external_id == external_id
            )
        )

    async def get(self, session: AsyncSession, transaction_id: str, *, lock: bool = False) -> WalletTransaction | None:
        query = select(WalletTransaction).where(WalletTransaction.id == transaction_id)
        if lock:
            query = query.with_for_update()
        return await session.scalar(query.execution_options(populate_existing=True))

    async def add_refund(self, session: AsyncSession, refund: WalletRefund) -> None:
        session.add(refund)
        await session.flush()

    async def refunds(self, session: AsyncSession, transaction_id: str) -> Sequence[WalletRefund]:
        result = await session.scalars(
            select(WalletRefund).where(WalletRefund.transaction_id == transaction_id).order_by(WalletRefund.id)
        )
        return result.all()

    async def due_for_expiry(self, session: AsyncSession, now: datetime, limit: int = 500) -> Sequence[str]:
        result = await session.scalars(
            select(WalletTransaction.id)
            .where(WalletTransaction.status == WalletStatus.PENDING.value, WalletTransaction.expires_at <= now)
            .order_by(WalletTransaction.expires_at)
            .limit(limit)
        )
        return result.all()


wallet_repository = WalletRepository()

"""Every BNPL query."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from kasir.bnpl.models import BnplExternalId, BnplPricing, BnplTransaction
from kasir.bnpl.states import BnplStatus
from kasir.db import add_unless_duplicate, upsert_insert


class BnplRepository:
    async def claim_external_id(
        self, session: AsyncSession, merchant_id: str, day: date, external_id: str, now: datetime
    ) -> bool:
        """Record the (merchant, day, X-EXTERNAL-ID); False when it is taken.

        One `INSERT ... ON CONFLICT DO NOTHING` (SQLite and PostgreSQL alike): the unique constraint
        decides races, with no look-up before it and no savepoint around it (every SNAP request pays this).
        """
        statement = (
            upsert_insert(session, BnplExternalId)
            .values(merchant_id=merchant_id, day=day, external_id=external_id, created_at=now)
            .on_conflict_do_nothing(index_elements=["merchant_id", "day", "external_id"])
            .returning(BnplExternalId.id)
        )
        return (await session.execute(statement)).scalar_one_or_none() is not None

    async def forget_external_ids_before(self, session: AsyncSession, day: date) -> None:
        await session.execute(delete(BnplExternalId).where(BnplExternalId.day < day))

    async def add_transaction(self, session: AsyncSession, tx: BnplTransaction) -> bool:
        """False when partnerReferenceNo is taken for this merchant."""
        return await add_unless_duplicate(session, tx)

    async def by_partner_reference(
        self, session: AsyncSession, merchant_id: str, partner_reference_no: str
    ) -> BnplTransaction | None:
        return await session.scalar(
            select(BnplTransaction).where(
                BnplTransaction.merchant_id == merchant_id,
                BnplTransaction.partner_reference_no == partner_reference_no,
            )
        )

    async def get(self, session: AsyncSession, reference_no: str, *, lock: bool = False) -> BnplTransaction | None:
        query = select(BnplTransaction).where(BnplTransaction.id == reference_no)
        if lock:
            query = query.with_for_update()
        return await session.scalar(query.execution_options(populate_existing=True))

    async def due_for_expiry(self, session: AsyncSession, now: datetime, limit: int = 500) -> Sequence[str]:
        result = await session.scalars(
            select(BnplTransaction.id)
            .where(BnplTransaction.status == BnplStatus.INITIATED.value, BnplTransaction.expires_at <= now)
            .order_by(BnplTransaction.expires_at)
            .limit(limit)
        )
        return result.all()

    async def pricing(self, session: AsyncSession, merchant_id: str) -> BnplPricing | None:
        return await session.get(BnplPricing, merchant_id)

    async def save_pricing(self, session: AsyncSession, pricing: BnplPricing) -> None:
        await session.merge(pricing)
        await session.flush()


bnpl_repository = BnplRepository()

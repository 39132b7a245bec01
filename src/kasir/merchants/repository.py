from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from kasir.merchants.models import Merchant, MerchantCredentialGrace


class MerchantRepository:
    async def add(self, session: AsyncSession, merchant: Merchant) -> None:
        session.add(merchant)
        await session.flush()

    async def get(self, session: AsyncSession, merchant_id: str) -> Merchant | None:
        return await session.get(Merchant, merchant_id)

    async def get_by_client_id(self, session: AsyncSession, client_id: str) -> Merchant | None:
        result = await session.execute(select(Merchant).where(Merchant.client_id == client_id))
        return result.scalar_one_or_none()

    async def get_by_name(self, session: AsyncSession, name: str) -> Merchant | None:
        result = await session.execute(select(Merchant).where(Merchant.name == name))
        return result.scalar_one_or_none()

    async def list(self, session: AsyncSession) -> Sequence[Merchant]:
        result = await session.execute(select(Merchant).order_by(Merchant.created_at, Merchant.id))
        return result.scalars().all()

    async def add_grace(self, session: AsyncSession, grace: MerchantCredentialGrace) -> None:
        session.add(grace)
        await session.flush()

    async def cut_grace(self, session: AsyncSession, merchant_id: str, kind: str, until: datetime) -> None:
        """Every replaced `kind` of the merchant accepted until `until` at the latest."""
        await session.execute(
            update(MerchantCredentialGrace)
            .where(
                MerchantCredentialGrace.merchant_id == merchant_id,
                MerchantCredentialGrace.kind == kind,
                MerchantCredentialGrace.expires_at > until,
            )
            .values(expires_at=until)
        )

    async def grace(self, session: AsyncSession, merchant_id: str, now: datetime) -> Sequence[MerchantCredentialGrace]:
        """The merchant's replaced credentials whose grace period has not ended at `now`."""
        result = await session.scalars(
            select(MerchantCredentialGrace)
            .where(MerchantCredentialGrace.merchant_id == merchant_id, MerchantCredentialGrace.expires_at > now)
            .order_by(MerchantCredentialGrace.id)
        )
        return result.all()


merchant_repository = MerchantRepository()

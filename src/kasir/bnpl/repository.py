"""Every BNPL query.

Every SNAP request claims its X-EXTERNAL-ID and reads its merchant; the calculation reads the
pricing table and the checkout inserts its transaction. Those statements are compiled once
(kasir.db.Statement) and hand back plain rows. The transitions (approve, reject, expiry) and the
status inquiry lock or read the transaction through the ORM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import bindparam, delete, select

from kasir.bnpl.models import BnplExternalId, BnplPricing, BnplTransaction
from kasir.bnpl.states import BnplStatus
from kasir.db import Session, Statement, binds
from kasir.merchants.models import Merchant

# The unique constraint decides races, with no look-up before it and no savepoint around it.
_CLAIM_EXTERNAL_ID = Statement(
    lambda insert: (
        insert(BnplExternalId)
        .values(binds(BnplExternalId, ("merchant_id", "day", "external_id", "created_at")))
        .on_conflict_do_nothing(index_elements=["merchant_id", "day", "external_id"])
        .returning(BnplExternalId.id)
    )
)

# The unique (merchant_id, partner_reference_no) refuses a reused partnerReferenceNo: no savepoint, no exception.
_ADD_TRANSACTION = Statement(
    lambda insert: (
        insert(BnplTransaction).values(binds(BnplTransaction)).on_conflict_do_nothing().returning(BnplTransaction.id)
    )
)

# What verifying a SNAP request needs of its merchant (a merchant's row, read by the BNPL room).
_SNAP_MERCHANT = Statement(
    select(Merchant.id, Merchant.client_secret_encrypted, Merchant.public_key_pem, Merchant.disabled_at).where(
        Merchant.id == bindparam("merchant_id")
    )
)

_PLANS = Statement(select(BnplPricing.plans).where(BnplPricing.merchant_id == bindparam("merchant_id")))


@dataclass(frozen=True, slots=True)
class SnapMerchant:
    """The merchant named by X-PARTNER-ID: its id, its client secret (sealed) and its public key."""

    id: str
    client_secret_encrypted: str
    public_key_pem: str
    disabled_at: datetime | None


class BnplRepository:
    async def claim_external_id(
        self, session: Session, merchant_id: str, day: date, external_id: str, now: datetime
    ) -> bool:
        """Record the (merchant, day, X-EXTERNAL-ID); False when it is taken.

        One `INSERT ... ON CONFLICT DO NOTHING` (SQLite and PostgreSQL alike): the unique constraint
        decides races (every SNAP request pays this).
        """
        claimed = await _CLAIM_EXTERNAL_ID.scalar(
            session, merchant_id=merchant_id, day=day, external_id=external_id, created_at=now
        )
        return claimed is not None

    async def forget_external_ids_before(self, session: Session, day: date) -> None:
        await session.execute(delete(BnplExternalId).where(BnplExternalId.day < day))

    async def snap_merchant(self, session: Session, merchant_id: str) -> SnapMerchant | None:
        row = await _SNAP_MERCHANT.first(session, merchant_id=merchant_id)
        return None if row is None else SnapMerchant(*row)

    async def add_transaction(self, session: Session, values: dict[str, Any]) -> bool:
        """Insert a transaction (every column); False when partnerReferenceNo is taken for this merchant.

        The unique constraint decides races between concurrent checkouts.
        """
        return await _ADD_TRANSACTION.scalar(session, **values) is not None

    async def by_partner_reference(
        self, session: Session, merchant_id: str, partner_reference_no: str
    ) -> BnplTransaction | None:
        return await session.scalar(
            select(BnplTransaction).where(
                BnplTransaction.merchant_id == merchant_id,
                BnplTransaction.partner_reference_no == partner_reference_no,
            )
        )

    async def get(self, session: Session, reference_no: str, *, lock: bool = False) -> BnplTransaction | None:
        query = select(BnplTransaction).where(BnplTransaction.id == reference_no)
        if lock:
            query = query.with_for_update()
        return await session.scalar(query.execution_options(populate_existing=True))

    async def due_for_expiry(self, session: Session, now: datetime, limit: int = 500) -> Sequence[str]:
        result = await session.scalars(
            select(BnplTransaction.id)
            .where(BnplTransaction.status == BnplStatus.INITIATED.value, BnplTransaction.expires_at <= now)
            .order_by(BnplTransaction.expires_at)
            .limit(limit)
        )
        return result.all()

    async def plans(self, session: Session, merchant_id: str) -> str | None:
        """The merchant's own pricing table (JSON), or None without one."""
        plans: str | None = await _PLANS.scalar(session, merchant_id=merchant_id)
        return plans

    async def save_pricing(self, session: Session, pricing: BnplPricing) -> None:
        await session.merge(pricing)
        await session.flush()


bnpl_repository = BnplRepository()

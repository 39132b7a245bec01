"""Every wallet query.

Create-payment and inquiry run on every payment: their statements are compiled once
(kasir.db.Statement) and hand back plain rows (`TransactionRow`, `RefundRow`) instead of ORM
objects. The transitions (pay, fail, refund, void, expiry) lock the row and change it through
the ORM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession

from kasir.db import Statement, binds
from kasir.wallet.models import WalletRefund, WalletTransaction
from kasir.wallet.states import WalletStatus


@dataclass(frozen=True, slots=True)
class TransactionRow:
    """A wallet transaction as read (or just written): every column of `wallet_transaction`."""

    id: str
    merchant_id: str
    external_id: str
    order_id: str
    reference_id: str
    payment_channel: str
    currency: str
    amount: int
    refunded_amount: int
    status: str
    description: str
    callback_url: str
    return_url: str | None
    details: str
    qr_string: str | None
    terminal_id: str | None
    failure_reason: str | None
    issuer: str | None
    retrieval_reference_no: str | None
    created_at: datetime
    expires_at: datetime
    updated_at: datetime
    paid_at: datetime | None
    voided_at: datetime | None

    @property
    def refundable_amount(self) -> int:
        return self.amount - self.refunded_amount


@dataclass(frozen=True, slots=True)
class RefundRow:
    """One refund, as the refund_history shows it."""

    refunded_at: datetime
    amount: int


TRANSACTION_COLUMNS = tuple(field.name for field in fields(TransactionRow))

# The unique (merchant_id, external_id) refuses a reused external_id: no savepoint, no exception.
_ADD_TRANSACTION = Statement(
    lambda insert: (
        insert(WalletTransaction)
        .values(binds(WalletTransaction, TRANSACTION_COLUMNS))
        .on_conflict_do_nothing()
        .returning(WalletTransaction.id)
    )
)
_TRANSACTION = Statement(
    select(*(WalletTransaction.__table__.c[name] for name in TRANSACTION_COLUMNS)).where(
        WalletTransaction.id == bindparam("transaction_id")
    )
)
_REFUNDS = Statement(
    select(WalletRefund.refunded_at, WalletRefund.amount)
    .where(WalletRefund.transaction_id == bindparam("transaction_id"))
    .order_by(WalletRefund.id)
)


class WalletRepository:
    async def add_transaction(self, session: AsyncSession, values: dict[str, Any]) -> bool:
        """Insert a transaction (every column); False when the merchant already used the external_id.

        The unique constraint decides races between concurrent requests.
        """
        return await _ADD_TRANSACTION.scalar(session, **values) is not None

    async def row(self, session: AsyncSession, transaction_id: str) -> TransactionRow | None:
        """The transaction as it is now (no lock, no ORM object)."""
        found = await _TRANSACTION.first(session, transaction_id=transaction_id)
        return None if found is None else TransactionRow(*found)

    async def get(self, session: AsyncSession, transaction_id: str, *, lock: bool = False) -> WalletTransaction | None:
        query = select(WalletTransaction).where(WalletTransaction.id == transaction_id)
        if lock:
            query = query.with_for_update()
        return await session.scalar(query.execution_options(populate_existing=True))

    async def add_refund(self, session: AsyncSession, refund: WalletRefund) -> None:
        session.add(refund)
        await session.flush()

    async def refunds(self, session: AsyncSession, transaction_id: str) -> list[RefundRow]:
        """The transaction's refunds, oldest first."""
        return [RefundRow(*row) for row in await _REFUNDS.rows(session, transaction_id=transaction_id)]

    async def due_for_expiry(self, session: AsyncSession, now: datetime, limit: int = 500) -> Sequence[str]:
        result = await session.scalars(
            select(WalletTransaction.id)
            .where(WalletTransaction.status == WalletStatus.PENDING.value, WalletTransaction.expires_at <= now)
            .order_by(WalletTransaction.expires_at)
            .limit(limit)
        )
        return result.all()


wallet_repository = WalletRepository()

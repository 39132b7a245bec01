"""Every BNPL query.

Every SNAP request claims its X-EXTERNAL-ID and reads its merchant; the calculation reads the
pricing table and the checkout inserts its transaction. Those statements are compiled once
(kasir.db.Statement) and hand back plain rows (`TransactionRow`). A transition (approve, reject,
expiry) reads its row locked, changes it, and `save`s the columns a transition changes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Integer, bindparam, select, update

from kasir.bnpl.models import BnplPricing, BnplTransaction, amount_of
from kasir.bnpl.states import BnplStatus
from kasir.db import Session, Statement, binds, locked_once


@dataclass(slots=True)
class TransactionRow:
    """A BNPL transaction as read: every column of `bnpl_transaction`.

    Changed only by the service's transitions, on a row read locked, and written back by `save`.
    """

    id: str
    merchant_id: str
    partner_reference_no: str
    amount_cents: int
    currency: str
    status: str
    status_desc: str
    callback_url: str
    channel_id: str
    details: str
    tenure: int | None
    created_at: datetime
    expires_at: datetime
    updated_at: datetime
    paid_at: datetime | None

    @property
    def amount(self) -> Decimal:
        return amount_of(self.amount_cents)


TRANSACTION_COLUMNS = tuple(field.name for field in fields(TransactionRow))
# What a transition changes; the rest is written once, at the checkout.
CHANGING_COLUMNS = ("status", "status_desc", "tenure", "updated_at", "paid_at")

# The unique (merchant_id, partner_reference_no) refuses a reused partnerReferenceNo: no savepoint, no exception.
_ADD_TRANSACTION = Statement(
    lambda insert: (
        insert(BnplTransaction).values(binds(BnplTransaction)).on_conflict_do_nothing().returning(BnplTransaction.id)
    )
)

_transaction = select(*(BnplTransaction.__table__.c[name] for name in TRANSACTION_COLUMNS))
_TRANSACTION = Statement(_transaction.where(BnplTransaction.id == bindparam("reference_no")))
_LOCKED_TRANSACTION = Statement(_transaction.where(BnplTransaction.id == bindparam("reference_no")).with_for_update())
_BY_PARTNER_REFERENCE = Statement(
    _transaction.where(
        BnplTransaction.merchant_id == bindparam("merchant_id"),
        BnplTransaction.partner_reference_no == bindparam("partner_reference_no"),
    )
)
_SAVE_TRANSACTION = Statement(
    update(BnplTransaction)
    .where(BnplTransaction.id == bindparam("reference_no"))
    .values(binds(BnplTransaction, CHANGING_COLUMNS))
)
_DUE_FOR_EXPIRY = Statement(
    select(BnplTransaction.id)
    .where(
        BnplTransaction.status == BnplStatus.INITIATED.value,
        BnplTransaction.expires_at <= bindparam("now", type_=BnplTransaction.expires_at.type),
    )
    .order_by(BnplTransaction.expires_at)
    .limit(bindparam("due_limit", type_=Integer()))
)


def _upsert_pricing(insert: Any) -> Any:
    """One statement whether or not the merchant has a table already: the primary key decides."""
    statement = insert(BnplPricing).values(binds(BnplPricing, ("merchant_id", "plans", "updated_at")))
    return statement.on_conflict_do_update(
        index_elements=[BnplPricing.merchant_id],
        set_={"plans": statement.excluded.plans, "updated_at": statement.excluded.updated_at},
    )


_SAVE_PRICING = Statement(_upsert_pricing)

_PLANS = Statement(select(BnplPricing.plans).where(BnplPricing.merchant_id == bindparam("merchant_id")))


class BnplRepository:
    async def add_transaction(self, session: Session, values: dict[str, Any]) -> bool:
        """Insert a transaction (every column); False when partnerReferenceNo is taken for this merchant.

        The unique constraint decides races between concurrent checkouts.
        """
        return await _ADD_TRANSACTION.scalar(session, **values) is not None

    async def by_partner_reference(
        self, session: Session, merchant_id: str, partner_reference_no: str
    ) -> TransactionRow | None:
        found = await _BY_PARTNER_REFERENCE.first(
            session, merchant_id=merchant_id, partner_reference_no=partner_reference_no
        )
        return None if found is None else TransactionRow(*found)

    async def row(self, session: Session, reference_no: str) -> TransactionRow | None:
        """The transaction as it is now (no lock, no ORM object)."""
        found = await _TRANSACTION.first(session, reference_no=reference_no)
        return None if found is None else TransactionRow(*found)

    async def get(self, session: Session, reference_no: str, *, lock: bool = False) -> TransactionRow | None:
        """The transaction; with `lock`, locked until the unit of work ends, and read once per unit:
        a second locked read (the simulator's page locks before the notification applies) is the
        first's row, with the changes the unit made to it."""
        if not lock:
            return await self.row(session, reference_no)

        async def read() -> TransactionRow | None:
            found = await _LOCKED_TRANSACTION.first(session, reference_no=reference_no)
            return None if found is None else TransactionRow(*found)

        row: TransactionRow | None = await locked_once(session, (BnplTransaction, reference_no), read)
        return row

    async def save(self, session: Session, tx: TransactionRow) -> None:
        """Write a transition's changes (`CHANGING_COLUMNS`) of a row read locked."""
        values = {name: getattr(tx, name) for name in CHANGING_COLUMNS}
        await _SAVE_TRANSACTION.execute(session, reference_no=tx.id, **values)

    async def due_for_expiry(self, session: Session, now: datetime, limit: int = 500) -> list[str]:
        """Up to `limit` Initiated transactions past their validityPeriod, the longest due first."""
        return [row[0] for row in await _DUE_FOR_EXPIRY.rows(session, now=now, due_limit=limit)]

    async def plans(self, session: Session, merchant_id: str) -> str | None:
        """The merchant's own pricing table (JSON), or None without one."""
        plans: str | None = await _PLANS.scalar(session, merchant_id=merchant_id)
        return plans

    async def save_pricing(self, session: Session, merchant_id: str, plans: str | None, updated_at: datetime) -> None:
        """The merchant's own pricing table (JSON), or None for the shipped default; replaces any before."""
        await _SAVE_PRICING.execute(session, merchant_id=merchant_id, plans=plans, updated_at=updated_at)


bnpl_repository = BnplRepository()

"""Every wallet query.

Every payment runs these: their statements are compiled once (kasir.db.Statement) and hand back
plain rows (`TransactionRow`, `RefundRow`) instead of ORM objects. A transition (pay, fail,
refund, void, expiry) reads its row locked, changes it, and `save`s the columns a transition
changes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, bindparam, insert, select, update

from kasir.db import Session, Statement, binds, locked_once
from kasir.payments.external_ids import holders
from kasir.payments.owners import lock_owner_first
from kasir.va.models import VirtualAccount
from kasir.wallet.models import WalletRefund, WalletTransaction
from kasir.wallet.states import WalletStatus


@dataclass(slots=True)
class TransactionRow:
    """A wallet transaction as read (or just written): every column of `wallet_transaction`.

    Changed only by the service's transitions, on a row read locked, and written back by `save`.
    """

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
    link_id: str | None = None  # the owning payment link (kasir.links), else None

    @property
    def refundable_amount(self) -> int:
        return self.amount - self.refunded_amount


@dataclass(frozen=True, slots=True)
class RefundRow:
    """One refund, as the refund_history shows it."""

    refunded_at: datetime
    amount: int


TRANSACTION_COLUMNS = tuple(field.name for field in fields(TransactionRow))
# What a transition changes; the rest is written once, at creation.
CHANGING_COLUMNS = (
    "status",
    "refunded_amount",
    "failure_reason",
    "issuer",
    "retrieval_reference_no",
    "updated_at",
    "paid_at",
    "voided_at",
)


def _add_transaction(insert: Any) -> Any:
    """INSERT ... SELECT the values WHERE no VA or payment link of the merchant has the external_id (§9.2: one
    namespace for the merchant's payments); the unique (merchant_id, external_id) refuses a wallet one. No
    savepoint, no exception: the row is refused, and RETURNING says so."""
    values = binds(WalletTransaction, TRANSACTION_COLUMNS)
    a_va_has_it = select(VirtualAccount.id).where(
        VirtualAccount.merchant_id == values["merchant_id"], VirtualAccount.external_id == values["external_id"]
    )
    # SQLite reads "INSERT ... SELECT ... ON CONFLICT" right only when the SELECT has a WHERE: it has.
    a_link_has_it = holders(values["merchant_id"], values["external_id"])  # kasir.payments.external_ids
    rows = select(*(value.label(name) for name, value in values.items())).where(
        ~a_va_has_it.exists(), *(~query.exists() for query in a_link_has_it)
    )
    table = WalletTransaction.__table__
    return (
        insert(table)
        .from_select([table.c[name] for name in values], rows)
        .on_conflict_do_nothing()
        .returning(table.c.id)
    )


_ADD_TRANSACTION = Statement(_add_transaction)
_transaction = select(*(WalletTransaction.__table__.c[name] for name in TRANSACTION_COLUMNS)).where(
    WalletTransaction.id == bindparam("transaction_id")
)
_TRANSACTION = Statement(_transaction)
_LOCKED_TRANSACTION = Statement(_transaction.with_for_update())
_SAVE_TRANSACTION = Statement(
    update(WalletTransaction)
    .where(WalletTransaction.id == bindparam("transaction_id"))
    .values(binds(WalletTransaction, CHANGING_COLUMNS))
)
_ADD_REFUND = Statement(
    insert(WalletRefund).values(binds(WalletRefund, ("transaction_id", "amount", "reason", "refunded_at")))
)
_DUE_FOR_EXPIRY = Statement(
    select(WalletTransaction.id)
    .where(
        WalletTransaction.status == WalletStatus.PENDING.value,
        WalletTransaction.expires_at <= bindparam("now", type_=WalletTransaction.expires_at.type),
    )
    .order_by(WalletTransaction.expires_at)
    .limit(bindparam("due_limit", type_=Integer()))
)
_REFUNDS = Statement(
    select(WalletRefund.refunded_at, WalletRefund.amount)
    .where(WalletRefund.transaction_id == bindparam("transaction_id"))
    .order_by(WalletRefund.id)
)


class WalletRepository:
    async def add_transaction(self, session: Session, values: dict[str, Any]) -> bool:
        """Insert a transaction (every column); False when the merchant already used the external_id.

        The unique constraint decides races between concurrent requests.
        """
        return await _ADD_TRANSACTION.scalar(session, **values) is not None

    async def row(self, session: Session, transaction_id: str) -> TransactionRow | None:
        """The transaction as it is now (no lock, no ORM object)."""
        found = await _TRANSACTION.first(session, transaction_id=transaction_id)
        return None if found is None else TransactionRow(*found)

    async def get(self, session: Session, transaction_id: str, *, lock: bool = False) -> TransactionRow | None:
        """The transaction; with `lock`, locked until the unit of work ends (PostgreSQL: FOR UPDATE;
        SQLite: the unit holds the database's one write seat already), and read once per unit: a
        second locked read is the first's row, with the changes the unit made to it."""
        if not lock:
            return await self.row(session, transaction_id)

        async def read() -> TransactionRow | None:
            await lock_owner_first(session, WalletTransaction, transaction_id)  # a link's: the link first
            found = await _LOCKED_TRANSACTION.first(session, transaction_id=transaction_id)
            return None if found is None else TransactionRow(*found)

        row: TransactionRow | None = await locked_once(session, (WalletTransaction, transaction_id), read)
        return row

    async def save(self, session: Session, tx: TransactionRow) -> None:
        """Write a transition's changes (`CHANGING_COLUMNS`) of a row read locked."""
        values = {name: getattr(tx, name) for name in CHANGING_COLUMNS}
        await _SAVE_TRANSACTION.execute(session, transaction_id=tx.id, **values)

    async def add_refund(
        self, session: Session, transaction_id: str, amount: int, reason: str | None, refunded_at: datetime
    ) -> None:
        """Record one refund (its id is the table's own)."""
        await _ADD_REFUND.execute(
            session, transaction_id=transaction_id, amount=amount, reason=reason, refunded_at=refunded_at
        )

    async def refunds(self, session: Session, transaction_id: str) -> list[RefundRow]:
        """The transaction's refunds, oldest first."""
        return [RefundRow(*row) for row in await _REFUNDS.rows(session, transaction_id=transaction_id)]

    async def due_for_expiry(self, session: Session, now: datetime, limit: int = 500) -> list[str]:
        """Up to `limit` PENDING transactions past their expired_time, the longest due first."""
        return [row[0] for row in await _DUE_FOR_EXPIRY.rows(session, now=now, due_limit=limit)]


wallet_repository = WalletRepository()

"""Every VA query: statements compiled once (kasir.db.Statement), plain rows back.

A payment, an expiry or a cancel reads its VA locked, changes it, and `save`s the columns a
transition changes; a payment adds its row in the same unit.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, bindparam, select, union_all, update

from kasir.card.models import CardOrder
from kasir.db import Session, Statement, binds, locked_once
from kasir.payments.external_ids import holders
from kasir.payments.owners import lock_owner_first
from kasir.va.models import VaPayment, VirtualAccount
from kasir.wallet.models import WalletTransaction


@dataclass(slots=True)
class VaRow:
    """A VA as read (or just written): every column of `virtual_account`."""

    id: str
    merchant_id: str
    sub_merchant_id: str | None
    external_id: str
    order_id: str
    payment_channel: str
    bank: str
    va_number: str
    open_number: str | None
    payment_system: str
    is_multi_use: bool
    amount: int
    total_paid_amount: int
    status: str
    billing_name: str
    description: str
    is_customer_paying_fee: bool
    callback_url: str
    details: str
    created_at: datetime
    expires_at: datetime
    open_until: datetime | None
    updated_at: datetime
    link_id: str | None = None  # the owning payment link (kasir.links), else None

    @property
    def remaining_amount(self) -> int:
        """PARTIAL: what is left to pay; every other payment system: 0."""
        return max(self.amount - self.total_paid_amount, 0) if self.payment_system == "PARTIAL" else 0


@dataclass(frozen=True, slots=True)
class PaymentRow:
    reference_id: str
    amount: int
    paid_at: datetime


VA_COLUMNS = tuple(field.name for field in fields(VaRow))
# What a payment, an expiry or a cancel changes; the rest is written once, at creation.
CHANGING_COLUMNS = ("status", "total_paid_amount", "open_number", "open_until", "updated_at")
HISTORY_SIZE = 5  # the provider's inquiry shows the last five payments (§9.6)


def _add(insert: Any) -> Any:
    """INSERT ... SELECT the VA WHERE no wallet transaction or card order of the merchant has its external_id
    (§9.2: one namespace for the merchant's payments); either unique constraint refuses it too: the external_id
    of another VA of the merchant, or a number another open VA of the bank holds (`external_id_taken` says
    which). No savepoint, no exception."""
    values = binds(VirtualAccount, VA_COLUMNS)
    taken = [
        select(table.id).where(table.merchant_id == values["merchant_id"], table.external_id == values["external_id"])
        for table in (WalletTransaction, CardOrder)
    ] + holders(values["merchant_id"], values["external_id"])  # and a payment link's (kasir.payments.external_ids)
    # SQLite reads "INSERT ... SELECT ... ON CONFLICT" right only when the SELECT has a WHERE: it has.
    rows = select(*(value.label(name) for name, value in values.items())).where(*(~query.exists() for query in taken))
    table = VirtualAccount.__table__
    return insert(table).from_select([table.c[name] for name in values], rows).on_conflict_do_nothing()


_ADD = Statement(_add)
_va = select(*(VirtualAccount.__table__.c[name] for name in VA_COLUMNS))
_VA = Statement(_va.where(VirtualAccount.id == bindparam("va_id")))
_LOCKED_VA = Statement(_va.where(VirtualAccount.id == bindparam("va_id")).with_for_update())
_SAVE = Statement(
    update(VirtualAccount)
    .where(VirtualAccount.id == bindparam("va_id"))
    .values(binds(VirtualAccount, CHANGING_COLUMNS))
)
_BY_EXTERNAL_ID = Statement(
    # Built on first use: the declared tables (a payment link's) are known once every model is imported.
    lambda _: union_all(
        *(
            select(table.id).where(
                table.merchant_id == bindparam("merchant_id"), table.external_id == bindparam("external_id")
            )
            for table in (VirtualAccount, WalletTransaction, CardOrder)
        ),
        *holders(bindparam("merchant_id"), bindparam("external_id")),
    ).limit(1)
)
_NUMBER_HOLDER = Statement(
    select(VirtualAccount.id).where(
        VirtualAccount.bank == bindparam("bank"), VirtualAccount.open_number == bindparam("number")
    )
)
_ADD_PAYMENT = Statement(
    lambda insert: (
        insert(VaPayment)
        .values(binds(VaPayment, ("va_id", "reference_id", "bank_reference", "amount", "paid_at")))
        .on_conflict_do_nothing()
        .returning(VaPayment.id)
    )
)
_PAYMENT_BY_BANK_REFERENCE = Statement(
    select(VaPayment.id).where(
        VaPayment.va_id == bindparam("va_id"), VaPayment.bank_reference == bindparam("bank_reference")
    )
)
_PAYMENTS = Statement(
    select(VaPayment.reference_id, VaPayment.amount, VaPayment.paid_at)
    .where(VaPayment.va_id == bindparam("va_id"))
    .order_by(VaPayment.id.desc())
    .limit(HISTORY_SIZE)
)
_DUE_FOR_EXPIRY = Statement(
    select(VirtualAccount.id)
    .where(VirtualAccount.open_until <= bindparam("now", type_=VirtualAccount.expires_at.type))
    .order_by(VirtualAccount.open_until)
    .limit(bindparam("due_limit", type_=Integer()))
)


class VaRepository:
    async def add(self, session: Session, va: VaRow) -> bool:
        """Insert the VA; False when the merchant used its external_id before or its number is another
        open VA's (`external_id_taken` says which). The unique constraints decide races."""
        inserted = await _ADD.execute(session, **{name: getattr(va, name) for name in VA_COLUMNS})
        return inserted == 1

    async def external_id_taken(self, session: Session, merchant_id: str, external_id: str) -> bool:
        """After a refused `add`: True when the external_id was the cause (another payment of the merchant has
        it), False when the number was."""
        return await _BY_EXTERNAL_ID.scalar(session, merchant_id=merchant_id, external_id=external_id) is not None

    async def number_holder(self, session: Session, bank: str, number: str) -> str | None:
        """The open VA of `bank` that holds `number`, or None."""
        holder: str | None = await _NUMBER_HOLDER.scalar(session, bank=bank, number=number)
        return holder

    async def get(self, session: Session, va_id: str, *, lock: bool = False) -> VaRow | None:
        """The VA; with `lock`, locked until the unit ends and read once per unit (kasir.db.locked_once)."""
        if not lock:
            found = await _VA.first(session, va_id=va_id)
            return None if found is None else VaRow(*found)

        async def read() -> VaRow | None:
            await lock_owner_first(session, VirtualAccount, va_id)  # a link's: the link first
            found = await _LOCKED_VA.first(session, va_id=va_id)
            return None if found is None else VaRow(*found)

        row: VaRow | None = await locked_once(session, (VirtualAccount, va_id), read)
        return row

    async def save(self, session: Session, va: VaRow) -> None:
        values = {name: getattr(va, name) for name in CHANGING_COLUMNS}
        await _SAVE.execute(session, va_id=va.id, **values)

    async def add_payment(
        self,
        session: Session,
        va_id: str,
        reference_id: str,
        bank_reference: str | None,
        amount: int,
        paid_at: datetime,
    ) -> bool:
        """Record one payment; False when the bank's reference was recorded before (a repeated notification)."""
        added = await _ADD_PAYMENT.scalar(
            session,
            va_id=va_id,
            reference_id=reference_id,
            bank_reference=bank_reference,
            amount=amount,
            paid_at=paid_at,
        )
        return added is not None

    async def payment_recorded(self, session: Session, va_id: str, bank_reference: str) -> bool:
        return await _PAYMENT_BY_BANK_REFERENCE.scalar(session, va_id=va_id, bank_reference=bank_reference) is not None

    async def payments(self, session: Session, va_id: str) -> list[PaymentRow]:
        """The VA's last HISTORY_SIZE payments, newest first."""
        return [PaymentRow(*row) for row in await _PAYMENTS.rows(session, va_id=va_id)]

    async def due_for_expiry(self, session: Session, now: datetime, limit: int = 500) -> list[str]:
        """Up to `limit` open VAs past their expired_time, the longest due first."""
        return [row[0] for row in await _DUE_FOR_EXPIRY.rows(session, now=now, due_limit=limit)]


va_repository = VaRepository()

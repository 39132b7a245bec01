"""Every disbursement-balance query: statements compiled once, plain rows back.

A credit is one upsert (the balance row is made by the first credit); a change of the hold or the ledger is one
UPDATE whose WHERE says when it may apply (the available balance covers it), so two units never spend the same
rupiah: the row's lock orders them, and the second finds the first's change.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, bindparam, func, select

from kasir.db import Session, Statement, binds
from kasir.payouts.models import DisbursementBalance, DisbursementTopUp, PayoutTransfer


@dataclass(frozen=True, slots=True)
class BalanceRow:
    ledger: int
    hold: int

    @property
    def available(self) -> int:
        return self.ledger - self.hold


@dataclass(frozen=True, slots=True)
class TopUpRow:
    id: int
    merchant_id: str
    amount: int
    note: str
    created_at: datetime


def _credit(insert: Any) -> Any:
    statement = insert(DisbursementBalance).values(binds(DisbursementBalance, ("merchant_id", "ledger", "updated_at")))
    statement = statement.values(hold=0)
    return statement.on_conflict_do_update(
        index_elements=[DisbursementBalance.merchant_id],
        set_={
            "ledger": DisbursementBalance.ledger + statement.excluded.ledger,
            "updated_at": statement.excluded.updated_at,
        },
    ).returning(DisbursementBalance.ledger, DisbursementBalance.hold)


_CREDIT = Statement(_credit)
_BALANCE = Statement(
    select(DisbursementBalance.ledger, DisbursementBalance.hold).where(
        DisbursementBalance.merchant_id == bindparam("merchant_id")
    )
)
_ADD_TOP_UP = Statement(
    lambda insert: (
        insert(DisbursementTopUp)
        .values(binds(DisbursementTopUp, ("merchant_id", "amount", "note", "created_at")))
        .returning(DisbursementTopUp.id)
    )
)
_TOP_UPS = Statement(
    select(
        DisbursementTopUp.id,
        DisbursementTopUp.merchant_id,
        DisbursementTopUp.amount,
        DisbursementTopUp.note,
        DisbursementTopUp.created_at,
    )
    .where(DisbursementTopUp.merchant_id == bindparam("merchant_id"))
    .order_by(DisbursementTopUp.created_at.desc(), DisbursementTopUp.id.desc())
    .limit(bindparam("limit", type_=Integer()))
)
# /metrics, at scrape time: every transfer by state, and the balances' sums over every merchant.
_TRANSFERS_BY_STATUS = Statement(
    select(PayoutTransfer.status, func.count(PayoutTransfer.id)).group_by(PayoutTransfer.status)
)
_BALANCE_SUMS = Statement(
    select(func.coalesce(func.sum(DisbursementBalance.ledger), 0), func.coalesce(func.sum(DisbursementBalance.hold), 0))
)


class PayoutRepository:
    async def balance(self, session: Session, merchant_id: str) -> BalanceRow:
        """The merchant's balance; zeros before its first credit."""
        row = await _BALANCE.first(session, merchant_id=merchant_id)
        return BalanceRow(0, 0) if row is None else BalanceRow(*row)

    async def credit(self, session: Session, merchant_id: str, amount: int, now: datetime) -> BalanceRow:
        """Add `amount` to the ledger (made at the first credit); the balance after it."""
        row = await _CREDIT.first(session, merchant_id=merchant_id, ledger=amount, updated_at=now)
        assert row is not None
        return BalanceRow(*row)

    async def add_top_up(self, session: Session, merchant_id: str, amount: int, note: str, now: datetime) -> int:
        top_up_id = await _ADD_TOP_UP.scalar(session, merchant_id=merchant_id, amount=amount, note=note, created_at=now)
        return int(top_up_id)

    async def top_ups(self, session: Session, merchant_id: str, limit: int) -> list[TopUpRow]:
        """The merchant's latest top-ups, newest first (the console's balance card; its index has them in order)."""
        return [TopUpRow(*row) for row in await _TOP_UPS.rows(session, merchant_id=merchant_id, limit=limit)]

    async def transfers_by_status(self, session: Session) -> dict[str, int]:
        return {str(status): int(count) for status, count in await _TRANSFERS_BY_STATUS.rows(session)}

    async def balance_sums(self, session: Session) -> BalanceRow:
        """Every merchant's ledger and hold, summed."""
        row = await _BALANCE_SUMS.first(session)
        return BalanceRow(0, 0) if row is None else BalanceRow(int(row[0]), int(row[1]))


payout_repository = PayoutRepository()

"""Every disbursement query (balances, top-ups, transfers): statements compiled once, plain rows back.

A credit is one upsert (the balance row is made by the first credit); a change of the hold or the ledger is one
UPDATE whose WHERE says when it may apply (the available balance covers it), so two units never spend the same
rupiah: the row's lock orders them, and the second finds the first's change.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Integer, and_, bindparam, func, or_, select, update

from kasir.db import Session, Statement, binds, fetch, locked_once
from kasir.payouts.models import DisbursementBalance, DisbursementTopUp, PayoutTransfer
from kasir.payouts.states import DESCRIPTIONS, TransferStatus


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

    async def top_ups(
        self, session: Session, merchant_id: str, start: datetime, end: datetime, limit: int
    ) -> list[TopUpRow]:
        """The merchant's newest `limit` top-ups made in [start, end], newest first."""
        statement = (
            select(
                DisbursementTopUp.id,
                DisbursementTopUp.merchant_id,
                DisbursementTopUp.amount,
                DisbursementTopUp.note,
                DisbursementTopUp.created_at,
            )
            .where(
                DisbursementTopUp.merchant_id == merchant_id,
                DisbursementTopUp.created_at >= start,
                DisbursementTopUp.created_at <= end,
            )
            .order_by(DisbursementTopUp.created_at.desc(), DisbursementTopUp.id.desc())
            .limit(limit)
        )
        return [TopUpRow(*row) for row in await fetch(session, statement)]

    async def add_top_up(self, session: Session, merchant_id: str, amount: int, note: str, now: datetime) -> int:
        top_up_id = await _ADD_TOP_UP.scalar(session, merchant_id=merchant_id, amount=amount, note=note, created_at=now)
        return int(top_up_id)

    async def latest_top_ups(self, session: Session, merchant_id: str, limit: int) -> list[TopUpRow]:
        """The merchant's latest top-ups, newest first (the console's balance card; its index has them in order)."""
        return [TopUpRow(*row) for row in await _TOP_UPS.rows(session, merchant_id=merchant_id, limit=limit)]

    async def transfers_by_status(self, session: Session) -> dict[str, int]:
        return {str(status): int(count) for status, count in await _TRANSFERS_BY_STATUS.rows(session)}

    async def balance_sums(self, session: Session) -> BalanceRow:
        """Every merchant's ledger and hold, summed."""
        row = await _BALANCE_SUMS.first(session)
        return BalanceRow(0, 0) if row is None else BalanceRow(int(row[0]), int(row[1]))


payout_repository = PayoutRepository()


# --- transfers ---------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class TransferRow:
    """A transfer as read (or just written): every column of `payout_transfer`."""

    id: str
    merchant_id: str
    partner_reference_no: str
    external_id: str
    amount: int
    currency: str
    held: int
    beneficiary_account_no: str
    beneficiary_account_name: str
    beneficiary_bank_code: str
    bank: str
    beneficiary_bank_name: str
    source_account_no: str
    fee_type: str
    status: str
    reason: str | None
    rail: str
    rail_reference: str | None
    callback_url: str | None
    transaction_date: str | None
    remark: str | None
    details: str
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    refunded_at: datetime | None
    next_check_at: datetime | None
    key_scope: str | None
    idempotency_key: str | None

    @property
    def status_description(self) -> str:
        return DESCRIPTIONS[TransferStatus(self.status)]


@dataclass(frozen=True, slots=True)
class TransferFilter:
    """Which transfers the console lists (kasir.payouts.reports makes one from what a person typed)."""

    merchant_id: str | None = None
    matches_nothing: bool = False  # a merchant user asking for another merchant's
    status: str | None = None
    query: str | None = None  # a referenceNo or a partnerReferenceNo, exactly
    since: datetime | None = None
    until: datetime | None = None


TRANSFER_COLUMNS = tuple(field.name for field in fields(TransferRow))
# What a move of state changes; the rest is written once, at acceptance.
CHANGING_COLUMNS = (
    "status",
    "held",
    "reason",
    "rail_reference",
    "updated_at",
    "finished_at",
    "refunded_at",
    "next_check_at",
)

_ADD_TRANSFER = Statement(
    lambda insert: (
        insert(PayoutTransfer)
        .values(binds(PayoutTransfer, TRANSFER_COLUMNS))
        .on_conflict_do_nothing(index_elements=["merchant_id", "partner_reference_no"])
        .returning(PayoutTransfer.id)
    )
)
_transfer = select(*(PayoutTransfer.__table__.c[name] for name in TRANSFER_COLUMNS))
_TRANSFER = Statement(_transfer.where(PayoutTransfer.id == bindparam("transfer_id")))
_LOCKED_TRANSFER = Statement(_transfer.where(PayoutTransfer.id == bindparam("transfer_id")).with_for_update())
_BY_PARTNER_REFERENCE = Statement(
    _transfer.where(
        PayoutTransfer.merchant_id == bindparam("merchant_id"),
        PayoutTransfer.partner_reference_no == bindparam("partner_reference_no"),
    )
)
_BY_REFERENCE = Statement(
    _transfer.where(
        PayoutTransfer.merchant_id == bindparam("merchant_id"), PayoutTransfer.id == bindparam("transfer_id")
    )
)
_SAVE_TRANSFER = Statement(
    update(PayoutTransfer)
    .where(PayoutTransfer.id == bindparam("transfer_id"))
    .values(binds(PayoutTransfer, CHANGING_COLUMNS))
)
_FORGET_KEY = Statement(
    update(PayoutTransfer)
    .where(PayoutTransfer.id == bindparam("transfer_id"))
    .values(key_scope=None, idempotency_key=None)
)
# One worker at a time asks the rail about a transfer: the one whose UPDATE moved its next check past the ask.
_CLAIM_CHECK = Statement(
    update(PayoutTransfer)
    .where(
        PayoutTransfer.id == bindparam("transfer_id"),
        PayoutTransfer.next_check_at <= bindparam("now", type_=PayoutTransfer.next_check_at.type),
    )
    .values(next_check_at=bindparam("until", type_=PayoutTransfer.next_check_at.type))
)
_DUE_FOR_CHECK = Statement(
    select(PayoutTransfer.id)
    .where(PayoutTransfer.next_check_at <= bindparam("now", type_=PayoutTransfer.next_check_at.type))
    .order_by(PayoutTransfer.next_check_at)
    .limit(bindparam("due_limit", type_=Integer()))
)
# §11.3: the check and the hold are one statement: two units never spend the same rupiah (the row's lock orders
# them, and the second's WHERE sees the first's hold).
_HOLD = Statement(
    update(DisbursementBalance)
    .where(
        DisbursementBalance.merchant_id == bindparam("merchant_id"),
        DisbursementBalance.ledger - DisbursementBalance.hold >= bindparam("amount", type_=BigInteger()),
    )
    .values(
        hold=DisbursementBalance.hold + bindparam("amount", type_=BigInteger()),
        updated_at=bindparam("now", type_=DisbursementBalance.updated_at.type),
    )
)
# A transfer ends: `debit` leaves the ledger (00) or not (05, 06), `release` leaves the hold; 04 credits back.
_SETTLE = Statement(
    update(DisbursementBalance)
    .where(DisbursementBalance.merchant_id == bindparam("merchant_id"))
    .values(
        ledger=DisbursementBalance.ledger - bindparam("debit", type_=BigInteger()),
        hold=DisbursementBalance.hold - bindparam("release", type_=BigInteger()),
        updated_at=bindparam("now", type_=DisbursementBalance.updated_at.type),
    )
)


class TransferRepository:
    async def add(self, session: Session, transfer: TransferRow) -> bool:
        """Insert the transfer; False when the merchant's partnerReferenceNo was accepted before (the unique
        constraint decides races)."""
        added = await _ADD_TRANSFER.scalar(session, **{name: getattr(transfer, name) for name in TRANSFER_COLUMNS})
        return added is not None

    async def hold(self, session: Session, merchant_id: str, amount: int, now: datetime) -> bool:
        """Hold `amount` when the available balance covers it; False (nothing changed) when it does not."""
        return await _HOLD.execute(session, merchant_id=merchant_id, amount=amount, now=now) == 1

    async def settle(self, session: Session, merchant_id: str, *, debit: int, release: int, now: datetime) -> None:
        """Take `debit` off the ledger (negative: credit it back) and `release` off the hold."""
        await _SETTLE.execute(session, merchant_id=merchant_id, debit=debit, release=release, now=now)

    async def get(self, session: Session, transfer_id: str, *, lock: bool = False) -> TransferRow | None:
        """The transfer; with `lock`, locked until the unit ends and read once per unit (kasir.db.locked_once)."""
        if not lock:
            found = await _TRANSFER.first(session, transfer_id=transfer_id)
            return None if found is None else TransferRow(*found)

        async def read() -> TransferRow | None:
            found = await _LOCKED_TRANSFER.first(session, transfer_id=transfer_id)
            return None if found is None else TransferRow(*found)

        row: TransferRow | None = await locked_once(session, (PayoutTransfer, transfer_id), read)
        return row

    async def by_partner_reference(
        self, session: Session, merchant_id: str, partner_reference_no: str
    ) -> TransferRow | None:
        found = await _BY_PARTNER_REFERENCE.first(
            session, merchant_id=merchant_id, partner_reference_no=partner_reference_no
        )
        return None if found is None else TransferRow(*found)

    async def by_reference(self, session: Session, merchant_id: str, reference_no: str) -> TransferRow | None:
        found = await _BY_REFERENCE.first(session, merchant_id=merchant_id, transfer_id=reference_no)
        return None if found is None else TransferRow(*found)

    async def save(self, session: Session, transfer: TransferRow) -> None:
        values = {name: getattr(transfer, name) for name in CHANGING_COLUMNS}
        await _SAVE_TRANSFER.execute(session, transfer_id=transfer.id, **values)

    async def forget_key(self, session: Session, transfer_id: str) -> None:
        """The transfer's X-Idempotency-Key has its answer: nobody stores it again."""
        await _FORGET_KEY.execute(session, transfer_id=transfer_id)

    async def history(
        self,
        session: Session,
        merchant_id: str,
        start: datetime,
        end: datetime,
        limit: int,
        *,
        refunds: bool = False,
        partner_reference_no: str | None = None,
    ) -> list[TransferRow]:
        """The merchant's newest `limit` transfers accepted in [start, end] (`refunds`: returned in it), newest
        first; `partner_reference_no`: that transfer only."""
        moment = PayoutTransfer.refunded_at if refunds else PayoutTransfer.created_at
        statement = _transfer.where(PayoutTransfer.merchant_id == merchant_id, moment >= start, moment <= end)
        if partner_reference_no is not None:
            statement = statement.where(PayoutTransfer.partner_reference_no == partner_reference_no)
        statement = statement.order_by(moment.desc(), PayoutTransfer.id.desc()).limit(limit)
        return [TransferRow(*row) for row in await fetch(session, statement)]

    async def listed(
        self, session: Session, where: TransferFilter, after: tuple[datetime, str] | None, limit: int
    ) -> list[TransferRow]:
        """Up to `limit` of the filtered transfers, newest first, after the (created_at, id) `after`."""
        if where.matches_nothing:
            return []
        conditions: list[Any] = []
        if where.merchant_id:
            conditions.append(PayoutTransfer.merchant_id == where.merchant_id)
        if where.status:
            conditions.append(PayoutTransfer.status == where.status)
        if where.query:
            conditions.append(or_(PayoutTransfer.id == where.query, PayoutTransfer.partner_reference_no == where.query))
        if where.since:
            conditions.append(PayoutTransfer.created_at >= where.since)
        if where.until:
            conditions.append(PayoutTransfer.created_at < where.until)
        if after is not None:
            moment, transfer_id = after
            conditions.append(
                or_(
                    PayoutTransfer.created_at < moment,
                    and_(PayoutTransfer.created_at == moment, PayoutTransfer.id < transfer_id),
                )
            )
        statement = _transfer.where(*conditions) if conditions else _transfer
        statement = statement.order_by(PayoutTransfer.created_at.desc(), PayoutTransfer.id.desc()).limit(limit)
        return [TransferRow(*row) for row in await fetch(session, statement)]

    async def claim_check(self, session: Session, transfer_id: str, now: datetime, until: datetime) -> bool:
        """Take the transfer's due check until `until` (False: another worker took it, or it is not due)."""
        return await _CLAIM_CHECK.execute(session, transfer_id=transfer_id, now=now, until=until) == 1

    async def due_for_check(self, session: Session, now: datetime, limit: int = 200) -> list[str]:
        """Up to `limit` transfers the worker should ask the rail about now, the longest due first."""
        return [row[0] for row in await _DUE_FOR_CHECK.rows(session, now=now, due_limit=limit)]


transfer_repository = TransferRepository()

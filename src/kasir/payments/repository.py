"""Read-only queries across the product tables (wallet, BNPL, card, VA, payment link), for the payments list and
the overview.

Each product is read by its own statement with the same shape (newest first, keyset by
(created_at, id)), and the rows are merged in Python: every statement walks an index
(kasir.payments.models) and stops after one page, whatever the number of payments.

One payment's details are plain rows too, each product's own, read through its repository;
callbacks as kasir.callbacks.repository's rows.

A payment link is one payment: the card orders, wallet transactions and VAs its page made (`link_id` set)
are its attempts, listed, found and counted as the link (docs/decisions.md §10.3: their own product's
routes do not find them either). Any of their ids, and a link's VA number, finds the link.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    Integer,
    String,
    and_,
    bindparam,
    case,
    func,
    literal,
    literal_column,
    or_,
    select,
    union_all,
)

from kasir.bnpl.models import BnplTransaction, amount_of
from kasir.bnpl.repository import TransactionRow as BnplTransactionRow
from kasir.bnpl.repository import bnpl_repository
from kasir.callbacks.models import Callback, CallbackAttempt
from kasir.callbacks.repository import (
    ATTEMPT_SELECT,
    CALLBACK_SELECT,
    CallbackAttemptRow,
    CallbackRow,
    callback_repository,
)
from kasir.card.models import CardOrder
from kasir.card.repository import CardAttemptRow, CardOrderRow, card_repository
from kasir.db import Session, Statement, fetch
from kasir.links.models import LinkAttempt, PaymentLink
from kasir.links.repository import AttemptRow, link_repository
from kasir.merchants.models import Merchant
from kasir.va.models import VaPayment, VirtualAccount
from kasir.wallet.models import WalletRefund, WalletTransaction
from kasir.wallet.repository import TransactionRow as WalletTransactionRow
from kasir.wallet.repository import wallet_repository

PRODUCTS = ("wallet", "bnpl", "card", "va", "link")

# Each product's statuses by outcome: the one status filter of the list, across products.
OUTCOMES: dict[str, dict[str, tuple[str, ...]]] = {
    "wallet": {
        "pending": ("PENDING",),
        "paid": ("PAID",),
        "refunded": ("REFUNDED",),
        "void": ("VOID",),
        "expired": ("EXPIRED",),
        "failed": ("failed",),
    },
    "bnpl": {
        "pending": ("01", "02", "03"),
        "paid": ("00",),
        "refunded": ("04",),
        "expired": ("05",),
        "failed": ("06",),
    },
    "card": {"pending": ("PENDING", "AUTHENTICATING"), "paid": ("SUCCESS",), "expired": ("EXPIRED",)},
    # A PARTIALLY_PAID VA still waits for the rest; a cancelled one is neither void (nothing goes back: §9.5)
    # nor expired (someone stopped it), hence an outcome of its own.
    "va": {
        "pending": ("PENDING", "PARTIALLY_PAID"),
        "paid": ("PAID",),
        "expired": ("EXPIRED",),
        "cancelled": ("CANCELLED",),
    },
    # A failed attempt leaves the link PENDING (another method may still pay it); the third ends it EXPIRED.
    "link": {"pending": ("PENDING",), "paid": ("SUCCESS",), "expired": ("EXPIRED",)},
}
# Added at the end: every earlier name keeps its place (the admin API and the CLI take them).
OUTCOME_NAMES = ("pending", "paid", "refunded", "void", "expired", "failed", "cancelled")


def outcome_of(product: str, status: str) -> str:
    for outcome, statuses in OUTCOMES[product].items():
        if status in statuses:
            return outcome
    return "pending"


@dataclass(frozen=True, slots=True)
class PaymentRow:
    """One payment of any product, in the list's columns."""

    product: str
    id: str
    merchant_id: str
    external_id: str | None
    order_id: str | None  # BNPL: partnerReferenceNo
    channel: str
    status: str
    outcome: str
    amount: Decimal
    created_at: datetime
    updated_at: datetime
    paid_at: datetime | None  # VA: its latest payment's
    va_number: str | None = None  # VA only
    paid_amount: Decimal | None = None  # VA only: the sum of its payments (total_paid_amount)
    payment_method: str | None = None  # payment link only, once paid: CARD, WALLET or VIRTUAL_ACCOUNT

    @property
    def sort_key(self) -> tuple[datetime, str]:
        return (self.created_at, self.id)


@dataclass(frozen=True, slots=True)
class Total:
    """The overview's numbers of one product and outcome."""

    product: str
    outcome: str
    count: int
    volume: Decimal  # VA: what came in (total_paid_amount), not what the VAs asked for
    refunded: Decimal  # of `volume`, returned to customers so far
    net: Decimal = Decimal(0)  # what the merchant keeps of `volume`: paid less refunded; VA: all of it


@dataclass(frozen=True, slots=True)
class PaymentFilter:
    merchant_id: str | None = None
    product: str | None = None
    outcome: str | None = None
    channel: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    query: str | None = None  # any id a merchant or customer quotes, exact
    matches_nothing: bool = False  # a merchant user asking for another merchant's payments


_CALLBACKS_OF_PAYMENT = Statement(
    CALLBACK_SELECT.where(
        Callback.merchant_id == bindparam("merchant_id"), Callback.transaction_ref == bindparam("payment_id")
    ).order_by(Callback.id)
)
_REFUNDS_WITH_REASONS = Statement(
    select(WalletRefund.refunded_at, WalletRefund.amount, WalletRefund.reason)
    .where(WalletRefund.transaction_id == bindparam("payment_id"))
    .order_by(WalletRefund.id)
)


@dataclass(frozen=True, slots=True)
class RefundWithReason:
    refunded_at: datetime
    amount: int
    reason: str | None


_VA_PAYMENTS = Statement(
    select(VaPayment.reference_id, VaPayment.bank_reference, VaPayment.amount, VaPayment.paid_at)
    .where(VaPayment.va_id == bindparam("payment_id"))
    .order_by(VaPayment.id)
)


@dataclass(frozen=True, slots=True)
class VaPaymentEntry:
    reference_id: str
    bank_reference: str | None  # the issuer's (production); None for a dummy payment
    amount: int
    paid_at: datetime


_CALLBACK = Statement(CALLBACK_SELECT.where(Callback.id == bindparam("callback_id")))


_NONE = literal_column("''", String(1))


class _Table:
    """How one product's table answers the list's questions."""

    def __init__(
        self,
        product: str,
        model: Any,
        *,
        external: Any,
        order: Any,
        channel: Any,
        amount: Any,
        searchable: Sequence[Any],
        refunded: Any = None,
        volume: Any = None,
        paid_at: Any = None,
        channels: Sequence[Any] = (),
        numbers: Sequence[Any] = (),
        extra: dict[str, Any] | None = None,
        kept_whatever_the_outcome: bool = False,
        owned_by_links: bool = False,
        found_by: Callable[[str, str | None], list[Any]] | None = None,
    ) -> None:
        self.product = product
        self.model = model
        self.external = external
        self.order = order
        self.channel = channel
        self.amount = amount
        # Refunded so far, where the product keeps it (the wallet); None: a refund returns the whole amount.
        self.refunded = refunded
        # What the overview sums as volume (the VA: what came in; the others: the payment's amount).
        self.volume = amount if volume is None else volume
        self.paid_at = model.paid_at if paid_at is None else paid_at
        # The channel filter matches any of these (the VA: the channel as sent, or its bank: BCA finds BCA-MCP).
        self.channels = channels or (channel,)
        self.searchable = searchable
        # Searched by the query's digits too, as a customer reads a number out ("4041 6000 0012 345").
        self.numbers = numbers
        self.extra = extra or {}  # PaymentRow's product-only fields, by name
        # Money paid in stays paid whatever becomes of the payment (a VA expired or cancelled after a payment, §9.5).
        self.kept_whatever_the_outcome = kept_whatever_the_outcome
        # A payment link's attempts are the link's: left out of this product's list, search and numbers. Not
        # `link_id IS NULL`, which SQLite (no statistics) answers through the link_id index, every row of the
        # table being NULL there: a test the list's and the overview's own indexes carry out on the way.
        self.own = [func.coalesce(model.link_id, _NONE) == _NONE] if owned_by_links else []
        # More ways a query finds a payment (a link: by its attempts' ids), given the query and its digits.
        self.found_by = found_by
        self.by_id = Statement(select(*self.columns()).where(model.id == bindparam("payment_id"), *self.own))

    def span_totals(self, index: int, of_merchant: bool) -> Any:
        """The overview's numbers of span `index` (binds low<index>, high<index>; PaymentsRepository.totals):
        this product's count, volume and refunded volume by status, all merchants' or one's."""
        m = self.model
        back = func.coalesce(func.sum(self.refunded), 0) if self.refunded is not None else literal(0, Integer())
        statement = select(
            literal(self.product, String(8)),
            literal(index, Integer()),
            m.status,
            func.count(),
            func.coalesce(func.sum(self.volume), 0),
            back,
        ).where(
            m.created_at >= bindparam(f"low{index}", type_=m.created_at.type),
            m.created_at < bindparam(f"high{index}", type_=m.created_at.type),
            *self.own,
        )
        if of_merchant:
            statement = statement.where(m.merchant_id == bindparam("merchant_id"))
        return statement.group_by(m.status)

    def columns(self) -> list[Any]:
        m = self.model
        return [
            m.id,
            m.merchant_id,
            self.external,
            self.order,
            self.channel,
            m.status,
            self.amount,
            m.created_at,
            m.updated_at,
            self.paid_at,
            *self.extra.values(),
        ]

    def money(self, amount: int) -> Decimal:
        """An amount as the column holds it (BNPL: cents) in rupiah."""
        return amount_of(amount) if self.product == "bnpl" else Decimal(amount)

    def row(self, values: Any) -> PaymentRow:
        id_, merchant_id, external, order, channel, status, amount, created, updated, paid, *extra = values
        money = self.money(amount)
        product_only = dict(zip(self.extra, extra, strict=True))
        if "paid_amount" in product_only:
            product_only["paid_amount"] = self.money(int(product_only["paid_amount"]))
        return PaymentRow(
            self.product,
            id_,
            merchant_id,
            external,
            order,
            channel,
            status,
            outcome_of(self.product, status),
            money,
            created,
            updated,
            paid,
            **product_only,
        )

    def conditions(self, where: PaymentFilter) -> list[Any] | None:
        """The WHERE of this table for the filter; None when no row of this product can match."""
        m = self.model
        found: list[Any] = list(self.own)
        if where.matches_nothing or (where.product and where.product != self.product):
            return None
        if where.merchant_id:
            found.append(m.merchant_id == where.merchant_id)
        if where.outcome:
            statuses = OUTCOMES[self.product].get(where.outcome)
            if not statuses:
                return None
            found.append(m.status.in_(statuses))
        if where.channel:
            if self.product == "bnpl":
                if where.channel.upper() != "BNPL":
                    return None
            elif not (self.product == "link" and where.channel.upper() == "LINK"):  # LINK: every link
                wanted = where.channel.upper()
                found.append(or_(*(column == wanted for column in self.channels)))
        if where.since is not None:
            found.append(m.created_at >= where.since)
        if where.until is not None:
            found.append(m.created_at < where.until)
        if where.query:
            matches = [column == where.query for column in self.searchable]
            digits = _digits(where.query)
            if digits and digits != where.query:
                matches += [column == digits for column in self.numbers]
            if self.found_by is not None:
                matches += self.found_by(where.query, digits)
            found.append(or_(*matches))
        return found


def _digits(query: str) -> str | None:
    """A number as a person writes it (spaces, dots, dashes between the digits) as its digits; None if it is not."""
    digits = "".join(ch for ch in query if ch not in " .-")
    return digits if digits.isdigit() else None


# A VA's latest payment: its `paid_at` in the list (a multi-use VA is paid again and again).
_LAST_VA_PAYMENT = (
    select(func.max(VaPayment.paid_at))
    .where(VaPayment.va_id == VirtualAccount.id)
    .scalar_subquery()
    .label("last_paid_at")
)


def _link_found_by(query: str, digits: str | None) -> list[Any]:
    """A link by any of its attempts' ids (the card order's, wallet transaction's, VA's) or its VA's number."""
    numbers = {query, digits} - {None}
    return [
        PaymentLink.id.in_(select(LinkAttempt.link_id).where(LinkAttempt.inner_id == query)),
        PaymentLink.id.in_(
            select(VirtualAccount.link_id).where(
                VirtualAccount.va_number.in_(sorted(n for n in numbers if n)), VirtualAccount.link_id.is_not(None)
            )
        ),
    ]


# A link's channel in the list: the paying method's (DANA, QRIS, CARD, VA) once paid; LINK until then (an
# attempt that failed is not how it was paid). The channel filter takes either (LINK: every link).
_LINK = literal_column("'LINK'", String(8))  # in the statement's text: no bind to type on either database
_LINK_PAID_BY = case((PaymentLink.status == literal_column("'SUCCESS'"), PaymentLink.payment_method), else_=None).label(
    "paid_by"
)
_LINK_CHANNEL = case(
    (PaymentLink.status == literal_column("'SUCCESS'"), func.coalesce(PaymentLink.payment_channel, _LINK)), else_=_LINK
).label("channel")


_TABLES = {
    "wallet": _Table(
        "wallet",
        WalletTransaction,
        external=WalletTransaction.external_id,
        order=WalletTransaction.order_id,
        channel=WalletTransaction.payment_channel,
        amount=WalletTransaction.amount,
        refunded=WalletTransaction.refunded_amount,
        searchable=(
            WalletTransaction.id,
            WalletTransaction.external_id,
            WalletTransaction.order_id,
            WalletTransaction.reference_id,
        ),
        owned_by_links=True,
    ),
    "bnpl": _Table(
        "bnpl",
        BnplTransaction,
        external=BnplTransaction.partner_reference_no,
        order=BnplTransaction.partner_reference_no,
        channel=literal("BNPL", String(8)),
        amount=BnplTransaction.amount_cents,
        searchable=(BnplTransaction.id, BnplTransaction.partner_reference_no),
    ),
    "card": _Table(
        "card",
        CardOrder,
        external=CardOrder.external_id,
        order=CardOrder.order_id,
        channel=CardOrder.payment_channel,
        amount=CardOrder.amount,
        searchable=(CardOrder.id, CardOrder.external_id, CardOrder.order_id),
        owned_by_links=True,
    ),
    "va": _Table(
        "va",
        VirtualAccount,
        external=VirtualAccount.external_id,
        order=VirtualAccount.order_id,
        channel=VirtualAccount.payment_channel,
        amount=VirtualAccount.amount,
        volume=VirtualAccount.total_paid_amount,
        paid_at=_LAST_VA_PAYMENT,
        channels=(VirtualAccount.payment_channel, VirtualAccount.bank),
        searchable=(VirtualAccount.id, VirtualAccount.external_id, VirtualAccount.order_id, VirtualAccount.va_number),
        numbers=(VirtualAccount.va_number,),
        extra={"va_number": VirtualAccount.va_number, "paid_amount": VirtualAccount.total_paid_amount},
        kept_whatever_the_outcome=True,
        owned_by_links=True,
    ),
    "link": _Table(
        "link",
        PaymentLink,
        external=PaymentLink.external_id,
        order=PaymentLink.order_id,
        channel=_LINK_CHANNEL,
        amount=PaymentLink.amount,
        extra={"payment_method": _LINK_PAID_BY},
        searchable=(PaymentLink.id, PaymentLink.external_id, PaymentLink.order_id),
        found_by=_link_found_by,
    ),
}


_FOREVER = timedelta(days=36_500)  # the last span's end: no payment is created after it
_DAY = timedelta(days=1)


def _of(merchant_id: str | None) -> dict[str, str]:
    """The merchant's bind of the overview's callback statements' "one merchant" variant."""
    return {"merchant_id": merchant_id} if merchant_id else {}


def _each_merchant_or_one(statement: Any) -> dict[bool, Statement]:
    """The overview's callback statements compiled once: for every merchant (False) and for one (True)."""
    return {
        False: Statement(statement),
        True: Statement(statement.where(Callback.merchant_id == bindparam("merchant_id"))),
    }


_SINCE = bindparam("since", type_=Callback.created_at.type)
_CALLBACK_TOTALS = _each_merchant_or_one(
    select(Callback.status, func.count()).where(Callback.created_at >= _SINCE).group_by(Callback.status)
)
_RETRYING = _each_merchant_or_one(
    select(func.count()).where(
        Callback.created_at >= _SINCE,
        or_(Callback.status == "pending", Callback.status == "delivering"),  # no IN: a fixed statement
        Callback.attempts_made > 0,
    )
)
_LATENCIES = _each_merchant_or_one(
    select(Callback.created_at, Callback.delivered_at)
    .where(Callback.created_at >= _SINCE, Callback.status == "delivered", Callback.replay_of.is_(None))
    .order_by(Callback.created_at.desc())
    .limit(bindparam("latest", type_=Integer()))
)


_SPANS: dict[tuple[int, bool], Statement] = {}


def _spans(count: int, of_merchant: bool) -> Statement:
    """Every product's numbers of `count` spans in one statement (PaymentsRepository.totals)."""
    statement = _SPANS.get((count, of_merchant))
    if statement is None:
        parts = [table.span_totals(index, of_merchant) for index in range(count) for table in _TABLES.values()]
        statement = _SPANS[(count, of_merchant)] = Statement(union_all(*parts))
    return statement


class PaymentsRepository:
    async def page(
        self,
        session: Session,
        where: PaymentFilter,
        *,
        after: tuple[datetime, str] | None,
        limit: int,
    ) -> list[PaymentRow]:
        """Up to `limit` payments older than `after` (the keyset), newest first, across products."""
        rows: list[PaymentRow] = []
        for table in _TABLES.values():
            conditions = table.conditions(where)
            if conditions is None:
                continue
            m = table.model
            if after is not None:
                created, id_ = after
                conditions.append(or_(m.created_at < created, and_(m.created_at == created, m.id < id_)))
            statement = (
                select(*table.columns()).where(*conditions).order_by(m.created_at.desc(), m.id.desc()).limit(limit)
            )
            rows.extend(table.row(values) for values in await fetch(session, statement))
        rows.sort(key=lambda row: row.sort_key, reverse=True)
        return rows[:limit]

    async def get(self, session: Session, payment_id: str) -> PaymentRow | None:
        for table in _TABLES.values():
            values = await table.by_id.first(session, payment_id=payment_id)
            if values is not None:
                return table.row(values)
        return None

    async def totals(
        self, session: Session, merchant_id: str | None, since: datetime, days: Sequence[datetime] = ()
    ) -> tuple[list[Total], dict[datetime, tuple[int, Decimal]]]:
        """The overview's numbers: count, volume and refunded volume by product and outcome of the payments
        created since `since`; and, for each of `days` (the starts of the trend's days, ascending, the last
        running to now), the payments created that day and their net paid volume (paid, less refunds;
        voids not at all).

        Spans of at most a day (between consecutive starts of `since` and the days), each product's rows
        of each span grouped by status within its overview index (kasir.payments.models): small groups
        read from the index alone, all in one statement (a UNION ALL, compiled once for each number of
        spans). Grouping the whole period at once would sort every row of it, on SQLite through a
        temporary file."""
        # No span longer than a day: the trend's days, and a day at a time from `since` to the first of them.
        before_trend = (days[0] - since) // _DAY if days and days[0] > since else 0
        starts = sorted({since, *days, *(since + _DAY * n for n in range(1, before_trend + 1))})
        ends = [*starts[1:], starts[-1] + _FOREVER]
        found: dict[tuple[str, str], Total] = {}
        daily = {day: (0, Decimal(0)) for day in days}
        bounds = {f"low{index}": began for index, began in enumerate(starts)}
        bounds.update({f"high{index}": ended for index, ended in enumerate(ends)})
        of_merchant = {"merchant_id": merchant_id} if merchant_id else {}
        rows = await _spans(len(starts), bool(merchant_id)).rows(session, **bounds, **of_merchant)
        for product, index, status, count, total, back in rows:
            table = _TABLES[product]
            began = starts[int(index)]
            day = next((d for d in reversed(days) if d <= began), None)
            outcome = outcome_of(table.product, status)
            money = table.money(int(total))
            if table.refunded is not None:
                back_money = table.money(int(back))
            else:  # a refund returns the whole amount
                back_money = money if outcome == "refunded" else Decimal(0)
            if table.kept_whatever_the_outcome or outcome in ("paid", "refunded"):
                kept = money - back_money
            else:
                kept = Decimal(0)
            if began >= since:
                key = (table.product, outcome)
                old = found.get(key, Total(table.product, outcome, 0, Decimal(0), Decimal(0)))
                found[key] = Total(
                    table.product,
                    outcome,
                    old.count + int(count),
                    old.volume + money,
                    old.refunded + back_money,
                    old.net + kept,
                )
            if day is not None:
                old_count, old_net = daily[day]
                daily[day] = (old_count + int(count), old_net + kept)
        return [found[key] for key in sorted(found)], daily

    async def callback_totals(self, session: Session, merchant_id: str | None, since: datetime) -> dict[str, int]:
        statement = _CALLBACK_TOTALS[bool(merchant_id)]
        rows = await statement.rows(session, since=since, **_of(merchant_id))
        return {status: int(count) for status, count in rows}

    async def retrying(self, session: Session, merchant_id: str | None, since: datetime) -> int:
        """Callbacks still to deliver that have been tried and refused at least once."""
        statement = _RETRYING[bool(merchant_id)]
        return int(await statement.scalar(session, since=since, **_of(merchant_id)) or 0)

    async def delivery_latencies(
        self, session: Session, merchant_id: str | None, since: datetime, limit: int = 5000
    ) -> list[float]:
        """Seconds from a callback's commit to its acceptance, for the latest `limit` delivered since `since`."""
        statement = _LATENCIES[bool(merchant_id)]
        rows = await statement.rows(session, since=since, latest=limit, **_of(merchant_id))
        return [(delivered - created).total_seconds() for created, delivered in rows if delivered is not None]

    async def merchant_names(self, session: Session, merchant_ids: Iterable[str | None]) -> dict[str, str]:
        """The names of a page's merchants, by id: one IN query by primary key for the whole page."""
        wanted = sorted({merchant_id for merchant_id in merchant_ids if merchant_id})
        if not wanted:
            return {}
        found = await fetch(session, select(Merchant.id, Merchant.name).where(Merchant.id.in_(wanted)))
        return {row.id: row.name for row in found}

    # --- one payment's details ---------------------------------------------------------

    async def wallet(self, session: Session, payment_id: str) -> WalletTransactionRow | None:
        return await wallet_repository.row(session, payment_id)

    async def wallet_refunds_with_reasons(self, session: Session, payment_id: str) -> list[RefundWithReason]:
        """The console's view of a payment's refunds (the callback's refund_history has no reason)."""
        return [RefundWithReason(*row) for row in await _REFUNDS_WITH_REASONS.rows(session, payment_id=payment_id)]

    async def wallet_refunded(self, session: Session, payment_ids: Sequence[str]) -> dict[str, int]:
        """Refunded so far, by wallet payment id, for a page of the export (one IN query by primary key)."""
        if not payment_ids:
            return {}
        found = await fetch(
            session,
            select(WalletTransaction.id, WalletTransaction.refunded_amount).where(
                WalletTransaction.id.in_(payment_ids)
            ),
        )
        return {row.id: int(row.refunded_amount) for row in found}

    async def bnpl(self, session: Session, payment_id: str) -> BnplTransactionRow | None:
        return await bnpl_repository.row(session, payment_id)

    async def card(self, session: Session, payment_id: str) -> CardOrderRow | None:
        return await card_repository.get(session, payment_id)

    async def card_attempts(self, session: Session, payment_id: str) -> list[CardAttemptRow]:
        return await card_repository.attempts(session, payment_id)

    async def va_payments(self, session: Session, payment_id: str) -> list[VaPaymentEntry]:
        """Every payment into the VA, oldest first (the inquiry answers only the last five)."""
        return [VaPaymentEntry(*row) for row in await _VA_PAYMENTS.rows(session, payment_id=payment_id)]

    async def link_attempts(self, session: Session, payment_id: str) -> list[AttemptRow]:
        """A payment link's attempts, in the order the customer chose them."""
        return await link_repository.attempts(session, payment_id)

    async def callbacks(self, session: Session, merchant_id: str, payment_id: str) -> list[CallbackRow]:
        found = await _CALLBACKS_OF_PAYMENT.rows(session, merchant_id=merchant_id, payment_id=payment_id)
        return [CallbackRow(*row) for row in found]

    async def attempts(self, session: Session, callback_ids: Sequence[int]) -> list[CallbackAttemptRow]:
        if not callback_ids:
            return []
        statement = ATTEMPT_SELECT.where(CallbackAttempt.callback_id.in_(callback_ids)).order_by(
            CallbackAttempt.callback_id, CallbackAttempt.number, CallbackAttempt.id
        )
        return [CallbackAttemptRow(*row) for row in await fetch(session, statement)]

    async def callback(self, session: Session, callback_id: int) -> CallbackRow | None:
        found = await _CALLBACK.first(session, callback_id=callback_id)
        return None if found is None else CallbackRow(*found)

    async def callback_queue(
        self,
        session: Session,
        *,
        statuses: Sequence[str],
        merchant_id: str | None,
        kind: str | None,
        retrying_only: bool = False,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[CallbackRow]:
        statement = CALLBACK_SELECT.where(Callback.status.in_(statuses)).order_by(Callback.id.desc()).limit(limit)
        if merchant_id:
            statement = statement.where(Callback.merchant_id == merchant_id)
        if kind:
            statement = statement.where(Callback.kind == kind)
        if retrying_only:
            statement = statement.where(Callback.attempts_made > 0)
        if before_id is not None:
            statement = statement.where(Callback.id < before_id)
        return [CallbackRow(*row) for row in await fetch(session, statement)]

    async def given_up_since(self, session: Session, merchant_id: str, since: datetime) -> list[CallbackRow]:
        """The merchant's events given up since `since` (kasir.callbacks: one per event, not per delivery)."""
        return await callback_repository.given_up(session, merchant_id, since)


payments_repository = PaymentsRepository()

"""Payments across products: one list, one detail, the overview's numbers, and the actions on a payment.

Reachable three ways (the console, `GET /admin/payments`, `kasir payments`). Every call takes
the caller's merchant scope: None for an operator (every merchant), else the one merchant
whose data it may see; anything outside it answers PaymentNotFound, like a payment that does
not exist. Actions go through the product rooms' services (the same rules as the API) and
are audited.

    PaymentsError
     ├── PaymentNotFound (404)
     ├── BadCursor (400)
     └── ActionRefused (409)        not a wallet payment, no current callback URL, ...
"""

from __future__ import annotations

import base64
import builtins
import csv
import io
import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from kasir.audit.service import Actor, audit
from kasir.bnpl.service import bnpl_service
from kasir.callbacks.models import CallbackKind
from kasir.callbacks.repository import CallbackAttemptRow, CallbackRow, callback_repository
from kasir.callbacks.service import callback_outbox
from kasir.callbacks.signing import svc_signature_header
from kasir.callbacks.ssrf import check_callback_url
from kasir.config import get_settings
from kasir.console.format import bnpl_status_text, event_words, jakarta_time
from kasir.db import Database, Session
from kasir.errors import BadRequest, Conflict, InvalidMandatoryField, NotFound
from kasir.kit.clock import JAKARTA, clock, parse_aware
from kasir.kit.money import rupiah
from kasir.merchants.service import merchant_service
from kasir.payments.repository import (
    OUTCOME_NAMES,
    PRODUCTS,
    PaymentFilter,
    PaymentRow,
    Total,
    VaPaymentEntry,
    payments_repository,
)
from kasir.processors.calls import Also, PendingCall
from kasir.processors.protocols import Event, Notification
from kasir.processors.registry import SIMULATOR, simulator_serves
from kasir.processors.service import apply
from kasir.va.banks import BANKS, bank_of
from kasir.va.repository import VaRow
from kasir.va.service import va_service
from kasir.va.states import is_open as va_is_open
from kasir.wallet.repository import TransactionRow as WalletTransactionRow
from kasir.wallet.service import wallet_service

PAGE_SIZE = 50
EXPORT_PAGE = 1000


class PaymentNotFound(NotFound):
    default_message = "No such payment."


class BadCursor(BadRequest):
    pass


class ActionRefused(Conflict):
    pass


class CallbackNotFound(NotFound):
    default_message = "No such callback."


def encode_cursor(row: PaymentRow) -> str:
    text = f"{row.created_at.isoformat()}|{row.id}"
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[datetime, str] | None:
    if not cursor:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        moment, _, id_ = text.partition("|")
        return parse_aware(moment), id_
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadCursor("cursor is not one this list handed out", field="cursor") from exc


def parse_filter(
    *,
    scope: str | None,
    merchant_id: str | None = None,
    product: str | None = None,
    status: str | None = None,
    channel: str | None = None,
    since: str | datetime | None = None,
    until: str | datetime | None = None,
    query: str | None = None,
) -> PaymentFilter:
    """A filter from what a person typed (dates as `2026-11-24` in Asia/Jakarta or ISO 8601), within `scope`."""
    if product and product not in PRODUCTS:
        raise BadRequest(f"product must be one of {', '.join(PRODUCTS)}", field="product")
    if status and status not in OUTCOME_NAMES:
        raise BadRequest(f"status must be one of {', '.join(OUTCOME_NAMES)}", field="status")
    merchant = scope or (merchant_id.strip() if merchant_id else None) or None
    return PaymentFilter(
        merchant_id=merchant,
        matches_nothing=bool(scope and merchant_id and merchant_id != scope),
        product=product or None,
        outcome=status or None,
        channel=(channel or "").strip().upper() or None,
        since=_moment(since, "since"),
        until=_moment(until, "until", end_of_day=True),
        query=(query or "").strip()[:128] or None,
    )


def _moment(value: str | datetime | None, name: str, *, end_of_day: bool = False) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value
    text = value.strip()
    try:
        if len(text) == 10:  # a date: that day in Asia/Jakarta (an `until` date includes the whole day)
            day = datetime.fromisoformat(text).replace(tzinfo=JAKARTA)
            return day + timedelta(days=1) if end_of_day else day
        return parse_aware(text)
    except ValueError as exc:
        raise BadRequest(f"{name} must be a date (2026-11-24) or an ISO 8601 time with offset", field=name) from exc


@dataclass(frozen=True, slots=True)
class PaymentPage:
    rows: list[PaymentRow]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    at: datetime
    what: str
    detail: str = ""


@dataclass
class CallbackWithAttempts:
    callback: CallbackRow
    attempts: list[CallbackAttemptRow] = field(default_factory=list)

    @property
    def sent(self) -> tuple[int, str, dict[str, str]] | None:
        """The latest attempt's request as it was sent: (attempt number, URL with its query, headers).

        None before the first attempt, or for attempts recorded before requests were kept.
        """
        for attempt in reversed(self.attempts):
            if attempt.request_headers is not None:
                headers: dict[str, str] = json.loads(attempt.request_headers)
                return attempt.number, attempt.request_url or self.callback.url, headers
        return None

    @property
    def headers(self) -> dict[str, str]:
        """The headers Kasir will send with it (what `sent` shows once an attempt went out)."""
        headers = {"Content-Type": "application/json", "X-Kasir-Callback-Id": str(self.callback.event_key)}
        if self.callback.svc_signature:
            headers[svc_signature_header()] = self.callback.svc_signature
        elif self.callback.signed_ids:
            headers[svc_signature_header()] = "(SHA-256, computed when sent)"
        if self.callback.kind in (CallbackKind.BNPL.value, CallbackKind.PAYOUT.value):
            headers.update({"X-PARTNER-ID": self.callback.merchant_id, "X-VERSION": "v1", "X-SIGNATURE": "(HMAC)"})
        return headers


@dataclass(frozen=True, slots=True)
class RefundEntry:
    refunded_at: datetime
    amount: int
    reason: str | None


@dataclass(frozen=True, slots=True)
class RefundReview:
    """What the console shows before a refund moves anything: the payment, the amount, what is left after."""

    row: PaymentRow
    amount: int
    reason: str | None
    refunded: int
    refundable: int

    @property
    def remaining_after(self) -> int:
        return self.refundable - self.amount


@dataclass
class PaymentDetail:
    row: PaymentRow
    merchant_name: str
    merchant_callback_url: str | None
    fields: list[tuple[str, str]]
    items: list[dict[str, Any]]
    timeline: list[TimelineEntry]
    callbacks: list[CallbackWithAttempts]
    refundable: int | None = None  # wallet: what is left to refund
    refunded: int = 0  # wallet: refunded so far
    refunds: list[RefundEntry] = field(default_factory=list)  # wallet: oldest first
    can_void: bool = False
    simulate: tuple[str, ...] = ()  # staging: pay / fail / expire
    va_payments: list[VaPaymentEntry] = field(default_factory=list)  # VA: every payment into it, oldest first
    va_pay: VaPayForm | None = None  # VA, staging: what the simulated payment may be
    can_cancel: bool = False  # VA: open, so it may be cancelled


@dataclass(frozen=True, slots=True)
class VaPayForm:
    """The VA's simulated payment (§9.3): CLOSED pays its amount; OPEN and PARTIAL ask for one, within these."""

    asks_amount: bool
    minimum: int
    maximum: int | None  # PARTIAL: the remainder; OPEN: none but the channel's
    amount: int  # CLOSED: what it pays


@dataclass(frozen=True, slots=True)
class TrendDay:
    day: datetime  # its start, Asia/Jakarta midnight
    count: int  # payments created that day
    net: Decimal  # what they brought in: paid, less refunds, voids not at all


@dataclass(frozen=True, slots=True)
class Overview:
    period: str
    since: datetime
    totals: list[Total]
    callbacks: dict[str, int]  # delivered, retrying, given_up, pending
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    trend: list[TrendDay] = field(default_factory=list)  # oldest first, today last

    def count(self, product: str | None = None, outcome: str | None = None) -> int:
        return sum(t.count for t in self.totals if (product in (None, t.product)) and (outcome in (None, t.outcome)))

    def volume(self, product: str | None = None, outcome: str | None = None) -> Decimal:
        return sum(
            (t.volume for t in self.totals if (product in (None, t.product)) and (outcome in (None, t.outcome))),
            Decimal(0),
        )

    def net_volume(self, product: str | None = None) -> Decimal:
        """Paid volume as the merchant keeps it: paid payments less what was refunded of them; voids not at all;
        every payment into a VA, whatever became of the VA after (§9.5: Kasir refunds nothing)."""
        return sum((t.net for t in self.totals if product in (None, t.product)), Decimal(0))

    @property
    def trend_days(self) -> int:
        return len(self.trend)

    def success_rate(self, product: str | None = None) -> float | None:
        """Paid (and later refunded or voided) of the payments that reached an outcome."""
        paid = sum(self.count(product, o) for o in ("paid", "refunded", "void"))
        done = paid + sum(self.count(product, o) for o in ("failed", "expired", "cancelled"))
        return None if done == 0 else paid / done


TREND_DAYS = (7, 30)
PERIODS = {"today": None, "7d": timedelta(days=7), "30d": timedelta(days=30)}


def period_start(period: str) -> datetime:
    if period not in PERIODS:
        raise BadRequest("period must be today, 7d or 30d", field="period")
    span = PERIODS[period]
    if span is None:
        local = clock.local_now()
        return local.replace(hour=0, minute=0, second=0, microsecond=0)
    return clock.now() - span


def _percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(share * 100) - 1]


class PaymentsService:
    async def list(
        self, session: Session, where: PaymentFilter, *, cursor: str | None = None, limit: int = PAGE_SIZE
    ) -> PaymentPage:
        limit = max(1, min(limit, 500))
        rows = await payments_repository.page(session, where, after=decode_cursor(cursor), limit=limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        return PaymentPage(rows, encode_cursor(rows[-1]) if more and rows else None)

    async def merchant_names(self, session: Session, merchant_ids: Iterable[str | None]) -> dict[str, str]:
        """Names beside the ids of a list's page (payments, callbacks, audit events): one query per page."""
        return await payments_repository.merchant_names(session, merchant_ids)

    async def get(self, session: Session, scope: str | None, payment_id: str) -> PaymentRow:
        row = await payments_repository.get(session, payment_id.strip())
        if row is None or (scope is not None and row.merchant_id != scope):
            raise PaymentNotFound()
        return row

    async def find(self, session: Session, scope: str | None, query: str) -> builtins.list[PaymentRow]:
        """Every payment any of whose ids is `query` (a merchant's order id may name a wallet and a card payment)."""
        page = await self.list(session, parse_filter(scope=scope, query=query), limit=100)
        return page.rows

    async def detail(self, session: Session, scope: str | None, payment_id: str) -> PaymentDetail:
        row = await self.get(session, scope, payment_id)
        merchant = await merchant_service.get(session, row.merchant_id)
        detail = PaymentDetail(row, merchant.name, merchant.callback_url, [], [], [], [])
        timeline = [TimelineEntry(row.created_at, "Created", f"{row.channel}")]
        staging = not get_settings().is_production
        if row.product == "wallet":
            tx = await payments_repository.wallet(session, row.id)
            assert tx is not None
            details = _json(tx.details)
            detail.fields = [
                ("Transaction id", tx.id),
                ("External id", tx.external_id),
                ("Order id", tx.order_id),
                ("Reference id", tx.reference_id),
                ("Channel", tx.payment_channel),
                ("Description", tx.description),
                ("Callback URL", tx.callback_url),
                ("Return URL", tx.return_url or ""),
                ("Customer", _customer(details.get("customer_details"))),
                ("Wallet account", _wallet_account(details.get("wallet_details"))),
                ("Issuer", tx.issuer or ""),
                ("Retrieval reference no", tx.retrieval_reference_no or ""),
                ("Failure reason", tx.failure_reason or ""),
                ("Expires", jakarta_time(tx.expires_at)),
            ]
            detail.items = list(details.get("item_details") or [])
            if tx.paid_at:
                timeline.append(TimelineEntry(tx.paid_at, "Paid", tx.issuer or ""))
            for refund in await payments_repository.wallet_refunds_with_reasons(session, tx.id):
                timeline.append(TimelineEntry(refund.refunded_at, "Refunded", rupiah(refund.amount)))
                detail.refunds.append(RefundEntry(refund.refunded_at, refund.amount, refund.reason))
            detail.refunded = tx.refunded_amount
            if tx.voided_at:
                timeline.append(TimelineEntry(tx.voided_at, "Voided"))
            if tx.status in ("EXPIRED", "failed"):
                timeline.append(TimelineEntry(tx.updated_at, "Expired" if tx.status == "EXPIRED" else "Failed"))
            detail.refundable = tx.refundable_amount if tx.status in ("PAID", "REFUNDED") else None
            detail.can_void = tx.status == "PAID"
            if staging and tx.status == "PENDING":
                detail.simulate = ("pay", "fail", "expire") if tx.payment_channel == "OVO" else ("pay", "expire")
        elif row.product == "bnpl":
            btx = await payments_repository.bnpl(session, row.id)
            assert btx is not None
            details = _json(btx.details)
            detail.fields = [
                ("Reference no", btx.id),
                ("Partner reference no", btx.partner_reference_no),
                ("Status", bnpl_status_text(btx.status, btx.status_desc)),
                ("Tenure", f"{btx.tenure} months" if btx.tenure else ""),
                ("Channel id", btx.channel_id),
                ("Callback URL", btx.callback_url),
                ("Customer", _customer(details.get("customerDetails") or details.get("customer_details"))),
                ("Valid until", jakarta_time(btx.expires_at)),
            ]
            detail.items = list(details.get("itemDetails") or details.get("item_details") or [])
            if btx.paid_at:
                timeline.append(TimelineEntry(btx.paid_at, "Approved", f"{btx.tenure} months"))
            elif btx.status in ("05", "06"):
                timeline.append(TimelineEntry(btx.updated_at, btx.status_desc))
            if staging and btx.status == "01":
                detail.simulate = ("pay", "fail")
        elif row.product == "va":
            va = await va_service.get(session, row.id)
            await self._va_detail(session, detail, va, timeline, staging)
        else:
            order = await payments_repository.card(session, row.id)
            assert order is not None
            details = _json(order.details)
            detail.fields = [
                ("Transaction id", order.id),
                ("External id", order.external_id),
                ("Order id", order.order_id),
                ("Channel", order.payment_channel),
                ("Mode", order.payment_mode),
                ("Acquirer", order.acq or ""),
                ("Tenor", order.tenor or ""),
                ("Last message", order.response_message or ""),
                ("Attempts", f"{order.attempts_made} ({order.attempts_failed} failed)"),
                ("Callback URL", order.callback_url or ""),
                ("Return URL", order.return_url),
                ("Customer", _customer(details.get("customerDetails") or details.get("customer_details"))),
            ]
            detail.items = list(details.get("itemDetails") or details.get("item_details") or [])
            for attempt in await payments_repository.card_attempts(session, order.id):
                # Only the masked number (first 6, last 4) was ever stored.
                timeline.append(
                    TimelineEntry(
                        attempt.created_at,
                        f"Attempt {attempt.number}: {attempt.status}",
                        f"{attempt.card_brand} {attempt.masked_card} · {attempt.acq} · {attempt.response_message}",
                    )
                )
            if order.paid_at:
                timeline.append(TimelineEntry(order.paid_at, "Paid", order.acq or ""))
            if order.status == "EXPIRED":
                timeline.append(TimelineEntry(order.updated_at, "Expired"))
        callbacks = await payments_repository.callbacks(session, row.merchant_id, row.id)
        attempts = await payments_repository.attempts(session, [c.id for c in callbacks])
        by_callback: dict[int, list[CallbackAttemptRow]] = {}
        for callback_attempt in attempts:
            by_callback.setdefault(callback_attempt.callback_id, []).append(callback_attempt)
        detail.callbacks = [CallbackWithAttempts(c, by_callback.get(c.id, [])) for c in callbacks]
        for c in callbacks:
            label = f"Callback {event_words(c.kind, c.event)} " + ("replayed" if c.replay_of else "recorded")
            timeline.append(TimelineEntry(c.created_at, label, f"#{c.id} → {c.status}"))
        detail.timeline = sorted(timeline, key=lambda entry: entry.at)
        return detail

    async def _va_detail(
        self, session: Session, detail: PaymentDetail, va: VaRow, timeline: builtins.list[TimelineEntry], staging: bool
    ) -> None:
        details = _json(va.details)
        bank = BANKS[va.bank].name
        detail.fields = [
            ("Transaction id", va.id),
            ("External id", va.external_id),
            ("Order id", va.order_id),
            ("VA number", va.va_number),
            ("Channel", va.payment_channel),
            ("Bank", f"{bank} ({va.bank})"),
            ("Payment system", va.payment_system),
            ("Multi-use", "yes" if va.is_multi_use else "no"),
            ("Amount", rupiah(va.amount) + (" (not enforced)" if va.payment_system == "OPEN" else "")),
            ("Paid total", rupiah(va.total_paid_amount)),
            ("Remaining", rupiah(va.remaining_amount) if va.payment_system == "PARTIAL" else ""),
            ("Expires", jakarta_time(va.expires_at)),
            ("Billing name", va.billing_name),
            ("Description", va.description),
            ("Sub-merchant", va.sub_merchant_id or ""),
            ("Callback URL", va.callback_url),
            ("Customer", _customer(details.get("customer_details"))),
            ("Additional data", str(details.get("additional_data") or "")),
        ]
        detail.items = list(details.get("item_details") or [])
        detail.va_payments = await payments_repository.va_payments(session, va.id)
        for payment in detail.va_payments:
            timeline.append(
                TimelineEntry(payment.paid_at, "Paid", f"{rupiah(payment.amount)} · {payment.reference_id}")
            )
        if va.status in ("EXPIRED", "CANCELLED"):
            timeline.append(TimelineEntry(va.updated_at, va.status.capitalize()))
        # Past its expired_time a VA takes nothing, before the worker records it (§9.3).
        payable = va_is_open(va) and va.expires_at > clock.now()
        detail.can_cancel = payable
        if staging and payable:
            remainder = va.amount - va.total_paid_amount
            minimum = bank_of(va.bank).amount_min
            if va.payment_system == "CLOSED":
                detail.va_pay = VaPayForm(False, va.amount, va.amount, va.amount)
            elif va.payment_system == "PARTIAL":
                detail.va_pay = VaPayForm(True, min(minimum, remainder), remainder, 0)
            else:
                detail.va_pay = VaPayForm(True, minimum, None, 0)
            detail.simulate = ("pay",)

    async def overview(self, session: Session, scope: str | None, period: str, trend_days: int = 7) -> Overview:
        since = period_start(period)
        if trend_days not in TREND_DAYS:
            raise BadRequest("days must be 7 or 30", field="days")
        today = clock.local_now().replace(hour=0, minute=0, second=0, microsecond=0)
        days = [today - timedelta(days=back) for back in range(trend_days - 1, -1, -1)]
        totals, daily = await payments_repository.totals(session, scope, since, days)
        counts = await payments_repository.callback_totals(session, scope, since)
        retrying = await payments_repository.retrying(session, scope, since)
        waiting = counts.get("pending", 0) + counts.get("delivering", 0)
        callbacks = {
            # Events, as "given up" counts them: one event replayed until delivered is one, not one per delivery.
            "delivered": await callback_repository.count_delivered(session, scope, since),
            "retrying": retrying,
            "given_up": await callback_repository.count_given_up(session, scope, since),
            "pending": waiting - retrying,
        }
        latencies = await payments_repository.delivery_latencies(session, scope, since)
        p50, p95 = _percentile(latencies, 0.50), _percentile(latencies, 0.95)
        return Overview(
            period,
            since,
            totals,
            callbacks,
            None if p50 is None else p50 * 1000,
            None if p95 is None else p95 * 1000,
            [TrendDay(day, *daily[day]) for day in days],
        )

    def csv_header(self) -> str:
        """The export's first line (`csv_page` writes the rows under it)."""
        return _csv_line(
            [
                "product",
                "id",
                "merchant_id",
                "external_id",
                "order_id",
                "channel",
                "status",
                "outcome",
                "amount",
                "created_at",
                "paid_at",
                # Added at the end, so a spreadsheet reading the columns above by position still reads them.
                "refunded_amount",
                "net_amount",
                "va_number",
            ]
        )

    async def csv_page(
        self, session: Session, where: PaymentFilter, after: tuple[datetime, str] | None
    ) -> tuple[str, tuple[datetime, str] | None]:
        """The filtered list's rows after `after` as CSV, a page of them, and where the next page starts
        (None: this was the last). The caller reads each page in a short read-only unit of its own, so
        memory stays at one page whatever the number of rows."""
        rows = await payments_repository.page(session, where, after=after, limit=EXPORT_PAGE)
        if not rows:
            return "", None
        refunded = await payments_repository.wallet_refunded(
            session, [row.id for row in rows if row.product == "wallet"]
        )
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        for row in rows:
            back = Decimal(refunded.get(row.id, 0)) if row.product == "wallet" else Decimal(0)
            writer.writerow(
                [
                    _cell(value)
                    for value in (
                        row.product,
                        row.id,
                        row.merchant_id,
                        row.external_id or "",
                        row.order_id or "",
                        row.channel,
                        row.status,
                        row.outcome,
                        str(row.amount),
                        row.created_at.astimezone(JAKARTA).isoformat(timespec="seconds"),
                        row.paid_at.astimezone(JAKARTA).isoformat(timespec="seconds") if row.paid_at else "",
                        str(back),
                        str(net_amount(row, back)),
                        row.va_number or "",
                    )
                ]
            )
        return buffer.getvalue(), (None if len(rows) < EXPORT_PAGE else rows[-1].sort_key)


def net_amount(row: PaymentRow, refunded: Decimal) -> Decimal:
    """What the merchant keeps: a paid payment's amount less its refunds; nothing for one never paid or voided;
    a VA: every payment into it, whatever its state (§9.5)."""
    if row.paid_amount is not None:
        return row.paid_amount
    if row.outcome not in ("paid", "refunded"):
        return Decimal(0)
    return row.amount - refunded


@dataclass(slots=True)
class HeldPaymentAction:
    """A refund or void held in the caller's unit of work. Once that unit has committed, `complete` asks
    the issuer with no unit open and records its answer with the audit entry in a unit of its own
    (kasir.processors.calls)."""

    pending: PendingCall
    audited: Also

    async def complete(self, database: Database) -> None:
        await self.pending.complete(database, also=self.audited)


class PaymentActions:
    """What the console, the admin API and the CLI may do to a payment: through the rooms' services, audited."""

    async def review_refund(
        self, session: Session, scope: str | None, payment_id: str, amount: int, reason: str | None
    ) -> RefundReview:
        """The console's confirmation step: the refund checked as `refund` checks it, and nothing written."""
        if amount < 1:
            raise BadRequest("refund amount must be at least Rp 1", field="refund_amount")
        tx = await self._wallet(session, scope, payment_id, lock=False)
        wallet_service.check_refund(tx, amount)
        row = await payments_service.get(session, scope, payment_id)
        return RefundReview(row, amount, reason, tx.refunded_amount, tx.refundable_amount)

    async def review_void(self, session: Session, scope: str | None, payment_id: str) -> PaymentRow:
        """The console's confirmation step of a void: checked as `void` checks it, and nothing written."""
        tx = await self._wallet(session, scope, payment_id, lock=False)
        wallet_service.check_void(tx)
        return await payments_service.get(session, scope, payment_id)

    async def refund(
        self, session: Session, scope: str | None, payment_id: str, amount: int, reason: str | None, actor: Actor
    ) -> HeldPaymentAction:
        """Held in the caller's unit; the issuer is asked by `complete` once it has committed."""
        if amount < 1:
            raise BadRequest("refund amount must be at least Rp 1", field="refund_amount")
        tx = await self._wallet(session, scope, payment_id)
        before = {"status": tx.status, "refunded_amount": tx.refunded_amount}
        pending = await wallet_service.refund(session, tx, amount, reason)
        await pending.hold(session, None)

        async def audited(session: Session, tx: Any) -> None:
            after = {"status": tx.status, "refunded_amount": tx.refunded_amount, "refund_amount": amount}
            await self._audit(session, actor, "payment.refund", tx.id, tx.merchant_id, before, after)

        return HeldPaymentAction(pending, audited)

    async def void(self, session: Session, scope: str | None, payment_id: str, actor: Actor) -> HeldPaymentAction:
        """Held in the caller's unit; the issuer is asked by `complete` once it has committed."""
        tx = await self._wallet(session, scope, payment_id)
        before = {"status": tx.status}
        pending = await wallet_service.void(session, tx)
        await pending.hold(session, None)

        async def audited(session: Session, tx: Any) -> None:
            await self._audit(session, actor, "payment.void", tx.id, tx.merchant_id, before, {"status": tx.status})

        return HeldPaymentAction(pending, audited)

    async def simulate(
        self,
        session: Session,
        scope: str | None,
        payment_id: str,
        outcome: str,
        actor: Actor,
        *,
        amount: int | None = None,
    ) -> PaymentRow:
        """Staging only (the caller checks): the customer pays, fails or lets the payment expire. A VA: one payment
        of `amount` (None: a CLOSED VA's own), as the dummy payment makes it."""
        row = await payments_service.get(session, scope, payment_id)
        if row.product == "va":
            return await self._simulate_va_payment(session, scope, row, outcome, amount, actor)
        before = {"status": row.status}
        # As the simulator's pages do: through the processors' one way in (kasir.processors.service).
        if row.product in ("wallet", "bnpl") and not simulator_serves(
            "wallet" if row.product == "wallet" else "bnpl", row.channel if row.product == "wallet" else None
        ):
            raise ActionRefused("this payment's processor is not the simulator: it cannot be simulated")
        if row.product == "wallet":
            events = {"pay": Event.PAID, "fail": Event.FAILED, "expire": Event.EXPIRED}
            if outcome not in events:
                raise BadRequest("outcome must be pay, fail or expire", field="outcome")
            message = "Simulated from the console" if outcome == "fail" else None
            await apply(
                session, Notification("wallet", row.id, events[outcome], message=message), by=SIMULATOR, strict=True
            )
        elif row.product == "bnpl" and outcome in ("pay", "fail"):
            if outcome == "pay":
                options = await bnpl_service.options(session, row.merchant_id, row.amount)
                notification = Notification("bnpl", row.id, Event.APPROVED, tenure=options[0].tenure)
            else:
                notification = Notification("bnpl", row.id, Event.REJECTED)
            await apply(session, notification, by=SIMULATOR, strict=True)
        else:
            raise ActionRefused("this payment cannot be simulated from the console (card: use its payment page)")
        after = await payments_service.get(session, scope, payment_id)
        await self._audit(
            session, actor, f"payment.simulate.{outcome}", row.id, row.merchant_id, before, {"status": after.status}
        )
        return after

    async def _simulate_va_payment(
        self, session: Session, scope: str | None, row: PaymentRow, outcome: str, amount: int | None, actor: Actor
    ) -> PaymentRow:
        if outcome != "pay":
            raise ActionRefused("a virtual account can only be paid from the console (or cancelled)")
        va = await va_service.get(session, row.id, lock=True)
        if not simulator_serves("va", va.bank):
            raise ActionRefused("this payment's processor is not the simulator: it cannot be simulated")
        before = {"status": va.status, "total_paid_amount": va.total_paid_amount}
        # As the dummy payment does (kasir.simulator.endpoints): through the processors' one way in.
        await apply(session, Notification("va", va.id, Event.PAID, amount=amount), by=SIMULATOR, strict=True)
        va = await va_service.get(session, va.id, lock=True)
        after = {"status": va.status, "total_paid_amount": va.total_paid_amount, "amount": amount or va.amount}
        await self._audit(session, actor, "payment.simulate.pay", va.id, va.merchant_id, before, after)
        return await payments_service.get(session, scope, va.id)

    async def review_cancel(self, session: Session, scope: str | None, payment_id: str) -> VaRow:
        """The console's confirmation step of a VA's cancel: checked as `cancel` checks it, and nothing written."""
        _row, va = await self._va(session, scope, payment_id, lock=False)
        va_service.check_cancel(va)
        return va

    async def cancel(self, session: Session, scope: str | None, payment_id: str, actor: Actor) -> PaymentRow:
        """A VA stops taking payments (/va/cancel's rule and callback); the issuer is told once the unit commits."""
        _row, va = await self._va(session, scope, payment_id, lock=True)
        before = {"status": va.status}
        await va_service.cancel(session, va)
        await self._audit(session, actor, "payment.cancel", va.id, va.merchant_id, before, {"status": va.status})
        return await payments_service.get(session, scope, va.id)

    async def _va(
        self, session: Session, scope: str | None, payment_id: str, *, lock: bool
    ) -> tuple[PaymentRow, VaRow]:
        row = await payments_service.get(session, scope, payment_id)
        if row.product != "va":
            raise ActionRefused("cancel is for virtual accounts")
        return row, await va_service.get(session, row.id, lock=lock)

    async def replay(
        self,
        session: Session,
        scope: str | None,
        callback_id: int,
        target: str,
        actor: Actor,
        *,
        url: str | None = None,
    ) -> CallbackRow:
        """Deliver a callback again, to the URL it was first sent to (`original`), to the merchant's current
        default callback URL (`current`) or to `url` (`url`, checked as every callback URL is, before the
        first statement: in production the check resolves the host): the same body, signatures computed afresh."""
        if target == "url":
            if not url:
                raise InvalidMandatoryField("url")
            await check_callback_url(url, production=get_settings().is_production, field="url")
        original = await payments_repository.callback(session, callback_id)
        if original is None or (scope is not None and original.merchant_id != scope):
            raise CallbackNotFound()
        if target == "original":
            replay = await callback_outbox.replay(session, callback_id)
        elif target in ("current", "url"):
            if target == "current":
                merchant = await merchant_service.get(session, original.merchant_id)
                if not merchant.callback_url:
                    raise ActionRefused("the merchant has no default callback URL; replay to the original URL instead")
                url = merchant.callback_url
            assert url is not None
            replay = await callback_outbox.replay(session, callback_id, url=url)
        else:
            raise BadRequest("target must be original, current or url", field="target")
        await self._audit(
            session,
            actor,
            "callback.replay",
            str(original.id),
            original.merchant_id,
            {"url": original.url, "status": original.status},
            {"replay_id": replay.id, "url": replay.url, "target": target},
        )
        return replay

    async def replay_given_up(
        self, session: Session, scope: str | None, merchant_id: str, since: datetime, actor: Actor
    ) -> list[CallbackRow]:
        """Every given-up event of the merchant recorded since `since`, delivered again to the URL it was first sent
        to (one audited action)."""
        if scope is not None and merchant_id != scope:
            raise CallbackNotFound()
        recovery = await callback_outbox.recover(session, merchant_id, since, original_urls=True)
        replays = recovery.replays
        await audit.record(
            session,
            actor,
            "callback.replay_given_up",
            target_type="merchant",
            target_id=merchant_id,
            merchant_id=merchant_id,
            after={"since": since.isoformat(), "replayed": [r.replay_of for r in replays]},
        )
        return replays

    async def _wallet(
        self, session: Session, scope: str | None, payment_id: str, *, lock: bool = True
    ) -> WalletTransactionRow:
        row = await payments_service.get(session, scope, payment_id)
        if row.product != "wallet":
            raise ActionRefused("refund and void are for wallet payments")
        return await wallet_service.get(session, row.id, lock=lock)

    async def _audit(
        self,
        session: Session,
        actor: Actor,
        action: str,
        target: str,
        merchant_id: str,
        before: Any,
        after: Any,
    ) -> None:
        await audit.record(
            session,
            actor,
            action,
            target_type="payment" if action.startswith("payment") else "callback",
            target_id=target,
            merchant_id=merchant_id,
            before=before,
            after=after,
        )


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _customer(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    name = (
        value.get("full_name")
        or value.get("fullName")
        or " ".join(str(value.get(k, "")) for k in ("firstName", "lastName") if value.get(k))
    )
    parts = [str(name or ""), str(value.get("email") or ""), str(value.get("phone") or "")]
    return " · ".join(p for p in parts if p)


def _wallet_account(value: Any) -> str:
    if not isinstance(value, dict):
        return ""
    return f"{value.get('id', '')} ({value.get('id_type', '')})" if value.get("id") else ""


def _cell(value: str) -> str:
    # A cell a spreadsheet would run as a formula is written as text (CSV injection).
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _csv_line(values: Sequence[str]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow(values)
    return buffer.getvalue()


payments_service = PaymentsService()
payment_actions = PaymentActions()

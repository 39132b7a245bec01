"""Transfers as the console shows them (issue 46 item 6): the filtered list a page at a time, one transfer with its
notifications, and the CSV export, within the viewer's scope. Read-only: the rules of the views (filters from what
a person typed, cursors, the timeline, the CSV's cells); the queries are the repository's.

Kept apart from the room's service, which moves money: nothing here writes.
"""

from __future__ import annotations

import base64
import csv
import io
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kasir.callbacks.repository import CallbackAttemptRow, CallbackRow
from kasir.db import Session
from kasir.errors import BadRequest, NotFound
from kasir.kit.clock import JAKARTA, parse_aware
from kasir.payments.repository import payments_repository
from kasir.payouts.repository import TransferFilter, TransferRow, transfer_repository
from kasir.payouts.states import DESCRIPTIONS, TransferStatus

PAGE_SIZE = 50
EXPORT_PAGE = 500
STATUSES = tuple(status.value for status in TransferStatus)


class NoSuchTransfer(NotFound):
    default_message = "Not found."


@dataclass(frozen=True, slots=True)
class TransferPage:
    rows: list[TransferRow]
    next_cursor: str | None


@dataclass
class TransferDetail:
    row: TransferRow
    callbacks: list[tuple[CallbackRow, list[CallbackAttemptRow]]] = field(default_factory=list)
    timeline: list[tuple[datetime, str, str]] = field(default_factory=list)


def parse_filter(
    *,
    scope: str | None,
    merchant_id: str = "",
    status: str = "",
    query: str = "",
    since: str = "",
    until: str = "",
) -> TransferFilter:
    """A filter from what a person typed (dates `2026-11-28`, Asia/Jakarta; `until` includes its day)."""
    if status and status not in STATUSES:
        raise BadRequest(f"status must be one of {', '.join(STATUSES)}", field="status")
    merchant = scope or merchant_id.strip() or None
    return TransferFilter(
        merchant_id=merchant,
        matches_nothing=bool(scope and merchant_id and merchant_id != scope),
        status=status or None,
        query=query.strip()[:64] or None,
        since=_day(since, "since"),
        until=_day(until, "until", next_day=True),
    )


def _day(text: str, name: str, *, next_day: bool = False) -> datetime | None:
    value = text.strip()
    if not value:
        return None
    try:
        if len(value) == 10:
            day = datetime.fromisoformat(value).replace(tzinfo=JAKARTA)
            return day + timedelta(days=1) if next_day else day
        return parse_aware(value)
    except ValueError as exc:
        raise BadRequest(f"{name} must be a date", field=name) from exc


def _cursor(row: TransferRow) -> str:
    return base64.urlsafe_b64encode(f"{row.created_at.isoformat()}|{row.id}".encode()).decode().rstrip("=")


def _after(cursor: str | None) -> tuple[datetime, str] | None:
    if not cursor:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        moment, _, transfer_id = text.partition("|")
        return parse_aware(moment), transfer_id
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest("cursor is not one this list handed out", field="cursor") from exc


class PayoutReports:
    async def list(self, session: Session, where: TransferFilter, cursor: str | None = None) -> TransferPage:
        """A page of the filtered transfers, newest first, and the cursor of the next (None: the last)."""
        rows = await transfer_repository.listed(session, where, _after(cursor), PAGE_SIZE + 1)
        more = len(rows) > PAGE_SIZE
        rows = rows[:PAGE_SIZE]
        return TransferPage(rows, _cursor(rows[-1]) if more and rows else None)

    async def detail(self, session: Session, scope: str | None, transfer_id: str) -> TransferDetail:
        """One transfer, its moves and its notifications; another merchant's answers as if it did not exist."""
        row = await transfer_repository.get(session, transfer_id)
        if row is None or (scope is not None and row.merchant_id != scope):
            raise NoSuchTransfer()
        callbacks = await payments_repository.callbacks(session, row.merchant_id, row.id)
        attempts = await payments_repository.attempts(session, [c.id for c in callbacks])
        by_callback: dict[int, list[CallbackAttemptRow]] = {}
        for attempt in attempts:
            by_callback.setdefault(attempt.callback_id, []).append(attempt)
        timeline = [(row.created_at, "Accepted (01 Initiated), amount held", row.partner_reference_no)]
        if row.finished_at is not None:
            ending = TransferStatus.SUCCESS if row.refunded_at else TransferStatus(row.status)
            timeline.append((row.finished_at, f"{ending.value} {DESCRIPTIONS[ending]}", row.reason or ""))
        if row.refunded_at is not None:
            timeline.append((row.refunded_at, "04 Refunded: the ledger credited back", row.reason or ""))
        for callback in callbacks:
            timeline.append((callback.created_at, "Notification recorded", f"#{callback.id} → {callback.status}"))
        return TransferDetail(
            row, [(c, by_callback.get(c.id, [])) for c in callbacks], sorted(timeline, key=lambda entry: entry[0])
        )

    def csv_header(self) -> str:
        return _csv_line(
            [
                "reference_no",
                "partner_reference_no",
                "merchant_id",
                "status",
                "status_description",
                "amount",
                "currency",
                "beneficiary_bank_code",
                "beneficiary_bank_name",
                "beneficiary_account_no",
                "beneficiary_account_name",
                "fee_type",
                "remark",
                "reason",
                "rail_reference",
                "external_id",
                "created_at",
                "finished_at",
                "refunded_at",
            ]
        )

    async def csv_page(
        self, session: Session, where: TransferFilter, after: tuple[datetime, str] | None
    ) -> tuple[str, tuple[datetime, str] | None]:
        """The rows after `after` as CSV, a page of them, and where the next page starts (None: the last)."""
        rows = await transfer_repository.listed(session, where, after, EXPORT_PAGE)
        if not rows:
            return "", None
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\r\n")
        for row in rows:
            writer.writerow(
                [
                    _cell(str(value))
                    for value in (
                        row.id,
                        row.partner_reference_no,
                        row.merchant_id,
                        row.status,
                        row.status_description,
                        row.amount,
                        row.currency,
                        row.beneficiary_bank_code,
                        row.beneficiary_bank_name,
                        row.beneficiary_account_no,
                        row.beneficiary_account_name,
                        row.fee_type,
                        row.remark or "",
                        row.reason or "",
                        row.rail_reference or "",
                        row.external_id,
                        row.created_at.isoformat(),
                        row.finished_at.isoformat() if row.finished_at else "",
                        row.refunded_at.isoformat() if row.refunded_at else "",
                    )
                ]
            )
        last = rows[-1]
        return buffer.getvalue(), ((last.created_at, last.id) if len(rows) == EXPORT_PAGE else None)


def _cell(value: str) -> str:
    # A cell a spreadsheet would run as a formula is written as text (CSV injection), as the payments' export.
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _csv_line(values: list[str]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerow(values)
    return buffer.getvalue()


payout_reports = PayoutReports()

"""Every payment-link query: statements compiled once (kasir.db.Statement), plain rows back.

A link's change (an attempt's outcome, expiry) reads the link locked, changes it, and `save`s the
columns a transition changes; a choice on its page adds a `link_attempt` row in the same unit.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, bindparam, func, insert, select, union_all, update

from kasir.card.models import CardOrder
from kasir.db import Session, Statement, binds, locked_once
from kasir.links.models import LinkAttempt, PaymentLink
from kasir.va.models import VirtualAccount
from kasir.wallet.models import WalletTransaction


@dataclass(slots=True)
class LinkRow:
    """A link as read (or just written): every column of `payment_link`."""

    id: str
    merchant_id: str
    sub_merchant_id: str | None
    external_id: str
    order_id: str
    amount: int
    description: str
    status: str
    is_customer_paying_fee: bool
    save_card: bool
    callback_url: str
    success_redirect_url: str | None
    failed_redirect_url: str | None
    channels: str
    details: str
    attempts_failed: int
    payment_method: str | None
    payment_channel: str | None
    acq: str | None
    response_message: str | None
    card_token: str | None
    created_at: datetime
    expires_at: datetime
    open_until: datetime | None
    paid_at: datetime | None
    updated_at: datetime


@dataclass(slots=True)
class AttemptRow:
    """One method the customer chose: every column of `link_attempt`."""

    id: int
    link_id: str
    number: int
    method: str
    channel: str
    acq: str
    inner_id: str
    status: str
    reason: str | None
    created_at: datetime
    updated_at: datetime


LINK_COLUMNS = tuple(field.name for field in fields(LinkRow))
ATTEMPT_COLUMNS = tuple(field.name for field in fields(AttemptRow))
# What a transition changes; the rest is written once, at creation.
CHANGING_COLUMNS = (
    "status",
    "attempts_failed",
    "payment_method",
    "payment_channel",
    "acq",
    "response_message",
    "card_token",
    "open_until",
    "paid_at",
    "updated_at",
)
# The other payments of the merchant whose external_id a link may not take (§9.2: one namespace). Their rows
# that belong to a link carry an external_id of Kasir's own making, never the merchant's.
NAMESPACE = (WalletTransaction, CardOrder, VirtualAccount)


def _add(insert: Any) -> Any:
    """INSERT ... SELECT the link WHERE no wallet transaction, card order or VA of the merchant has its
    external_id; the unique (merchant_id, external_id) refuses another link's. No savepoint, no exception."""
    values = binds(PaymentLink, LINK_COLUMNS)
    taken = [
        select(table.id).where(table.merchant_id == values["merchant_id"], table.external_id == values["external_id"])
        for table in NAMESPACE
    ]
    # SQLite reads "INSERT ... SELECT ... ON CONFLICT" right only when the SELECT has a WHERE: it has.
    rows = select(*(value.label(name) for name, value in values.items())).where(*(~query.exists() for query in taken))
    table = PaymentLink.__table__
    return insert(table).from_select([table.c[name] for name in values], rows).on_conflict_do_nothing()


_ADD = Statement(_add)
_link = select(*(PaymentLink.__table__.c[name] for name in LINK_COLUMNS)).where(PaymentLink.id == bindparam("link_id"))
_LINK = Statement(_link)
_LOCKED_LINK = Statement(_link.with_for_update())
_SAVE = Statement(
    update(PaymentLink).where(PaymentLink.id == bindparam("link_id")).values(binds(PaymentLink, CHANGING_COLUMNS))
)
_DUE_FOR_EXPIRY = Statement(
    select(PaymentLink.id)
    .where(PaymentLink.open_until <= bindparam("now", type_=PaymentLink.expires_at.type))
    .order_by(PaymentLink.open_until)
    .limit(bindparam("due_limit", type_=Integer()))
)
_ADD_ATTEMPT = Statement(insert(LinkAttempt).values(binds(LinkAttempt, ATTEMPT_COLUMNS[1:])))
_attempts = select(*(LinkAttempt.__table__.c[name] for name in ATTEMPT_COLUMNS)).where(
    LinkAttempt.link_id == bindparam("link_id")
)
_ATTEMPTS = Statement(_attempts.order_by(LinkAttempt.number))
_ATTEMPT_OF_INNER = Statement(
    select(*(LinkAttempt.__table__.c[name] for name in ATTEMPT_COLUMNS)).where(
        LinkAttempt.inner_id == bindparam("inner_id")
    )
)
_LAST_NUMBER = Statement(
    select(func.coalesce(func.max(LinkAttempt.number), 0)).where(LinkAttempt.link_id == bindparam("link_id"))
)
_SAVE_ATTEMPT = Statement(
    update(LinkAttempt)
    .where(LinkAttempt.id == bindparam("attempt_id"))
    .values(binds(LinkAttempt, ("status", "reason", "updated_at")))
)
_BY_EXTERNAL_ID = Statement(
    union_all(
        *(
            select(table.id).where(
                table.merchant_id == bindparam("merchant_id"), table.external_id == bindparam("external_id")
            )
            for table in (PaymentLink, *NAMESPACE)
        )
    ).limit(1)
)


class LinkRepository:
    async def add(self, session: Session, link: LinkRow) -> bool:
        """Insert the link; False when the merchant used its external_id before (any payment of the merchant)."""
        inserted = await _ADD.execute(session, **{name: getattr(link, name) for name in LINK_COLUMNS})
        return inserted == 1

    async def external_id_taken(self, session: Session, merchant_id: str, external_id: str) -> bool:
        return await _BY_EXTERNAL_ID.scalar(session, merchant_id=merchant_id, external_id=external_id) is not None

    async def get(self, session: Session, link_id: str, *, lock: bool = False) -> LinkRow | None:
        """The link; with `lock`, locked until the unit ends and read once per unit (kasir.db.locked_once)."""
        if not lock:
            found = await _LINK.first(session, link_id=link_id)
            return None if found is None else LinkRow(*found)

        async def read() -> LinkRow | None:
            found = await _LOCKED_LINK.first(session, link_id=link_id)
            return None if found is None else LinkRow(*found)

        row: LinkRow | None = await locked_once(session, (PaymentLink, link_id), read)
        return row

    async def save(self, session: Session, link: LinkRow) -> None:
        await _SAVE.execute(session, link_id=link.id, **{name: getattr(link, name) for name in CHANGING_COLUMNS})

    async def due_for_expiry(self, session: Session, now: datetime, limit: int = 500) -> list[str]:
        return [row[0] for row in await _DUE_FOR_EXPIRY.rows(session, now=now, due_limit=limit)]

    async def attempts(self, session: Session, link_id: str) -> list[AttemptRow]:
        return [AttemptRow(*row) for row in await _ATTEMPTS.rows(session, link_id=link_id)]

    async def attempt_of(self, session: Session, inner_id: str) -> AttemptRow | None:
        """The attempt that made the inner payment `inner_id`."""
        found = await _ATTEMPT_OF_INNER.first(session, inner_id=inner_id)
        return None if found is None else AttemptRow(*found)

    async def add_attempt(self, session: Session, attempt: AttemptRow) -> None:
        await _ADD_ATTEMPT.execute(session, **{name: getattr(attempt, name) for name in ATTEMPT_COLUMNS[1:]})

    async def next_number(self, session: Session, link_id: str) -> int:
        return int(await _LAST_NUMBER.scalar(session, link_id=link_id)) + 1

    async def save_attempt(self, session: Session, attempt: AttemptRow) -> None:
        await _SAVE_ATTEMPT.execute(
            session, attempt_id=attempt.id, status=attempt.status, reason=attempt.reason, updated_at=attempt.updated_at
        )


link_repository = LinkRepository()

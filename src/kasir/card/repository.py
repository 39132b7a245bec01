"""Every card query.

Orders, attempts and stored cards come back as plain rows (`CardOrderRow`, `CardAttemptRow`,
`StoredCardRow`), never ORM objects: a service that changes an order or an attempt writes it
back itself (`save`, `save_attempt`), the columns that change, keyed by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, cast, delete, insert, null, select, union_all, update

from kasir.card.models import CardAttempt, CardOrder, StoredCard
from kasir.card.states import CardOrderStatus
from kasir.db import Session, Statement, binds, fetch, held_rows, locked_once
from kasir.payments.external_ids import declared
from kasir.payments.owners import lock_owner_first
from kasir.va.models import VirtualAccount
from kasir.wallet.models import WalletTransaction

OPEN_STATUSES = (CardOrderStatus.PENDING.value, CardOrderStatus.AUTHENTICATING.value)


@dataclass(slots=True)
class CardOrderRow:
    """A card order as read: every column of `card_order`.

    Changed only by the service (an attempt, its outcome, expiry), on a row read locked, and
    written back by `CardRepository.save`.
    """

    id: str
    merchant_id: str
    external_id: str
    order_id: str
    currency: str
    amount: int
    payment_method: str
    payment_channel: str
    payment_mode: str
    status: str
    tenor: str | None
    attempts_made: int
    attempts_failed: int
    details: str
    return_url: str
    callback_url: str | None
    acq: str | None
    response_message: str | None
    save_card: bool
    card_token: str | None
    created_at: datetime
    expires_at: datetime
    updated_at: datetime
    paid_at: datetime | None
    dialect: str | None
    sub_merchant_id: str | None
    link_id: str | None = None  # the owning payment link (kasir.links), else None


@dataclass(slots=True)
class CardAttemptRow:
    """One attempt as read: every column of `card_attempt`; its outcome is written back by `save_attempt`."""

    id: int
    card_order_id: str
    number: int
    status: str
    masked_card: str
    card_brand: str
    card_exp_month: str
    card_exp_year: str
    tenor: str
    acq: str
    response_message: str
    challenge_url: str | None
    created_at: datetime
    completed_at: datetime | None
    card_holder_name: str | None
    decline_reason: str | None


@dataclass(frozen=True, slots=True)
class StoredCardRow:
    """A stored card as read: every column of `card_stored` (never the number, never the CVN)."""

    token: str
    merchant_id: str
    card_order_id: str
    masked_card: str
    card_brand: str
    card_exp_month: str
    card_exp_year: str
    created_at: datetime


ORDER_COLUMNS = tuple(field.name for field in fields(CardOrderRow))
ATTEMPT_COLUMNS = tuple(field.name for field in fields(CardAttemptRow))
STORED_CARD_COLUMNS = tuple(field.name for field in fields(StoredCardRow))
# What an attempt, its outcome or expiry changes of an order; the rest is written once, at creation.
ORDER_CHANGING_COLUMNS = (
    "status",
    "tenor",
    "attempts_made",
    "attempts_failed",
    "acq",
    "response_message",
    "save_card",
    "card_token",
    "updated_at",
    "paid_at",
)
# What the acquirer's decision (or expiry) changes of an attempt.
ATTEMPT_CHANGING_COLUMNS = ("status", "response_message", "challenge_url", "completed_at", "decline_reason")


def _reference_queries(table: Any, values: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """The merchant's rows of `table` with the orderId, and those with the externalId.

    Two queries, not one with OR: on the wallet transactions SQLite would answer the OR by
    reading every transaction of the merchant.
    """
    merchant_id, order_id, external_id = (
        (values or {}).get(name, bindparam(name)) for name in ("merchant_id", "order_id", "external_id")
    )
    rows = select(table.order_id, table.external_id)
    return (
        rows.where(table.merchant_id == merchant_id, table.order_id == order_id),
        rows.where(table.merchant_id == merchant_id, table.external_id == external_id),
    )


# The charge's statements are compiled once (kasir.db.Statement): every charge runs them.


def _va_external_id(values: dict[str, Any] | None = None) -> Any:
    """The merchant's virtual account with the externalId (§9.2: external_id is unique among the merchant's wallet
    transactions, card orders and VAs; a VA's order_id takes no part in the orderId check)."""
    merchant_id, external_id = ((values or {}).get(name, bindparam(name)) for name in ("merchant_id", "external_id"))
    return select(cast(null(), VirtualAccount.order_id.type).label("order_id"), VirtualAccount.external_id).where(
        VirtualAccount.merchant_id == merchant_id, VirtualAccount.external_id == external_id
    )


def _declared_external_ids(values: dict[str, Any] | None = None) -> list[Any]:
    """The merchant's payment links with the externalId (kasir.payments.external_ids), as `_va_external_id`."""
    merchant_id, external_id = ((values or {}).get(name, bindparam(name)) for name in ("merchant_id", "external_id"))
    return [
        select(cast(null(), CardOrder.order_id.type).label("order_id"), model.external_id).where(
            model.merchant_id == merchant_id, model.external_id == external_id
        )
        for model in declared()
    ]


# orderId and externalId are unique per merchant across card orders and wallet transactions (docs/decisions.md §7),
# externalId also across virtual accounts (§9.2).
_USED_REFERENCE = Statement(
    # Built on first use: the declared tables (a payment link's) are known once every model is imported.
    lambda _: union_all(
        *_reference_queries(CardOrder),
        *_reference_queries(WalletTransaction),
        _va_external_id(),
        *_declared_external_ids(),
    ).limit(1)
)


def _add_order(insert: Any) -> Any:
    """INSERT ... SELECT the values WHERE no wallet transaction of the merchant uses either reference.

    Either unique constraint of the card orders (orderId, externalId) refuses the row, and the
    guard refuses a reference of a wallet transaction: one statement where a look-up and an
    insert were two, no savepoint, no exception on the path. Whether the row went in is the
    count of changed rows: a RETURNING clause would cost SQLite an ephemeral table per charge.
    """
    values = binds(CardOrder)
    same_order_id, same_external_id = _reference_queries(WalletTransaction, values)
    # SQLite reads "INSERT ... SELECT ... ON CONFLICT" right only when the SELECT has a WHERE: it has.
    rows = select(*(value.label(name) for name, value in values.items())).where(
        ~same_order_id.exists(),
        ~same_external_id.exists(),
        ~_va_external_id(values).exists(),
        *(~query.exists() for query in _declared_external_ids(values)),
    )
    # On the table, not the mapped class: the ORM's bulk INSERT (what an ORM session makes of an
    # INSERT of a mapped class, on PostgreSQL) does not take an INSERT ... SELECT.
    table = CardOrder.__table__
    return insert(table).from_select([table.c[name] for name in values], rows).on_conflict_do_nothing()


_ADD_ORDER = Statement(_add_order)


def _columns(model: Any, names: Sequence[str]) -> list[Any]:
    return [model.__table__.c[name] for name in names]


_order = select(*_columns(CardOrder, ORDER_COLUMNS)).where(CardOrder.id == bindparam("card_order_id"))
_ORDER = Statement(_order)
_LOCKED_ORDER = Statement(_order.with_for_update())
_SAVE_ORDER = Statement(
    update(CardOrder).where(CardOrder.id == bindparam("card_order_id")).values(binds(CardOrder, ORDER_CHANGING_COLUMNS))
)
_REMOVE_ORDER = Statement(delete(CardOrder).where(CardOrder.id == bindparam("card_order_id")))

# Every column but the id, which the database numbers.
_ADD_ATTEMPT = Statement(insert(CardAttempt).values(binds(CardAttempt, ATTEMPT_COLUMNS[1:])))
_attempts = select(*_columns(CardAttempt, ATTEMPT_COLUMNS)).where(
    CardAttempt.card_order_id == bindparam("card_order_id")
)
_ATTEMPTS = Statement(_attempts.order_by(CardAttempt.number))
_ATTEMPT = Statement(_attempts.where(CardAttempt.number == bindparam("number")))
_SAVE_ATTEMPT = Statement(
    update(CardAttempt)
    .where(CardAttempt.id == bindparam("attempt_id"))
    .values(binds(CardAttempt, ATTEMPT_CHANGING_COLUMNS))
)
_REMOVE_ATTEMPT = Statement(
    delete(CardAttempt).where(
        CardAttempt.card_order_id == bindparam("card_order_id"), CardAttempt.number == bindparam("number")
    )
)

_ADD_STORED_CARD = Statement(insert(StoredCard).values(binds(StoredCard, STORED_CARD_COLUMNS)))
_STORED_CARD = Statement(
    select(*_columns(StoredCard, STORED_CARD_COLUMNS)).where(
        StoredCard.token == bindparam("token"), StoredCard.merchant_id == bindparam("merchant_id")
    )
)


class CardRepository:
    # --- orders ------------------------------------------------------------------------

    async def add_order(self, session: Session, values: dict[str, Any]) -> bool:
        """Insert a card order (every column); False when orderId or externalId is taken for this merchant,
        by a card order or a wallet transaction (`used_reference` tells which).

        The unique constraints decide races between concurrent charges.
        """
        return await _ADD_ORDER.execute(session, **values) == 1

    async def used_reference(
        self, session: Session, merchant_id: str, order_id: str, external_id: str
    ) -> tuple[str, str] | None:
        """(order_id, external_id) of this merchant's card order or wallet transaction using either reference."""
        row = await _USED_REFERENCE.first(session, merchant_id=merchant_id, order_id=order_id, external_id=external_id)
        return (row[0], row[1]) if row is not None else None

    async def get(self, session: Session, order_id: str, *, lock: bool = False) -> CardOrderRow | None:
        """The order; with `lock`, locked until the unit of work ends (PostgreSQL: FOR UPDATE; SQLite:
        the unit holds the database's one write seat already), and read once per unit: a second
        locked read (the processor call's lock, then its record) is the first's row, with the
        changes the unit made to it."""
        if not lock:
            found = await _ORDER.first(session, card_order_id=order_id)
            return None if found is None else CardOrderRow(*found)

        async def read() -> CardOrderRow | None:
            await lock_owner_first(session, CardOrder, order_id)  # a link's: the link first
            found = await _LOCKED_ORDER.first(session, card_order_id=order_id)
            return None if found is None else CardOrderRow(*found)

        row: CardOrderRow | None = await locked_once(session, (CardOrder, order_id), read)
        return row

    async def save(self, session: Session, order: CardOrderRow) -> None:
        """Write the changes (`ORDER_CHANGING_COLUMNS`) of an order read locked, or just added."""
        values = {name: getattr(order, name) for name in ORDER_CHANGING_COLUMNS}
        await _SAVE_ORDER.execute(session, card_order_id=order.id, **values)

    async def due_for_expiry(self, session: Session, now: datetime, limit: int = 500) -> Sequence[str]:
        """Open orders past their expiredTime, the longest due first (built per call: a Statement takes no IN list)."""
        rows = await fetch(
            session,
            select(CardOrder.id)
            .where(CardOrder.status.in_(OPEN_STATUSES), CardOrder.expires_at <= now)
            .order_by(CardOrder.expires_at)
            .limit(limit),
        )
        return [row.id for row in rows]

    async def remove_order(self, session: Session, order: CardOrderRow) -> None:
        """An order no one has seen: its charge was taken back before it was answered."""
        await _REMOVE_ORDER.execute(session, card_order_id=order.id)
        held_rows(session).pop((CardOrder, order.id), None)

    # --- attempts ----------------------------------------------------------------------

    async def add_attempt(self, session: Session, values: dict[str, Any]) -> None:
        """Insert an attempt: every column but `id`."""
        await _ADD_ATTEMPT.execute(session, **values)

    async def save_attempt(self, session: Session, attempt: CardAttemptRow) -> None:
        """Write an attempt's outcome (`ATTEMPT_CHANGING_COLUMNS`); its order is locked by the unit."""
        values = {name: getattr(attempt, name) for name in ATTEMPT_CHANGING_COLUMNS}
        await _SAVE_ATTEMPT.execute(session, attempt_id=attempt.id, **values)

    async def remove_attempt(self, session: Session, order_id: str, number: int) -> None:
        await _REMOVE_ATTEMPT.execute(session, card_order_id=order_id, number=number)

    async def attempts(self, session: Session, order_id: str) -> list[CardAttemptRow]:
        """The order's attempts, first to last."""
        return [CardAttemptRow(*row) for row in await _ATTEMPTS.rows(session, card_order_id=order_id)]

    async def attempt(self, session: Session, order_id: str, number: int) -> CardAttemptRow | None:
        found = await _ATTEMPT.first(session, card_order_id=order_id, number=number)
        return None if found is None else CardAttemptRow(*found)

    # --- stored cards (kasir.card.dialect) -----------------------------------------------

    async def store_card(self, session: Session, order: CardOrderRow, attempt: CardAttemptRow, now: datetime) -> None:
        """The order's card under its `card_token`: what the attempt kept of it (never the number, the CVN)."""
        assert order.card_token is not None
        await _ADD_STORED_CARD.execute(
            session,
            token=order.card_token,
            merchant_id=order.merchant_id,
            card_order_id=order.id,
            masked_card=attempt.masked_card,
            card_brand=attempt.card_brand,
            card_exp_month=attempt.card_exp_month,
            card_exp_year=attempt.card_exp_year,
            created_at=now,
        )

    async def stored_card(self, session: Session, merchant_id: str, token: str) -> StoredCardRow | None:
        """The merchant's card stored under `token`; None for an unknown token or another merchant's."""
        found = await _STORED_CARD.first(session, token=token, merchant_id=merchant_id)
        return None if found is None else StoredCardRow(*found)


card_repository = CardRepository()

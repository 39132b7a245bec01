"""Every card query."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select, union_all

from kasir.card.models import CardAttempt, CardOrder, StoredCard
from kasir.card.states import CardOrderStatus
from kasir.db import Session, Statement, binds
from kasir.wallet.models import WalletTransaction

OPEN_STATUSES = (CardOrderStatus.PENDING.value, CardOrderStatus.AUTHENTICATING.value)


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

# orderId and externalId are unique per merchant across card orders and wallet transactions (docs/decisions.md §7).
_USED_REFERENCE = Statement(union_all(*_reference_queries(CardOrder), *_reference_queries(WalletTransaction)).limit(1))


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
        ~same_order_id.exists(), ~same_external_id.exists()
    )
    # On the table, not the mapped class: the ORM's bulk INSERT (session.execute, on PostgreSQL)
    # does not take an INSERT ... SELECT.
    table = CardOrder.__table__
    return insert(table).from_select([table.c[name] for name in values], rows).on_conflict_do_nothing()


_ADD_ORDER = Statement(_add_order)


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

    async def get(self, session: Session, order_id: str, *, lock: bool = False) -> CardOrder | None:
        query = select(CardOrder).where(CardOrder.id == order_id)
        if lock:
            query = query.with_for_update()
        return await session.scalar(query.execution_options(populate_existing=True))

    async def due_for_expiry(self, session: Session, now: datetime, limit: int = 500) -> Sequence[str]:
        result = await session.scalars(
            select(CardOrder.id)
            .where(CardOrder.status.in_(OPEN_STATUSES), CardOrder.expires_at <= now)
            .order_by(CardOrder.expires_at)
            .limit(limit)
        )
        return result.all()

    # --- attempts ----------------------------------------------------------------------

    async def add_attempt(self, session: Session, attempt: CardAttempt) -> None:
        session.add(attempt)
        await session.flush()

    async def remove_attempt(self, session: Session, order_id: str, number: int) -> None:
        attempt = await self.attempt(session, order_id, number)
        if attempt is not None:
            await session.delete(attempt)
            await session.flush()

    async def remove_order(self, session: Session, order: CardOrder) -> None:
        """An order no one has seen: its charge was taken back before it was answered."""
        await session.delete(order)
        await session.flush()

    async def attempts(self, session: Session, order_id: str) -> Sequence[CardAttempt]:
        result = await session.scalars(
            select(CardAttempt).where(CardAttempt.card_order_id == order_id).order_by(CardAttempt.number)
        )
        return result.all()

    async def attempt(self, session: Session, order_id: str, number: int) -> CardAttempt | None:
        return await session.scalar(
            select(CardAttempt).where(CardAttempt.card_order_id == order_id, CardAttempt.number == number)
        )

    # --- stored cards (kasir.card.dialect) -----------------------------------------------

    async def store_card(self, session: Session, order: CardOrder, attempt: CardAttempt, now: datetime) -> None:
        """The order's card under its `card_token`: what the attempt kept of it (never the number, the CVN)."""
        assert order.card_token is not None
        session.add(
            StoredCard(
                token=order.card_token,
                merchant_id=order.merchant_id,
                card_order_id=order.id,
                masked_card=attempt.masked_card,
                card_brand=attempt.card_brand,
                card_exp_month=attempt.card_exp_month,
                card_exp_year=attempt.card_exp_year,
                created_at=now,
            )
        )
        await session.flush()

    async def stored_card(self, session: Session, merchant_id: str, token: str) -> StoredCard | None:
        """The merchant's card stored under `token`; None for an unknown token or another merchant's."""
        return await session.scalar(
            select(StoredCard).where(StoredCard.token == token, StoredCard.merchant_id == merchant_id)
        )


card_repository = CardRepository()

"""Every card query."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, or_, select, union_all, update
from sqlalchemy.ext.asyncio import AsyncSession

from kasir.card.models import CardAttempt, CardIdempotencyKey, CardOrder
from kasir.card.states import CardOrderStatus
from kasir.db import add_unless_duplicate, upsert_insert
from kasir.wallet.models import WalletTransaction

OPEN_STATUSES = (CardOrderStatus.PENDING.value, CardOrderStatus.AUTHENTICATING.value)


def _reference_query(table: Any) -> Any:
    return select(table.order_id, table.external_id).where(
        table.merchant_id == bindparam("merchant_id"),
        or_(table.order_id == bindparam("order_id"), table.external_id == bindparam("external_id")),
    )


# Built once (every charge runs it): orderId and externalId are unique per merchant across card
# orders and wallet transactions (decisions.md §7).
_USED_REFERENCE = union_all(_reference_query(CardOrder), _reference_query(WalletTransaction)).limit(1)


class CardRepository:
    # --- orders ------------------------------------------------------------------------

    async def add_order(self, session: AsyncSession, order: CardOrder) -> bool:
        """False when orderId or externalId is taken for this merchant (the unique constraints decide races)."""
        return await add_unless_duplicate(session, order)

    async def used_reference(
        self, session: AsyncSession, merchant_id: str, order_id: str, external_id: str
    ) -> tuple[str, str] | None:
        """(order_id, external_id) of this merchant's card order or wallet transaction using either reference."""
        row = (
            await session.execute(
                _USED_REFERENCE, {"merchant_id": merchant_id, "order_id": order_id, "external_id": external_id}
            )
        ).first()
        return (row[0], row[1]) if row is not None else None

    async def get(self, session: AsyncSession, order_id: str, *, lock: bool = False) -> CardOrder | None:
        query = select(CardOrder).where(CardOrder.id == order_id)
        if lock:
            query = query.with_for_update()
        return await session.scalar(query.execution_options(populate_existing=True))

    async def due_for_expiry(self, session: AsyncSession, now: datetime, limit: int = 500) -> Sequence[str]:
        result = await session.scalars(
            select(CardOrder.id)
            .where(CardOrder.status.in_(OPEN_STATUSES), CardOrder.expires_at <= now)
            .order_by(CardOrder.expires_at)
            .limit(limit)
        )
        return result.all()

    # --- attempts ----------------------------------------------------------------------

    async def add_attempt(self, session: AsyncSession, attempt: CardAttempt) -> None:
        session.add(attempt)
        await session.flush()

    async def attempts(self, session: AsyncSession, order_id: str) -> Sequence[CardAttempt]:
        result = await session.scalars(
            select(CardAttempt).where(CardAttempt.card_order_id == order_id).order_by(CardAttempt.number)
        )
        return result.all()

    async def attempt(self, session: AsyncSession, order_id: str, number: int) -> CardAttempt | None:
        return await session.scalar(
            select(CardAttempt).where(CardAttempt.card_order_id == order_id, CardAttempt.number == number)
        )

    # --- idempotency keys --------------------------------------------------------------

    async def add_key(self, session: AsyncSession, row: CardIdempotencyKey) -> int | None:
        """The new row's id; None when (merchant, key) is taken.

        One `INSERT ... ON CONFLICT DO NOTHING RETURNING id`: no savepoint on every charge's path.
        """
        statement = (
            upsert_insert(session, CardIdempotencyKey)
            .values(
                merchant_id=row.merchant_id,
                key=row.key,
                request_hash=row.request_hash,
                status=row.status,
                created_at=row.created_at,
                expires_at=row.expires_at,
            )
            .on_conflict_do_nothing(index_elements=["merchant_id", "key"])
            .returning(CardIdempotencyKey.id)
        )
        key_id: int | None = (await session.execute(statement)).scalar_one_or_none()
        return key_id

    async def key(self, session: AsyncSession, merchant_id: str, key: str) -> CardIdempotencyKey | None:
        return await session.scalar(
            select(CardIdempotencyKey)
            .where(CardIdempotencyKey.merchant_id == merchant_id, CardIdempotencyKey.key == key)
            .execution_options(populate_existing=True)
        )

    async def take_over_key(
        self, session: AsyncSession, row: CardIdempotencyKey, request_hash: str, now: datetime, expires_at: datetime
    ) -> bool:
        """Re-claim an expired or abandoned key row; only one of several racing claimers wins."""
        result = await session.execute(
            update(CardIdempotencyKey)
            .where(
                CardIdempotencyKey.id == row.id,
                CardIdempotencyKey.status == row.status,
                CardIdempotencyKey.created_at == row.created_at,
            )
            .values(
                request_hash=request_hash,
                status="in_progress",
                response_status=None,
                response_body=None,
                created_at=now,
                expires_at=expires_at,
            )
            .execution_options(synchronize_session=False)
        )
        return bool(getattr(result, "rowcount", 0) == 1)

    async def complete_key(self, session: AsyncSession, key_id: int, status: int, body: str) -> None:
        await session.execute(
            update(CardIdempotencyKey)
            .where(CardIdempotencyKey.id == key_id)
            .values(status="complete", response_status=status, response_body=body)
            .execution_options(synchronize_session=False)
        )

    async def delete_key(self, session: AsyncSession, key_id: int) -> None:
        await session.execute(delete(CardIdempotencyKey).where(CardIdempotencyKey.id == key_id))

    async def forget_keys_before(self, session: AsyncSession, now: datetime) -> None:
        await session.execute(delete(CardIdempotencyKey).where(CardIdempotencyKey.expires_at <= now))


card_repository = CardRepository()

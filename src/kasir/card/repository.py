"""Every card query."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, or_, select, union_all, update
from sqlalchemy.ext.asyncio import AsyncSession

from kasir.card.models import CardAttempt, CardIdempotencyKey, CardOrder
from kasir.card.states import CardOrderStatus
from kasir.prepared import Prepared, binds, dialect_insert
from kasir.wallet.models import WalletTransaction

OPEN_STATUSES = (CardOrderStatus.PENDING.value, CardOrderStatus.AUTHENTICATING.value)


def _reference_query(table: Any) -> Any:
    return select(table.order_id, table.external_id).where(
        table.merchant_id == bindparam("merchant_id"),
        or_(table.order_id == bindparam("order_id"), table.external_id == bindparam("external_id")),
    )


# The charge's statements are prepared (kasir.prepared): every charge runs them.

# orderId and externalId are unique per merchant across card orders and wallet transactions (decisions.md §7).
_USED_REFERENCE = Prepared(union_all(_reference_query(CardOrder), _reference_query(WalletTransaction)).limit(1))

# Either unique constraint (orderId, externalId) refuses the row: no savepoint, no exception on the path.
_ADD_ORDER = Prepared(
    lambda dialect: (
        dialect_insert(dialect, CardOrder).values(binds(CardOrder)).on_conflict_do_nothing().returning(CardOrder.id)
    )
)

_KEY_COLUMNS = ("merchant_id", "key", "request_hash", "status", "created_at", "expires_at")
_ADD_KEY = Prepared(
    lambda dialect: (
        dialect_insert(dialect, CardIdempotencyKey)
        .values(binds(CardIdempotencyKey, _KEY_COLUMNS))
        .on_conflict_do_nothing(index_elements=["merchant_id", "key"])
        .returning(CardIdempotencyKey.id)
    )
)
_KEY = Prepared(
    select(
        CardIdempotencyKey.id,
        CardIdempotencyKey.request_hash,
        CardIdempotencyKey.status,
        CardIdempotencyKey.response_status,
        CardIdempotencyKey.response_body,
        CardIdempotencyKey.created_at,
        CardIdempotencyKey.expires_at,
    ).where(CardIdempotencyKey.merchant_id == bindparam("merchant_id"), CardIdempotencyKey.key == bindparam("key"))
)
_COMPLETE_KEY = Prepared(
    update(CardIdempotencyKey)
    .where(CardIdempotencyKey.id == bindparam("key_id"))
    .values(status="complete", **binds(CardIdempotencyKey, ("response_status", "response_body")))
)


@dataclass(frozen=True, slots=True)
class KeyRow:
    """A stored idempotency key (decisions.md §7)."""

    id: int
    request_hash: str
    status: str  # in_progress | complete
    response_status: int | None
    response_body: str | None
    created_at: datetime
    expires_at: datetime


class CardRepository:
    # --- orders ------------------------------------------------------------------------

    async def add_order(self, session: AsyncSession, values: dict[str, Any]) -> bool:
        """Insert a card order (every column); False when orderId or externalId is taken for this merchant.

        The unique constraints decide races between concurrent charges.
        """
        return await _ADD_ORDER.scalar(session, **values) is not None

    async def used_reference(
        self, session: AsyncSession, merchant_id: str, order_id: str, external_id: str
    ) -> tuple[str, str] | None:
        """(order_id, external_id) of this merchant's card order or wallet transaction using either reference."""
        row = await _USED_REFERENCE.first(session, merchant_id=merchant_id, order_id=order_id, external_id=external_id)
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

    async def add_key(
        self, session: AsyncSession, merchant_id: str, key: str, request_hash: str, now: datetime, expires_at: datetime
    ) -> int | None:
        """Claim (merchant, key) as in progress: the new row's id, or None when the key is taken."""
        key_id: int | None = await _ADD_KEY.scalar(
            session,
            merchant_id=merchant_id,
            key=key,
            request_hash=request_hash,
            status="in_progress",
            created_at=now,
            expires_at=expires_at,
        )
        return key_id

    async def key(self, session: AsyncSession, merchant_id: str, key: str) -> KeyRow | None:
        row = await _KEY.first(session, merchant_id=merchant_id, key=key)
        return None if row is None else KeyRow(*row)

    async def take_over_key(
        self, session: AsyncSession, row: KeyRow, request_hash: str, now: datetime, expires_at: datetime
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
        await _COMPLETE_KEY.execute(session, key_id=key_id, response_status=status, response_body=body)

    async def delete_key(self, session: AsyncSession, key_id: int) -> None:
        await session.execute(delete(CardIdempotencyKey).where(CardIdempotencyKey.id == key_id))

    async def forget_keys_before(self, session: AsyncSession, now: datetime) -> None:
        await session.execute(delete(CardIdempotencyKey).where(CardIdempotencyKey.expires_at <= now))


card_repository = CardRepository()

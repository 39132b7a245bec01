"""Every card query."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, select, union_all, update
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession

from kasir.card.models import CardAttempt, CardIdempotencyKey, CardOrder
from kasir.card.states import CardOrderStatus
from kasir.prepared import Prepared, binds, dialect_insert
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


# The charge's statements are prepared (kasir.prepared): every charge runs them.

# orderId and externalId are unique per merchant across card orders and wallet transactions (decisions.md §7).
_USED_REFERENCE = Prepared(union_all(*_reference_queries(CardOrder), *_reference_queries(WalletTransaction)).limit(1))


def _add_order(dialect: str) -> Any:
    """INSERT ... SELECT the values WHERE no wallet transaction of the merchant uses either reference.

    Either unique constraint of the card orders (orderId, externalId) refuses the row, and the
    guard refuses a reference of a wallet transaction: one statement where a look-up and an
    insert were two, no savepoint, no exception on the path. Whether the row went in is the
    count of changed rows: a RETURNING clause cost SQLite an ephemeral table per charge
    (~13 µs of the two INSERTs' ~48 µs).
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
    return dialect_insert(dialect, table).from_select([table.c[name] for name in values], rows).on_conflict_do_nothing()


_ADD_ORDER = Prepared(_add_order)

_KEY_COLUMNS = ("merchant_id", "key", "request_hash", "status", "created_at", "expires_at")


def _add_key(columns: Sequence[str], *, returning_id: bool) -> Prepared:
    """INSERT a key row unless (merchant, key) is taken; RETURNING its id when the caller needs it."""

    def build(dialect: str) -> Any:
        insert = (
            dialect_insert(dialect, CardIdempotencyKey)
            .values(binds(CardIdempotencyKey, columns))
            .on_conflict_do_nothing(index_elements=["merchant_id", "key"])
        )
        return insert.returning(CardIdempotencyKey.id) if returning_id else insert

    return Prepared(build)


_ADD_KEY = _add_key(_KEY_COLUMNS, returning_id=True)  # the claim: completed later by its id
_ADD_ANSWERED_KEY = _add_key((*_KEY_COLUMNS, "response_status", "response_body"), returning_id=False)
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


def key_row(merchant_id: str, key: str, request_hash: str, now: datetime, expires_at: datetime) -> dict[str, Any]:
    return {
        "merchant_id": merchant_id,
        "key": key,
        "request_hash": request_hash,
        "created_at": now,
        "expires_at": expires_at,
    }


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


def _answered(row: dict[str, Any], answer: tuple[int, str]) -> dict[str, Any]:
    """A key row complete with its first answer (status, body)."""
    status, body = answer
    return {**row, "status": "complete", "response_status": status, "response_body": body}


class Taken(Exception):
    """A batch program's row was not written: what it names (orderId or externalId, or the key) is taken."""


class CardRepository:
    # --- orders ------------------------------------------------------------------------

    async def add_order(self, session: AsyncSession, values: dict[str, Any]) -> bool:
        """Insert a card order (every column); False when orderId or externalId is taken for this merchant,
        by a card order or a wallet transaction (`used_reference` tells which).

        The unique constraints decide races between concurrent charges.
        """
        return await _ADD_ORDER.execute(session, **values) == 1

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
        """Claim (merchant, key), in progress: the new row's id, or None when the key is taken."""
        row = key_row(merchant_id, key, request_hash, now, expires_at)
        key_id: int | None = await _ADD_KEY.scalar(session, status="in_progress", **row)
        return key_id

    async def add_answered_key(
        self,
        session: AsyncSession,
        merchant_id: str,
        key: str,
        request_hash: str,
        now: datetime,
        expires_at: datetime,
        answer: tuple[int, str],
    ) -> bool:
        """Write (merchant, key) complete at once with `answer` (status, body); False when the key is taken."""
        row = _answered(key_row(merchant_id, key, request_hash, now, expires_at), answer)
        return await _ADD_ANSWERED_KEY.execute(session, **row) == 1

    def order_with_answered_key(
        self,
        dialect: Dialect,
        order: dict[str, Any],
        key_columns: dict[str, Any],
        answer: tuple[int, str],
    ) -> Callable[[sqlite3.Connection], None]:
        """`add_order` then `add_answered_key` as one program of SQLite's group commit (kasir.db.GroupCommit.run).

        Raises Taken, and so undoes the program, when orderId, externalId or the key is taken.
        """
        key_values = _answered(key_columns, answer)

        def program(connection: sqlite3.Connection) -> None:
            if _ADD_ORDER.execute_on(connection, dialect, **order) != 1:
                raise Taken("order")
            if _ADD_ANSWERED_KEY.execute_on(connection, dialect, **key_values) != 1:
                raise Taken("key")

        return program

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

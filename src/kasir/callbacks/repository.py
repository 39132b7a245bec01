from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, and_, bindparam, func, insert, null, or_, select, update
from sqlalchemy.orm import aliased

from kasir.callbacks.models import Callback, CallbackAttempt, CallbackStatus
from kasir.db import Session, Statement, binds

# Every attempt writes these two (kasir.db.Statement: compiled once, no ORM unit of work per attempt).
_ATTEMPT_COLUMNS = (
    "callback_id",
    "number",
    "fence",
    "worker",
    "started_at",
    "latency_ms",
    "http_status",
    "error",
    "response_excerpt",
    "accepted",
    "request_url",
    "request_headers",
)
_ADD_ATTEMPT = Statement(insert(CallbackAttempt).values(binds(CallbackAttempt, _ATTEMPT_COLUMNS)))
# Every payment that changes state records one (a Statement: no ORM object, no flush, per payment).
_NEW_COLUMNS = (
    "merchant_id",
    "kind",
    "transaction_ref",
    "event",
    "url",
    "payload",
    "svc_signature",
    "status",
    "attempts_made",
    "max_attempts",
    "next_attempt_at",
    "fence",
    "created_at",
)
_ADD_CALLBACK = Statement(insert(Callback).values(binds(Callback, _NEW_COLUMNS)))
_OUTCOME_COLUMNS = ("status", "attempts_made", "next_attempt_at", "delivered_at", "last_error")
_RECORD_OUTCOME = Statement(
    update(Callback)
    .where(Callback.id == bindparam("callback_id"), Callback.fence == bindparam("held_fence"))
    .values(lease_owner=null(), lease_expires_at=null(), **binds(Callback, _OUTCOME_COLUMNS))
)


def _claim_statement() -> Statement:
    """Take due callbacks in one statement: UPDATE ... WHERE id IN (the due ones, locked) RETURNING them.

    The inner query takes the due callbacks that are the first unsettled (pending or delivering) one of
    their transaction, oldest first, skipping rows another worker is claiming; the UPDATE sets the lease
    and bumps the fence, and answers what the worker sends. One round trip instead of a SELECT and an
    UPDATE per row.

    "The first unsettled one of its transaction" is asked as `id = (SELECT min(id) ...)`, not as `NOT
    EXISTS (an earlier unsettled sibling)`: PostgreSQL turns NOT EXISTS into an anti-join, and when its
    statistics were taken while nothing was pending (any quiet hour, then a backlog) it estimated one
    pending row and joined every due callback with every unsettled one, a claim costing seconds for a
    few thousand waiting. A scalar subquery is always one look-up per due row, in
    `ix_callback_transaction`, whatever the statistics say.
    """
    due_one, sibling = aliased(Callback), aliased(Callback)
    now = bindparam("now", type_=Callback.next_attempt_at.type)
    first_unsettled_of_its_transaction = (
        select(func.min(sibling.id))
        .where(
            sibling.merchant_id == due_one.merchant_id,
            sibling.kind == due_one.kind,
            sibling.transaction_ref == due_one.transaction_ref,
            # Two comparisons, not IN: a kasir.db statement has no expanding parameters.
            or_(sibling.status == CallbackStatus.PENDING.value, sibling.status == CallbackStatus.DELIVERING.value),
        )
        .scalar_subquery()
    )
    due = or_(
        and_(due_one.status == CallbackStatus.PENDING.value, due_one.next_attempt_at <= now),
        and_(due_one.status == CallbackStatus.DELIVERING.value, due_one.lease_expires_at <= now),
    )
    chosen = (
        select(due_one.id)
        .where(due, due_one.id == first_unsettled_of_its_transaction)
        .order_by(due_one.next_attempt_at, due_one.id)
        .limit(bindparam("claim_limit", type_=Integer()))
        .with_for_update(skip_locked=True, of=due_one)
        .scalar_subquery()
    )
    return Statement(
        update(Callback)
        .where(Callback.id.in_(chosen))
        .values(
            status=CallbackStatus.DELIVERING.value,
            lease_owner=bindparam("worker", type_=Callback.lease_owner.type),
            lease_expires_at=bindparam("lease_until", type_=Callback.lease_expires_at.type),
            fence=Callback.fence + 1,
        )
        .returning(*(getattr(Callback, name) for name in CLAIMED_COLUMNS))
    )


CLAIMED_COLUMNS = (
    "id",
    "fence",
    "kind",
    "merchant_id",
    "transaction_ref",
    "url",
    "payload",
    "svc_signature",
    "attempts_made",
    "max_attempts",
    "created_at",
    "next_attempt_at",
)
_CLAIM = _claim_statement()


class CallbackRepository:
    async def claim(
        self, session: Session, now: datetime, limit: int, worker: str, lease_until: datetime
    ) -> list[tuple[Any, ...]]:
        """Claim up to `limit` due callbacks for `worker` until `lease_until`: rows of CLAIMED_COLUMNS, the fence
        already bumped, oldest first."""
        rows = await _CLAIM.rows(session, now=now, claim_limit=limit, worker=worker, lease_until=lease_until)
        return sorted(rows, key=lambda row: (row[-1], row[0]))

    async def add(self, session: Session, **values: Any) -> None:
        """A new callback: every column of `_NEW_COLUMNS`."""
        await _ADD_CALLBACK.execute(session, **values)

    async def add_replay(self, session: Session, replay: Callback) -> None:
        """A replay, through the ORM: its id is handed back to whoever asked for it."""
        session.add(replay)
        await session.flush()

    async def add_attempt(self, session: Session, **values: Any) -> None:
        """One attempt as it went: every column of `_ATTEMPT_COLUMNS`."""
        await _ADD_ATTEMPT.execute(session, **values)

    async def record_outcome(self, session: Session, callback_id: int, fence: int, **values: Any) -> bool:
        """The callback's state after an attempt, and its lease let go; False when the fence moved on."""
        return await _RECORD_OUTCOME.execute(session, callback_id=callback_id, held_fence=fence, **values) == 1

    async def get(self, session: Session, callback_id: int) -> Callback | None:
        return await session.get(Callback, callback_id)

    async def attempts(self, session: Session, callback_id: int) -> Sequence[CallbackAttempt]:
        result = await session.execute(
            select(CallbackAttempt).where(CallbackAttempt.callback_id == callback_id).order_by(CallbackAttempt.id)
        )
        return result.scalars().all()

    async def search(
        self,
        session: Session,
        *,
        status: str | None = None,
        merchant_id: str | None = None,
        transaction_ref: str | None = None,
        limit: int = 100,
    ) -> Sequence[Callback]:
        query = select(Callback).order_by(Callback.id.desc()).limit(limit)
        if status is not None:
            query = query.where(Callback.status == status)
        if merchant_id is not None:
            query = query.where(Callback.merchant_id == merchant_id)
        if transaction_ref is not None:
            query = query.where(Callback.transaction_ref == transaction_ref)
        return (await session.execute(query)).scalars().all()

    async def count_by_status(self, session: Session) -> dict[str, int]:
        result = await session.execute(select(Callback.status, func.count()).group_by(Callback.status))
        return {status: count for status, count in result.all()}

    async def for_transaction(self, session: Session, transaction_ref: str) -> Sequence[Callback]:
        result = await session.execute(
            select(Callback).where(Callback.transaction_ref == transaction_ref).order_by(Callback.id)
        )
        return result.scalars().all()


callback_repository = CallbackRepository()

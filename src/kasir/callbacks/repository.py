"""Every callback query: the outbox's inserts, the workers' claims and outcomes, the admin's reads.

Reads hand back plain rows (`CallbackRow`, `CallbackAttemptRow`), never ORM objects: a callback
is changed only by the statements here (claim, record_outcome), keyed by its id and fence.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, fields
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Integer, Select, and_, bindparam, func, insert, null, or_, select, update
from sqlalchemy.orm import aliased

from kasir.callbacks.models import TEST_EVENT, Callback, CallbackAttempt, CallbackStatus
from kasir.db import Session, Statement, binds, fetch


@dataclass(frozen=True, slots=True)
class CallbackRow:
    """A callback as read: every column of `callback`."""

    id: int
    merchant_id: str
    kind: str
    transaction_ref: str
    event: str
    url: str
    payload: str
    svc_signature: str | None
    signed_ids: str | None
    status: str
    attempts_made: int
    max_attempts: int
    next_attempt_at: datetime
    lease_owner: str | None
    lease_expires_at: datetime | None
    fence: int
    replay_of: int | None
    event_id: int | None
    attempt_offset: int
    created_at: datetime
    delivered_at: datetime | None
    last_error: str | None

    @property
    def event_key(self) -> int:
        """The event's id, which every delivery of it carries as X-Kasir-Callback-Id: its first row's."""
        return self.event_id if self.event_id is not None else self.id


@dataclass(frozen=True, slots=True)
class CallbackAttemptRow:
    """One attempt as read: every column of `callback_attempt`."""

    id: int
    callback_id: int
    number: int
    fence: int
    worker: str
    started_at: datetime
    latency_ms: int
    http_status: int | None
    error: str | None
    response_excerpt: str | None
    accepted: bool
    request_url: str | None
    request_headers: str | None


CALLBACK_COLUMNS = tuple(field.name for field in fields(CallbackRow))
ATTEMPT_COLUMNS = tuple(field.name for field in fields(CallbackAttemptRow))
CALLBACK_SELECT = select(*(Callback.__table__.c[name] for name in CALLBACK_COLUMNS))
ATTEMPT_SELECT = select(*(CallbackAttempt.__table__.c[name] for name in ATTEMPT_COLUMNS))

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
    "signed_ids",
    "status",
    "attempts_made",
    "max_attempts",
    "next_attempt_at",
    "fence",
    "attempt_offset",
    "created_at",
)
_ADD_CALLBACK = Statement(insert(Callback).values(binds(Callback, _NEW_COLUMNS)))
# A replay: every column but the id, which the database gives (and hands back).
_REPLAY_COLUMNS = tuple(name for name in CALLBACK_COLUMNS if name != "id")
_ADD_REPLAY = Statement(insert(Callback).values(binds(Callback, _REPLAY_COLUMNS)).returning(Callback.id))
_CALLBACK = Statement(CALLBACK_SELECT.where(Callback.id == bindparam("callback_id")))
_ATTEMPTS = Statement(
    ATTEMPT_SELECT.where(CallbackAttempt.callback_id == bindparam("callback_id")).order_by(CallbackAttempt.id)
)
_COUNT_BY_STATUS = Statement(select(Callback.status, func.count()).group_by(Callback.status))
# An event's deliveries: its first row and every replay of it, oldest first.
_DELIVERIES = Statement(
    CALLBACK_SELECT.where(
        or_(Callback.id == bindparam("event_key"), Callback.event_id == bindparam("event_key"))
    ).order_by(Callback.id)
)
# The event's first row, locked: replays of one event are decided one after the other.
_EVENT_LOCKED = Statement(CALLBACK_SELECT.where(Callback.id == bindparam("event_key")).with_for_update())
_OUTCOME_COLUMNS = ("status", "attempts_made", "next_attempt_at", "delivered_at", "last_error")
_RECORD_OUTCOME = Statement(
    update(Callback)
    .where(Callback.id == bindparam("callback_id"), Callback.fence == bindparam("held_fence"))
    .values(lease_owner=null(), lease_expires_at=null(), **binds(Callback, _OUTCOME_COLUMNS))
)


def given_up_events(merchant_id: str | Any | None = None, since: datetime | Any | None = None) -> Select[Any]:
    """Events given up: first rows whose every delivery failed (a replay that fails again adds none, one
    delivered since takes the event out). The inner look-up is by `ix_callback_event_id`, for failed rows
    only, which are few."""
    other = aliased(Callback)
    not_failed_delivery = (
        select(other.id).where(other.event_id == Callback.id, other.status != CallbackStatus.FAILED.value).exists()
    )
    query = select(*(Callback.__table__.c[name] for name in CALLBACK_COLUMNS)).where(
        Callback.event_id.is_(None),
        Callback.status == CallbackStatus.FAILED.value,
        Callback.event != TEST_EVENT,  # a refused test callback is the merchant's to fix, not a lost payment event
        ~not_failed_delivery,
    )
    if merchant_id is not None:
        query = query.where(Callback.merchant_id == merchant_id)
    if since is not None:
        query = query.where(Callback.created_at >= since)
    return query


def delivered_events(merchant_id: str | Any | None = None, since: datetime | Any | None = None) -> Select[Any]:
    """Events delivered: first rows delivered themselves or by any replay of theirs, counted once however
    many deliveries and attempts it took (as `given_up_events` counts the events given up)."""
    other = aliased(Callback)
    delivered_by_a_replay = (
        select(other.id).where(other.event_id == Callback.id, other.status == CallbackStatus.DELIVERED.value).exists()
    )
    query = select(Callback.id).where(
        Callback.event_id.is_(None),
        Callback.event != TEST_EVENT,  # the overview counts payment events, not a merchant's tests
        or_(Callback.status == CallbackStatus.DELIVERED.value, delivered_by_a_replay),
    )
    if merchant_id is not None:
        query = query.where(Callback.merchant_id == merchant_id)
    if since is not None:
        query = query.where(Callback.created_at >= since)
    return query


# The overview's counts of events, compiled once for each shape (a merchant or not, a time or not): the
# overview asks for them every few seconds.
_EVENT_COUNTS: dict[tuple[Callable[..., Select[Any]], bool, bool], Statement] = {}


async def _count_events(
    session: Session, events: Callable[..., Select[Any]], merchant_id: str | None, since: datetime | None
) -> int:
    shape = (events, merchant_id is not None, since is not None)
    statement = _EVENT_COUNTS.get(shape)
    if statement is None:
        query = events(
            bindparam("merchant_id", type_=Callback.merchant_id.type) if merchant_id is not None else None,
            bindparam("since", type_=Callback.created_at.type) if since is not None else None,
        )
        statement = _EVENT_COUNTS[shape] = Statement(select(func.count()).select_from(query.subquery()))
    params = {name: value for name, value in (("merchant_id", merchant_id), ("since", since)) if value is not None}
    return int(await statement.scalar(session, **params) or 0)


def _claim_query(skip_count: int = 0) -> Any:
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

    `skip_count`: the number of merchants whose callbacks are not claimed this time (the worker's share for
    each is taken: kasir.callbacks.worker), bound as `skip_0`, `skip_1`, ...
    """

    def param(name: str, type_: Any) -> Any:
        return bindparam(name, type_=type_)

    due_one, sibling = aliased(Callback), aliased(Callback)
    now = param("now", Callback.next_attempt_at.type)
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
        .where(*(due_one.merchant_id != param(f"skip_{n}", Callback.merchant_id.type) for n in range(skip_count)))
        .order_by(due_one.next_attempt_at, due_one.id)
        .limit(param("claim_limit", Integer()))
        .with_for_update(skip_locked=True, of=due_one)
        .scalar_subquery()
    )
    return (
        update(Callback)
        .where(Callback.id.in_(chosen))
        .values(
            status=CallbackStatus.DELIVERING.value,
            lease_owner=param("worker", Callback.lease_owner.type),
            lease_expires_at=param("lease_until", Callback.lease_expires_at.type),
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
    "signed_ids",
    "event_id",
    "attempt_offset",
    "attempts_made",
    "max_attempts",
    "created_at",
    "next_attempt_at",
)
_CLAIM = Statement(_claim_query())


@lru_cache(maxsize=64)
def _claim_skipping(count: int) -> Statement:
    """The claim skipping `count` merchants, compiled once per count: compiling it costs a claim more than its
    round trip (milliseconds), and a worker whose slow merchant holds its share claims at every wake-up."""
    return Statement(_claim_query(count))


_GIVE_BACK = Statement(
    update(Callback)
    .where(Callback.id == bindparam("callback_id"), Callback.fence == bindparam("held_fence"))
    .values(status=CallbackStatus.PENDING.value, lease_owner=null(), lease_expires_at=null())
)


class CallbackRepository:
    async def claim(
        self,
        session: Session,
        now: datetime,
        limit: int,
        worker: str,
        lease_until: datetime,
        skip_merchants: Collection[str] = (),
    ) -> list[tuple[Any, ...]]:
        """Claim up to `limit` due callbacks for `worker` until `lease_until`: rows of CLAIMED_COLUMNS, the fence
        already bumped, oldest first."""
        params = {"now": now, "claim_limit": limit, "worker": worker, "lease_until": lease_until}
        skipped = {f"skip_{n}": merchant_id for n, merchant_id in enumerate(sorted(skip_merchants))}
        statement = _claim_skipping(len(skipped)) if skipped else _CLAIM
        rows = await statement.rows(session, **params, **skipped)
        return sorted(rows, key=lambda row: (row[-1], row[0]))

    async def give_back(self, session: Session, held: Iterable[tuple[int, int]]) -> None:
        """Claimed callbacks (id, fence) handed back unsent: pending and due again, for any worker's next claim."""
        for callback_id, fence in held:
            await _GIVE_BACK.execute(session, callback_id=callback_id, held_fence=fence)

    async def add(self, session: Session, **values: Any) -> None:
        """A new callback: every column of `_NEW_COLUMNS`."""
        await _ADD_CALLBACK.execute(session, **values)

    async def add_replay(self, session: Session, **values: Any) -> CallbackRow:
        """A replay (every column of `_REPLAY_COLUMNS`), as written: its id is handed back to whoever asked for it."""
        callback_id = await _ADD_REPLAY.scalar(session, **values)
        return CallbackRow(id=int(callback_id), **values)

    async def add_attempt(self, session: Session, **values: Any) -> None:
        """One attempt as it went: every column of `_ATTEMPT_COLUMNS`."""
        await _ADD_ATTEMPT.execute(session, **values)

    async def record_outcome(self, session: Session, callback_id: int, fence: int, **values: Any) -> bool:
        """The callback's state after an attempt, and its lease let go; False when the fence moved on."""
        return await _RECORD_OUTCOME.execute(session, callback_id=callback_id, held_fence=fence, **values) == 1

    async def get(self, session: Session, callback_id: int) -> CallbackRow | None:
        found = await _CALLBACK.first(session, callback_id=callback_id)
        return None if found is None else CallbackRow(*found)

    async def attempts(self, session: Session, callback_id: int) -> list[CallbackAttemptRow]:
        return [CallbackAttemptRow(*row) for row in await _ATTEMPTS.rows(session, callback_id=callback_id)]

    async def lock_event(self, session: Session, event_key: int) -> CallbackRow | None:
        """The event's first row, locked to the end of the unit (on SQLite the unit holds the write seat)."""
        found = await _EVENT_LOCKED.first(session, event_key=event_key)
        return None if found is None else CallbackRow(*found)

    async def deliveries(self, session: Session, event_key: int) -> list[CallbackRow]:
        """Every delivery of the event (its first row, then its replays), oldest first."""
        return [CallbackRow(*row) for row in await _DELIVERIES.rows(session, event_key=event_key)]

    async def attempts_of(self, session: Session, callback_ids: list[int]) -> list[CallbackAttemptRow]:
        if not callback_ids:
            return []
        statement = ATTEMPT_SELECT.where(CallbackAttempt.callback_id.in_(callback_ids)).order_by(CallbackAttempt.id)
        return [CallbackAttemptRow(*row) for row in await fetch(session, statement)]

    async def given_up(self, session: Session, merchant_id: str, since: datetime) -> list[CallbackRow]:
        """The merchant's events given up, recorded since `since`, oldest first (their first rows)."""
        query = given_up_events(merchant_id, since).order_by(Callback.id)
        return [CallbackRow(*row) for row in await fetch(session, query)]

    async def count_given_up(
        self, session: Session, merchant_id: str | None = None, since: datetime | None = None
    ) -> int:
        return await _count_events(session, given_up_events, merchant_id, since)

    async def count_delivered(
        self, session: Session, merchant_id: str | None = None, since: datetime | None = None
    ) -> int:
        return await _count_events(session, delivered_events, merchant_id, since)

    async def search(
        self,
        session: Session,
        *,
        status: str | None = None,
        merchant_id: str | None = None,
        transaction_ref: str | None = None,
        event_key: int | None = None,
        limit: int = 100,
    ) -> list[CallbackRow]:
        query = CALLBACK_SELECT.order_by(Callback.id.desc()).limit(limit)
        if event_key is not None:
            query = query.where(or_(Callback.id == event_key, Callback.event_id == event_key))
        if status is not None:
            query = query.where(Callback.status == status)
        if merchant_id is not None:
            query = query.where(Callback.merchant_id == merchant_id)
        if transaction_ref is not None:
            query = query.where(Callback.transaction_ref == transaction_ref)
        return [CallbackRow(*row) for row in await fetch(session, query)]

    async def count_by_status(self, session: Session) -> dict[str, int]:
        """Deliveries by status, except `failed`: the events given up (issue 41: a replay that fails
        again is not another callback given up)."""
        counts = {status: int(count) for status, count in await _COUNT_BY_STATUS.rows(session)}
        counts[CallbackStatus.FAILED.value] = await self.count_given_up(session)
        return counts


callback_repository = CallbackRepository()

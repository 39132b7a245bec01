"""Every idempotency-key query. Each keyed request runs two or three of them: compiled once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, delete, select, update

from kasir.db import InsertUnlessTaken, Session, Statement, binds
from kasir.idempotency.models import IdempotencyKey

_CLAIM_COLUMNS = ("merchant_id", "scope", "key", "request_hash", "created_at", "expires_at")
_NAMED = (
    IdempotencyKey.merchant_id == bindparam("merchant_id"),
    IdempotencyKey.scope == bindparam("scope"),
    IdempotencyKey.key == bindparam("key"),
)

# The unique (merchant, scope, key) decides between concurrent first requests: the loser's INSERT
# writes nothing (and on PostgreSQL first waits, at most the time given, for the winner's unit of work to end).
_CLAIM = InsertUnlessTaken(IdempotencyKey, _CLAIM_COLUMNS, index_elements=["merchant_id", "scope", "key"])
_FIND = Statement(
    select(
        IdempotencyKey.request_hash,
        IdempotencyKey.response_status,
        IdempotencyKey.response_headers,
        IdempotencyKey.response_body,
        IdempotencyKey.expires_at,
    ).where(*_NAMED)
)
_ANSWER = Statement(
    update(IdempotencyKey)
    .where(*_NAMED)
    .values(binds(IdempotencyKey, ("response_status", "response_headers", "response_body")))
)
# An expired key not yet purged is a new key: the first request to take it over wins.
_TAKE_OVER = Statement(
    update(IdempotencyKey)
    .where(*_NAMED, IdempotencyKey.expires_at <= bindparam("now", type_=IdempotencyKey.expires_at.type))
    .values(
        **binds(IdempotencyKey, ("request_hash", "created_at", "expires_at")),
        response_status=None,
        response_headers=None,
        response_body=None,
    )
)
# A key whose request could not finish (its processor did not answer): free for the retry.
_RELEASE = Statement(delete(IdempotencyKey).where(*_NAMED, IdempotencyKey.response_status.is_(None)))
_PURGE = Statement(
    delete(IdempotencyKey).where(IdempotencyKey.expires_at <= bindparam("now", type_=IdempotencyKey.expires_at.type))
)


@dataclass(frozen=True, slots=True)
class StoredKey:
    request_hash: str
    response_status: int | None
    response_headers: str | None
    response_body: str | None
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class NewKey:
    """A key as its first request writes it (the answer comes at the end of the same unit of work)."""

    merchant_id: str
    scope: str
    key: str
    request_hash: str
    created_at: datetime
    expires_at: datetime

    def values(self) -> dict[str, object]:
        return {
            "merchant_id": self.merchant_id,
            "scope": self.scope,
            "key": self.key,
            "request_hash": self.request_hash,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
        }


class IdempotencyRepository:
    async def claim(self, session: Session, new: NewKey, *, wait_seconds: float) -> bool:
        """Write the key for this unit of work's request; False when it is taken. LockTimeout when
        another unit writing the same key has not ended within `wait_seconds`."""
        return await _CLAIM.execute(session, wait_seconds, **new.values())

    async def find(self, session: Session, merchant_id: str, scope: str, key: str) -> StoredKey | None:
        row = await _FIND.first(session, merchant_id=merchant_id, scope=scope, key=key)
        return None if row is None else StoredKey(*row)

    async def take_over(self, session: Session, new: NewKey) -> bool:
        """Write the key over an expired one of the same name; False when it is not expired (or gone)."""
        return await _TAKE_OVER.execute(session, now=new.created_at, **new.values()) == 1

    async def answer(
        self, session: Session, merchant_id: str, scope: str, key: str, status: int, headers: str, body: str
    ) -> None:
        await _ANSWER.execute(
            session,
            merchant_id=merchant_id,
            scope=scope,
            key=key,
            response_status=status,
            response_headers=headers,
            response_body=body,
        )

    async def release(self, session: Session, merchant_id: str, scope: str, key: str) -> None:
        await _RELEASE.execute(session, merchant_id=merchant_id, scope=scope, key=key)

    async def purge(self, session: Session, now: datetime) -> int:
        return await _PURGE.execute(session, now=now)


idempotency_repository = IdempotencyRepository()

"""Every rate-limit counter query: add to a window's count, read it, purge ended windows."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import bindparam, delete, select

from kasir.db import Session, Statement, binds
from kasir.ratelimit.models import RateLimitCounter

# Concurrent adds from several processes meet in the row: the database adds, nobody reads first.
_ADD = Statement(
    lambda insert: (
        (stmt := insert(RateLimitCounter).values(binds(RateLimitCounter)))
        .on_conflict_do_update(
            index_elements=["key", "window_start"], set_={"hits": RateLimitCounter.hits + stmt.excluded.hits}
        )
        .returning(RateLimitCounter.hits)
    )
)
_GET = Statement(
    select(RateLimitCounter.hits).where(
        RateLimitCounter.key == bindparam("key"), RateLimitCounter.window_start == bindparam("window_start")
    )
)
_PURGE = Statement(delete(RateLimitCounter).where(RateLimitCounter.expires_at < bindparam("now")))


class RateLimitRepository:
    async def add(self, session: Session, key: str, window_start: int, hits: int, expires_at: datetime) -> int:
        """The window's count after adding `hits` (every process's hits)."""
        total = await _ADD.scalar(session, key=key, window_start=window_start, hits=hits, expires_at=expires_at)
        return int(total)

    async def get(self, session: Session, key: str, window_start: int) -> int:
        total = await _GET.scalar(session, key=key, window_start=window_start)
        return int(total or 0)

    async def purge(self, session: Session, now: datetime) -> int:
        return await _PURGE.execute(session, now=now)


rate_limit_repository = RateLimitRepository()

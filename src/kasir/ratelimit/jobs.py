"""The rate limits' scheduled work, run by the worker (listed in kasir.jobs)."""

from __future__ import annotations

from datetime import timedelta

from kasir.db import Database
from kasir.kit.clock import clock
from kasir.ratelimit.repository import rate_limit_repository

PURGE_EVERY = timedelta(minutes=1)
_purged_at: dict[int, float] = {}


async def purge_expired_counters(database: Database) -> int:
    """Delete the counters of ended windows, at most once a minute per database."""
    if not database.keeps_counters:
        return 0
    now = clock.now()
    last = _purged_at.get(id(database))
    if last is not None and 0 <= now.timestamp() - last < PURGE_EVERY.total_seconds():
        return 0  # (a clock moved back, as in the tests, purges again)
    async with database.unit_of_work() as session:
        purged = await rate_limit_repository.purge(session, now)
    _purged_at[id(database)] = now.timestamp()
    return purged


JOBS = (purge_expired_counters,)

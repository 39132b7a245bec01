"""The idempotency keys' scheduled work, run by the worker (listed in kasir.jobs)."""

from __future__ import annotations

from datetime import datetime, timedelta

from kasir.db import Database
from kasir.idempotency.repository import idempotency_repository
from kasir.kit.clock import clock

_purged_at: dict[int, datetime] = {}
PURGE_EVERY = timedelta(minutes=1)


async def purge_expired_keys(database: Database) -> int:
    """Delete the keys past their 24 hours, at most once a minute per database."""
    now = clock.now()
    last = _purged_at.get(id(database))
    # A last purge "in the future" (the clock was set back since) does not hold the next one off.
    if last is not None and timedelta(0) <= now - last < PURGE_EVERY:
        return 0
    async with database.unit_of_work() as session:
        purged = await idempotency_repository.purge(session, now)
    _purged_at[id(database)] = now
    return purged


JOBS = (purge_expired_keys,)

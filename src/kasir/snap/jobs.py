"""The SNAP edge's scheduled work, run by the worker (listed in kasir.jobs)."""

from __future__ import annotations

from datetime import date, timedelta
from weakref import WeakKeyDictionary

from kasir.db import Database
from kasir.kit.clock import clock
from kasir.snap.repository import snap_repository

# Per Database object, held weakly: keyed by id(), a new database (each test's) could inherit a dead
# one's date and skip its purge.
_purged_on: WeakKeyDictionary[Database, date] = WeakKeyDictionary()


async def forget_past_external_ids(database: Database) -> int:
    """X-EXTERNAL-ID is unique per day: ids older than yesterday are no longer needed (once a day)."""
    today = clock.local_now().date()
    if _purged_on.get(database) == today:
        return 0
    async with database.unit_of_work() as session:
        await snap_repository.forget_external_ids_before(session, today - timedelta(days=1))
    _purged_on[database] = today
    return 1


JOBS = (forget_past_external_ids,)

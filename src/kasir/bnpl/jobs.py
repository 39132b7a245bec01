"""BNPL's scheduled work, run by the worker (listed in kasir.jobs)."""

from __future__ import annotations

from datetime import date, timedelta
from weakref import WeakKeyDictionary

from kasir.bnpl.repository import bnpl_repository
from kasir.bnpl.service import bnpl_service
from kasir.db import Database, each_in_own_unit_of_work
from kasir.kit.clock import clock

# Per Database object, held weakly: keyed by id(), a new database (each test's) could inherit a dead
# one's date and skip its purge.
_purged_on: WeakKeyDictionary[Database, date] = WeakKeyDictionary()


async def expire_due_bnpl_transactions(database: Database) -> int:
    """Move every Initiated transaction past its validityPeriod to 05 Expired; each in its own unit of work."""
    async with database.unit_of_work(read_only=True) as session:
        due = await bnpl_repository.due_for_expiry(session, clock.now())
    today = clock.local_now().date()
    if _purged_on.get(database) != today:
        # X-EXTERNAL-ID is unique per day: ids older than yesterday are no longer needed (once a day).
        async with database.unit_of_work() as session:
            await bnpl_repository.forget_external_ids_before(session, today - timedelta(days=1))
        _purged_on[database] = today
    return await each_in_own_unit_of_work(database, due, bnpl_service.expire, what="bnpl expiry")


JOBS = (expire_due_bnpl_transactions,)

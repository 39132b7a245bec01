"""BNPL's scheduled work, run by the worker (listed in kasir.jobs)."""

from __future__ import annotations

from kasir.bnpl.repository import bnpl_repository
from kasir.bnpl.service import bnpl_service
from kasir.db import Database, each_in_own_unit_of_work
from kasir.kit.clock import clock


async def expire_due_bnpl_transactions(database: Database) -> int:
    """Move every Initiated transaction past its validityPeriod to 05 Expired; each in its own unit of work."""
    async with database.unit_of_work(read_only=True) as session:
        due = await bnpl_repository.due_for_expiry(session, clock.now())
    return await each_in_own_unit_of_work(database, due, bnpl_service.expire, what="bnpl expiry")


JOBS = (expire_due_bnpl_transactions,)

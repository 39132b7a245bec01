"""The VAs' scheduled work, run by the worker (listed in kasir.jobs)."""

from __future__ import annotations

from kasir.db import Database, each_in_own_unit_of_work
from kasir.kit.clock import clock
from kasir.va.repository import va_repository
from kasir.va.service import va_service


async def expire_due_virtual_accounts(database: Database) -> int:
    """Move every open VA past its expired_time to EXPIRED (one callback each); each in its own unit of work."""
    async with database.unit_of_work(read_only=True) as session:
        due = await va_repository.due_for_expiry(session, clock.now())
    return await each_in_own_unit_of_work(database, due, va_service.expire, what="va expiry")


JOBS = (expire_due_virtual_accounts,)

"""The wallet's scheduled work, run by the worker (listed in kasir.jobs)."""

from __future__ import annotations

from kasir.db import Database, each_in_own_unit_of_work
from kasir.kit.clock import clock
from kasir.wallet.repository import wallet_repository
from kasir.wallet.service import wallet_service


async def expire_due_wallet_transactions(database: Database) -> int:
    """Move every PENDING transaction past its expired_time to EXPIRED; each in its own unit of work."""
    async with database.unit_of_work(read_only=True) as session:
        due = await wallet_repository.due_for_expiry(session, clock.now())
    return await each_in_own_unit_of_work(database, due, wallet_service.expire, what="wallet expiry")


JOBS = (expire_due_wallet_transactions,)

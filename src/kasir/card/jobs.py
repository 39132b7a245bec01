"""The card room's scheduled work, run by the worker (listed in kasir.jobs)."""

from __future__ import annotations

from kasir.card.repository import card_repository
from kasir.card.service import card_service
from kasir.db import Database, each_in_own_unit_of_work
from kasir.kit.clock import clock


async def expire_due_card_orders(database: Database) -> int:
    """Close every open order past its expiredTime (EXPIRED callback); each in its own unit of work."""
    async with database.unit_of_work(read_only=True) as session:
        due = await card_repository.due_for_expiry(session, clock.now())
    return await each_in_own_unit_of_work(database, due, card_service.expire, what="card expiry")


JOBS = (expire_due_card_orders,)

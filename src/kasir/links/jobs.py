"""The payment links' scheduled work, run by the worker (listed in kasir.jobs)."""

from __future__ import annotations

from kasir.db import Database, Session, each_in_own_unit_of_work
from kasir.kit.clock import clock
from kasir.links.attempts import EXPIRED_BY_TIME, card_in_flight, end
from kasir.links.repository import link_repository
from kasir.links.service import link_service
from kasir.links.states import is_open


async def expire(session: Session, link_id: str) -> bool:
    """A PENDING link past its expired_time → EXPIRED (its callback; its open attempts closed). False when it
    changed meanwhile."""
    link = await link_service.get(session, link_id, lock=True)
    if not is_open(link) or link.expires_at > clock.now():
        return False
    if await card_in_flight(session, link.id):
        return False  # a card attempt is with the acquirer: expired once its decision is recorded
    await end(session, link, EXPIRED_BY_TIME)
    return True


async def expire_due_links(database: Database) -> int:
    """Every PENDING link past its expired_time, each in its own unit of work."""
    async with database.unit_of_work(read_only=True) as session:
        due = await link_repository.due_for_expiry(session, clock.now())
    return await each_in_own_unit_of_work(database, due, expire, what="link expiry")


JOBS = (expire_due_links,)

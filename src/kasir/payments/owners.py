"""The payment-owner seam: how the card, wallet and VA rooms tell the payment link (kasir.links) what
became of a payment it owns, without importing it (the link builds on them; docs/contributor/architecture.md).

A row of those rooms may carry an owner (`link_id`). When such a row is paid, fails an attempt, or ends
unpaid, its room calls `settled` in the same unit of work *instead of* recording its own callback; the
owner decides what that means (the link's state, its payment-page callback, closing its other attempts)
and may refuse money that comes too late (a `KasirError`: the room's unit rolls back).

Lock order: before a room locks an owned row it locks the owner (`lock_owner_first`), so two payments of
one link, each under its own row's lock, never wait for each other's row while holding the link (no
deadlock on PostgreSQL; on SQLite one unit writes at a time anyway).

The owner registers at start-up (kasir.products.declare_products), as the products' Offers do.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from sqlalchemy import bindparam, select

from kasir.db import Session, Statement


class InnerEvent(StrEnum):
    PAID = "PAID"  # the money arrived
    FAILED = "FAILED"  # an attempt failed (a card order stays open for the next attempt; OVO's `failed` ends it)
    CLOSED = "CLOSED"  # ended unpaid (expired, cancelled): nothing to tell the merchant


@dataclass(frozen=True, slots=True)
class InnerOutcome:
    owner_id: str  # the owning link's id (the row's `link_id`)
    inner_id: str  # the card order's, wallet transaction's or VA's id
    event: InnerEvent
    reason: str = ""  # FAILED: why (the acquirer's message, OVO's failure_reason)
    ended: bool = True  # FAILED: the inner payment takes no more attempts
    acq: str | None = None  # card: the acquirer that processed the attempt (BCA, CIMB, BRI)
    card_token: str | None = None  # card, PAID: the saved card's token


class PaymentOwner(Protocol):
    async def hold(self, session: Session, owner_id: str) -> None:
        """Lock the owner's row until the unit ends."""

    async def settled(self, session: Session, outcome: InnerOutcome) -> None:
        """Apply what became of an owned payment, in the unit that changed it."""


_owner: PaymentOwner | None = None
_OWNER_OF: dict[Any, Statement] = {}


def register(owner: PaymentOwner) -> None:
    global _owner  # noqa: PLW0603  (one owner per process, set at start-up)
    _owner = owner


def _registered() -> PaymentOwner:
    if _owner is None:  # pragma: no cover - every entry point declares the products first
        raise RuntimeError("no payment owner registered: call kasir.products.declare_products() at start-up")
    return _owner


async def settled(session: Session, outcome: InnerOutcome) -> None:
    await _registered().settled(session, outcome)


async def lock_owner_first(session: Session, model: Any, row_id: str) -> None:
    """Before `model`'s row `row_id` is locked: lock its owner, if it has one (one unlocked read of its link_id)."""
    statement = _OWNER_OF.get(model)
    if statement is None:
        statement = _OWNER_OF[model] = Statement(select(model.link_id).where(model.id == bindparam("row_id")))
    owner_id = await statement.scalar(session, row_id=row_id)
    if owner_id is not None:
        await _registered().hold(session, owner_id)

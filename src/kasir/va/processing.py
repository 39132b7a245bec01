"""What the VA room offers the processors (kasir.processors.offers): its channels, and how it applies an
issuer's notification of a payment (docs/decisions.md §9.8): as a dummy payment is, once per bank reference.

    paid   one payment of `amount` into the VA (`bank_reference`: a repeated notification changes nothing)
"""

from __future__ import annotations

from kasir.db import Session
from kasir.processors.offers import Offer
from kasir.processors.protocols import Event, Notification
from kasir.processors.service import UnsupportedEvent, check_served
from kasir.va.banks import BANKS
from kasir.va.service import va_service


async def apply_va_notification(session: Session, notification: Notification, *, by: str, strict: bool) -> str:
    """A payment into the notification's VA; the VA's status after it."""
    if notification.event is not Event.PAID:
        raise UnsupportedEvent(notification)
    va = await va_service.get(session, notification.reference, lock=True)
    check_served(by, "va", va.bank)
    await va_service.pay(session, va, notification.amount, bank_reference=notification.bank_reference)
    return va.status


def _channels() -> tuple[str, ...]:
    return tuple(BANKS)  # KASIR_PROCESSORS names an issuer per bank (va.BCA=NAME); aliases go with theirs


va_offer = Offer("va", channels=_channels, apply=apply_va_notification)

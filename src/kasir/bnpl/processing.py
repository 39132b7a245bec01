"""What the BNPL room offers the processors (kasir.processors.offers): its one channel and how it
applies a lender's notification. It asks the lender nothing outside a page, so it has no processor call.

    approved  00 with the tenure
    rejected  06
"""

from __future__ import annotations

from kasir.bnpl.service import PAYMENT_CHANNEL, bnpl_service
from kasir.db import Session
from kasir.errors import InvalidMandatoryField
from kasir.processors.offers import Offer
from kasir.processors.protocols import Event, Notification
from kasir.processors.service import UnsupportedEvent, check_served

_STATES = {Event.APPROVED: "00", Event.REJECTED: "06"}


async def apply_bnpl_notification(session: Session, notification: Notification, *, by: str, strict: bool) -> str:
    """The lender's decision on the notification's application; the transaction's status after it."""
    state = _STATES.get(notification.event)
    if state is None:
        raise UnsupportedEvent(notification)
    tx = await bnpl_service.get(session, notification.reference)
    check_served(by, "bnpl", None)
    if tx.status == state and not strict:
        return tx.status  # applied before
    if notification.event is Event.APPROVED:
        if notification.tenure is None:
            raise InvalidMandatoryField("tenure")
        tx = await bnpl_service.approve(session, notification.reference, notification.tenure)
    else:
        tx = await bnpl_service.reject(session, notification.reference)
    return tx.status


def _channels() -> tuple[str, ...]:
    return (PAYMENT_CHANNEL,)


bnpl_offer = Offer("bnpl", channels=_channels, apply=apply_bnpl_notification)

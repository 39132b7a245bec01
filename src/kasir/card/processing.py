"""What the card room offers the processors (kasir.processors.offers): its channels, how it applies an
acquirer's notification, and its one processor call, the charge (kasir.card.service.CardChargeAction).

    paid     the attempt's challenge passed: SUCCESS
    failed   the challenge failed: a failed attempt (the order EXPIRED after the last one)
"""

from __future__ import annotations

from kasir.card.cards import card_channels
from kasir.card.repository import card_repository
from kasir.card.service import CARD_CHARGE, CardChargeAction, card_service
from kasir.card.states import CardAttemptStatus
from kasir.db import Session
from kasir.errors import InvalidMandatoryField
from kasir.processors.offers import Offer
from kasir.processors.protocols import CardDecision, CardResult, Event, Notification
from kasir.processors.service import UnsupportedEvent, check_served

_RESULTS = {Event.PAID: CardResult.APPROVED, Event.FAILED: CardResult.DECLINED}


async def apply_card_notification(session: Session, notification: Notification, *, by: str, strict: bool) -> str:
    """The challenge of the notification's attempt ended; the order's status after it."""
    result = _RESULTS.get(notification.event)
    if result is None:
        raise UnsupportedEvent(notification)
    if notification.attempt is None:
        raise InvalidMandatoryField("attempt")
    order, waiting = await card_service.challenge(session, notification.reference)
    check_served(by, "card", order.payment_channel)
    if not strict and (waiting is None or waiting.number != notification.attempt):
        done = await card_repository.attempt(session, order.id, notification.attempt)
        wanted = CardAttemptStatus.SUCCESS if result is CardResult.APPROVED else CardAttemptStatus.FAILED
        if done is not None and done.status == wanted.value:
            return order.status  # applied before
    message = notification.message or ("Approved" if result is CardResult.APPROVED else "Card declined by the issuer")
    order = await card_service.finish_challenge(
        session, notification.reference, notification.attempt, CardDecision(result, message)
    )
    return order.status


def _channels() -> tuple[str, ...]:
    return tuple(card_channels())


card_offer = Offer("card", channels=_channels, apply=apply_card_notification, actions={CARD_CHARGE: CardChargeAction()})

"""What the card room offers the processors (kasir.processors.offers): its channels, how it applies an
acquirer's notification, and its one processor call, an attempt's charge (`CardChargeAction`).

The charge is held, asked and recorded in the three steps of kasir.processors.calls: the card
service holds the attempt (SUBMITTED) in the request's unit of work, the action asks the acquirer
with no unit open, then records its decision and answers the request in a unit of its own.

Notifications (a challenge ended at the acquirer):

    paid     the attempt's challenge passed: SUCCESS
    failed   the challenge failed: a failed attempt (the order EXPIRED after the last one)
"""

from __future__ import annotations

from fastapi.responses import JSONResponse, Response

from kasir.card.attempts import CARD_CHARGE
from kasir.card.cards import card_channels
from kasir.card.dialect import DIALECT_ANSWER, DIRECT_3DS_REFUSED, dialect_body, refuses_challenge
from kasir.card.repository import CardAttemptRow, CardOrderRow, card_repository
from kasir.card.service import ChargeOutcome, card_service, charge_body
from kasir.card.states import CardAttemptStatus, CardOrderStatus
from kasir.db import Session
from kasir.errors import InvalidMandatoryField, KasirError
from kasir.processors.calls import Call, recorded_card
from kasir.processors.offers import Offer
from kasir.processors.protocols import CardDecision, CardResult, Event, Notification
from kasir.processors.registry import card_acquirer
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


class CardChargeAction:
    """An attempt's charge at the acquirer, asked outside any unit of work (kasir.processors.calls)."""

    async def ask(self, call: Call) -> CardDecision:
        assert call.card is not None
        return await card_acquirer(call.details["channel"]).charge(call.card)

    async def lock(self, session: Session, call: Call) -> None:
        await card_service.get(session, call.reference, lock=True)

    async def ask_again(self, call: Call) -> CardDecision:
        token = recorded_card.set(call.details.get("masked"))
        try:
            return await card_acquirer(call.details["channel"]).status(call.reference, call.details["attempt"])
        finally:
            recorded_card.reset(token)

    async def record(
        self, session: Session, call: Call, answer: CardDecision, *, fresh: bool
    ) -> tuple[CardOrderRow, CardAttemptRow, CardDecision | None]:
        order, attempt, _recorded = await card_service.record_attempt(
            session, call.reference, call.details["attempt"], answer if fresh else None
        )
        if fresh and refuses_challenge(call.details) and order.status == CardOrderStatus.AUTHENTICATING.value:
            # A direct charge of the provider SDK's dialect: no one will pass the challenge, the attempt fails.
            refused = CardDecision(CardResult.DECLINED, DIRECT_3DS_REFUSED)
            order = await card_service.finish_challenge(session, order.id, attempt.number, refused)
            # As finished: the dialect's answer says why the attempt failed.
            finished = await card_repository.attempt(session, order.id, attempt.number)
            assert finished is not None
            attempt = finished
        # The acquirer's decision, recorded now or by another unit (asked again, it answers the same):
        # the dialect's answer needs its decline reason, which is not stored.
        return order, attempt, answer

    async def undo(self, session: Session, call: Call, error: KasirError) -> None:
        await card_service.undo_attempt(
            session, call.reference, call.details["attempt"], new_order=call.details["new_order"]
        )

    async def respond(
        self, session: Session, call: Call, recorded: tuple[CardOrderRow, CardAttemptRow, CardDecision | None]
    ) -> Response:
        order, attempt, decision = recorded
        outcome = ChargeOutcome.of(order, attempt.challenge_url)
        if DIALECT_ANSWER in call.details:  # the provider SDK's dialect (kasir.card.dialect)
            reason = decision.reason if decision is not None else None
            return JSONResponse(dialect_body(call.details[DIALECT_ANSWER], order, attempt, outcome.link, reason))
        return JSONResponse(charge_body(outcome))


def _channels() -> tuple[str, ...]:
    return tuple(card_channels())


card_offer = Offer("card", channels=_channels, apply=apply_card_notification, actions={CARD_CHARGE: CardChargeAction()})

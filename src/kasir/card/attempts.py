"""What an attempt's decision does to a card order: the order's transitions, in one place.

    hold_attempt      a new attempt SUBMITTED, held in the request's unit of work for the acquirer
                      (the call CARD_CHARGE, asked once that unit commits: kasir.processors.calls)
    record_decision   the acquirer's decision on it: SUCCESS, a challenge (3-D Secure: the order
                      AUTHENTICATING, the attempt CHALLENGE), or a failed attempt
    end_challenge     the challenge's result: SUCCESS, or a failed attempt
    expire_order      expiredTime passed: EXPIRED, a waiting challenge failed with it

The third failed attempt closes the order (EXPIRED). Every change is saved with its
payment-page callback (kasir.card.callbacks) in the same unit of work, and an outcome (SUCCESS,
EXPIRED) is counted in the payment metrics once the unit commits. The card service finds,
locks and refuses; these functions take the locked rows it found and apply the rules.
"""

from __future__ import annotations

import logging
from datetime import datetime

from kasir.card.callbacks import record_callback
from kasir.card.cards import ParsedCard, acquirer_for
from kasir.card.page_links import challenge_return_url
from kasir.card.repository import CardAttemptRow, CardOrderRow, card_repository
from kasir.card.states import MAX_FAILED_ATTEMPTS, CardAttemptStatus, CardOrderClosed, CardOrderStatus, transition
from kasir.db import Session
from kasir.kit.clock import clock
from kasir.kit.ids import new_id
from kasir.payments import metrics as payment_metrics
from kasir.processors.calls import Call, PendingCall
from kasir.processors.protocols import CardCharge, CardDecision, CardResult
from kasir.processors.registry import card_acquirer

log = logging.getLogger("kasir.card")

EXPIRED_BY_TIME = "Payment link expired"
EXPIRED_BY_ATTEMPTS = f"Payment failed {MAX_FAILED_ATTEMPTS} times; the payment link is closed"
APPROVED = "Approved"
CHALLENGE_REQUIRED = "3-D Secure authentication required"
# The processor call an attempt is held for; card/processing.py declares its action under this name.
CARD_CHARGE = "card.charge"


def refuse_unless_open(order: CardOrderRow, now: datetime, expected: CardOrderStatus) -> None:
    if order.status != expected.value:
        raise CardOrderClosed(f"The payment is {order.status.lower()}")
    if order.expires_at <= now:
        raise CardOrderClosed("The payment link has expired")


async def hold_attempt(
    session: Session, order: CardOrderRow, card: ParsedCard, tenor: str, *, save_card: bool, new_order: bool
) -> PendingCall:
    """The attempt, SUBMITTED: the acquirer is asked once this unit of work has committed."""
    now = clock.now()
    refuse_unless_open(order, now, CardOrderStatus.PENDING)
    card_acquirer(order.payment_channel)  # switched off: refused before anything is written
    order.attempts_made += 1
    acq = acquirer_for(order.payment_channel, card.brand)
    order.acq, order.tenor, order.save_card = acq, tenor, save_card
    order.updated_at = now
    await card_repository.save(session, order)
    attempt = {
        "card_order_id": order.id,
        "number": order.attempts_made,
        "status": CardAttemptStatus.SUBMITTED.value,
        "masked_card": card.masked,
        "card_brand": card.brand,
        "card_exp_month": card.exp_month,
        "card_exp_year": card.exp_year,
        "tenor": tenor,
        "acq": acq,
        "response_message": "",
        "challenge_url": None,
        "created_at": now,
        "completed_at": None,
        "card_holder_name": card.holder_name,
        "decline_reason": None,
    }
    await card_repository.add_attempt(session, attempt)
    charge = CardCharge(
        reference=order.id,
        attempt=order.attempts_made,
        amount=order.amount,
        currency=order.currency,
        channel=order.payment_channel,
        acquirer_code=acq,
        tenor=tenor,
        card=card,
        return_url=challenge_return_url(order.id, order.attempts_made),
    )
    details = {
        "attempt": order.attempts_made,
        "channel": order.payment_channel,
        "new_order": new_order,
        "masked": card.masked,  # not card data: the attempt keeps it too
    }
    return PendingCall(Call(CARD_CHARGE, "card", order.id, details, card=charge))


async def record_decision(
    session: Session, order: CardOrderRow, attempt: CardAttemptRow, decision: CardDecision
) -> None:
    """The acquirer's decision on the SUBMITTED `attempt` of the locked `order`."""
    now = clock.now()
    attempt.response_message, attempt.completed_at = decision.message, now
    if decision.result is CardResult.APPROVED:
        attempt.status = CardAttemptStatus.SUCCESS.value
        await card_repository.save_attempt(session, attempt)
        await _succeed(session, order, now)
    elif decision.result is CardResult.CHALLENGE:
        attempt.status, attempt.completed_at = CardAttemptStatus.CHALLENGE.value, None
        attempt.challenge_url = decision.redirect_url
        await card_repository.save_attempt(session, attempt)
        transition(order, CardOrderStatus.AUTHENTICATING)
        order.response_message = CHALLENGE_REQUIRED
        order.updated_at = now
        await card_repository.save(session, order)
    else:
        attempt.status = CardAttemptStatus.FAILED.value
        attempt.decline_reason = decision.reason.value if decision.reason is not None else None
        await card_repository.save_attempt(session, attempt)
        await _fail(session, order, decision.message, now)
    log.info(
        "card attempt",
        extra={"transaction_id": order.id, "attempt": attempt.number, "status": attempt.status},
    )


async def end_challenge(
    session: Session, order: CardOrderRow, attempt: CardAttemptRow, decision: CardDecision, now: datetime
) -> None:
    """The finished challenge of `attempt` (its decision APPROVED or not): SUCCESS, or a failed attempt."""
    attempt.completed_at = now
    if decision.result is CardResult.APPROVED:
        attempt.status = CardAttemptStatus.SUCCESS.value
        attempt.response_message = APPROVED
        await card_repository.save_attempt(session, attempt)
        await _succeed(session, order, now)
    else:
        attempt.status = CardAttemptStatus.FAILED.value
        attempt.response_message = decision.message
        attempt.decline_reason = decision.reason.value if decision.reason is not None else None
        await card_repository.save_attempt(session, attempt)
        await _fail(session, order, decision.message, now)


async def expire_order(session: Session, order: CardOrderRow, now: datetime) -> None:
    """The open `order` past its expiredTime, no attempt at the acquirer: EXPIRED."""
    if order.status == CardOrderStatus.AUTHENTICATING.value:
        challenge = await card_repository.attempt(session, order.id, order.attempts_made)
        if challenge is not None and challenge.status == CardAttemptStatus.CHALLENGE.value:
            challenge.status, challenge.completed_at = CardAttemptStatus.FAILED.value, now
            challenge.response_message = EXPIRED_BY_TIME
            await card_repository.save_attempt(session, challenge)
    _settle(session, order, CardOrderStatus.EXPIRED)
    order.response_message = EXPIRED_BY_TIME
    await _changed(session, order, "EXPIRED", now)


async def _succeed(session: Session, order: CardOrderRow, now: datetime) -> None:
    _settle(session, order, CardOrderStatus.SUCCESS)
    order.paid_at = now
    order.response_message = APPROVED
    if order.save_card:
        order.card_token = new_id("CTK", 32)  # opaque: derived from nothing about the card
        attempt = await card_repository.attempt(session, order.id, order.attempts_made)
        if attempt is not None:  # the card a later charge may name by the token (kasir.card.dialect)
            await card_repository.store_card(session, order, attempt, now)
    await _changed(session, order, "SUCCESS", now)


async def _fail(session: Session, order: CardOrderRow, message: str, now: datetime) -> None:
    order.attempts_failed += 1
    order.response_message = message
    final = order.attempts_failed >= MAX_FAILED_ATTEMPTS
    if order.status == CardOrderStatus.AUTHENTICATING.value and not final:
        transition(order, CardOrderStatus.PENDING)
    await _changed(session, order, "FAILED", now)
    if final:
        _settle(session, order, CardOrderStatus.EXPIRED)
        order.response_message = EXPIRED_BY_ATTEMPTS
        await _changed(session, order, "EXPIRED", now)


def _settle(session: Session, order: CardOrderRow, to: CardOrderStatus) -> None:
    """A transition to an outcome (SUCCESS, EXPIRED), counted in the payment metrics once the unit
    commits; `_changed` saves it."""
    transition(order, to)
    payment_metrics.settled_in(session, "card", to.name)


async def _changed(session: Session, order: CardOrderRow, event: str, now: datetime) -> None:
    """Save the order's change and record its payment-page callback (sent after commit)."""
    order.updated_at = now
    await card_repository.save(session, order)
    await record_callback(session, order, event)

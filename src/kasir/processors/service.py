"""A processor's notification, applied by the product service in one unit of work (with its callback).

Every processor reaches the products through `apply`: the notify route for a processor's
signed notifications, the simulator's pages and dummy payment for theirs. Applying the same
notification again changes nothing (processors retry their notifications): a transaction
already where the notification says answers as applied; one that went elsewhere is refused
(409 in the route's format, `TransactionStateRefused` and friends). A processor's notification
applies only to a payment of a channel it serves (`NotYourPayment`, 404 as for an unknown
reference: with one processor per channel, an OVO issuer cannot mark a DANA payment paid).

    paid      card: the attempt's challenge passed (SUCCESS); wallet: PAID
    failed    card: the challenge failed (a failed attempt); wallet: failed (OVO)
    expired   wallet: EXPIRED now
    approved  bnpl: 00 with the tenure
    rejected  bnpl: 06
"""

from __future__ import annotations

from kasir.db import Session
from kasir.errors import InvalidFieldFormat, InvalidMandatoryField, NotFound
from kasir.processors.protocols import CardDecision, CardResult, Event, Notification, Product
from kasir.processors.registry import serves

_CARD_RESULTS = {Event.PAID: CardResult.APPROVED, Event.FAILED: CardResult.DECLINED}
_WALLET_STATES = {Event.PAID: "PAID", Event.FAILED: "failed", Event.EXPIRED: "EXPIRED"}
_BNPL_STATES = {Event.APPROVED: "00", Event.REJECTED: "06"}


class UnsupportedEvent(InvalidFieldFormat):
    def __init__(self, notification: Notification) -> None:
        super().__init__("event", f"{notification.event} is not an event of {notification.product}")


class NotYourPayment(NotFound):
    def __init__(self) -> None:
        super().__init__("Not Found: no payment of this processor has that reference", field="reference")


def _check_served(by: str, product: Product, channel: str | None) -> None:
    if not serves(by, product, channel):
        raise NotYourPayment()


async def apply(session: Session, notification: Notification, *, by: str, strict: bool = False) -> str:
    """Apply `notification` from the processor named `by`; the transaction's state after it. `strict`: a
    notification applied before is refused like any other move its state does not allow (the simulator's
    forms, sent twice)."""
    if notification.product == "card":
        return await _card(session, notification, by, strict)
    if notification.product == "wallet":
        return await _wallet(session, notification, by, strict)
    return await _bnpl(session, notification, by, strict)


async def _card(session: Session, notification: Notification, by: str, strict: bool) -> str:
    from kasir.card.service import card_service
    from kasir.card.states import CardAttemptStatus

    result = _CARD_RESULTS.get(notification.event)
    if result is None:
        raise UnsupportedEvent(notification)
    if notification.attempt is None:
        raise InvalidMandatoryField("attempt")
    order, waiting = await card_service.challenge(session, notification.reference)
    _check_served(by, "card", order.payment_channel)
    if not strict and (waiting is None or waiting.number != notification.attempt):
        from kasir.card.repository import card_repository

        done = await card_repository.attempt(session, order.id, notification.attempt)
        wanted = CardAttemptStatus.SUCCESS if result is CardResult.APPROVED else CardAttemptStatus.FAILED
        if done is not None and done.status == wanted.value:
            return order.status  # applied before
    message = notification.message or ("Approved" if result is CardResult.APPROVED else "Card declined by the issuer")
    order = await card_service.finish_challenge(
        session, notification.reference, notification.attempt, CardDecision(result, message)
    )
    return order.status


async def _wallet(session: Session, notification: Notification, by: str, strict: bool) -> str:
    from kasir.wallet.service import wallet_service

    state = _WALLET_STATES.get(notification.event)
    if state is None:
        raise UnsupportedEvent(notification)
    tx = await wallet_service.get(session, notification.reference, lock=True)
    _check_served(by, "wallet", tx.payment_channel)
    paid_before = notification.event is Event.PAID and tx.paid_at is not None  # since refunded or voided
    if (tx.status == state or paid_before) and not strict:
        return tx.status  # applied before
    if notification.event is Event.PAID:
        await wallet_service.pay(session, tx, issuer=notification.issuer)
    elif notification.event is Event.FAILED:
        await wallet_service.fail(session, tx, notification.message)
    else:
        await wallet_service.expire_now(session, tx)
    return tx.status


async def _bnpl(session: Session, notification: Notification, by: str, strict: bool) -> str:
    from kasir.bnpl.service import bnpl_service

    state = _BNPL_STATES.get(notification.event)
    if state is None:
        raise UnsupportedEvent(notification)
    tx = await bnpl_service.get(session, notification.reference)
    _check_served(by, "bnpl", None)
    if tx.status == state and not strict:
        return tx.status  # applied before
    if notification.event is Event.APPROVED:
        if notification.tenure is None:
            raise InvalidMandatoryField("tenure")
        tx = await bnpl_service.approve(session, notification.reference, notification.tenure)
    else:
        tx = await bnpl_service.reject(session, notification.reference)
    return tx.status

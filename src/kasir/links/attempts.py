"""What the link's inner payments do to it (docs/decisions.md §10.4, §10.5): the payment owner
(kasir.payments.owners) the card, wallet and VA rooms tell, in the unit of work that changed their row.

    PAID     the link SUCCESS (callback SUCCESS), every other open attempt closed silently; money that
             arrives once the link has ended is refused (`03`: the payer's unit rolls back)
    FAILED   one failed attempt (callback FAILED); the third, all methods counted, EXPIRED as well
    CLOSED   the inner payment ended unpaid (a wallet transaction's 15 minutes, the card order's expiry,
             a VA cancelled by the link): the attempt closes, the merchant hears nothing

and the link's own expiry (the worker): EXPIRED, callback EXPIRED, every open attempt closed.

While a card attempt of the link is with the acquirer (a `processor_call` in flight), its decision may still
pay the link: another method's outcome is refused meanwhile (`LinkBusy`, `03`: the bank and the issuer retry
their notifications) and the expiry waits for it, as the card room's own expiry does. So a card approved at
the acquirer never meets a link that has ended.
"""

from __future__ import annotations

import logging

from kasir.callbacks.models import CallbackKind
from kasir.callbacks.service import SignedIds, callback_outbox
from kasir.card.attempts import expire_order
from kasir.card.service import card_service
from kasir.card.states import CardOrderStatus
from kasir.db import Session
from kasir.kit.clock import clock
from kasir.links.repository import AttemptRow, LinkRow, link_repository
from kasir.links.service import METHOD_CARD, METHOD_VA, METHOD_WALLET, callback_payload, link_service
from kasir.links.states import (
    MAX_FAILED_ATTEMPTS,
    AttemptStatus,
    LinkStateRefused,
    LinkStatus,
    attempt_transition,
    is_open,
    transition,
)
from kasir.payments import metrics as payment_metrics
from kasir.payments.owners import InnerEvent, InnerOutcome
from kasir.processors.repository import processor_call_repository
from kasir.va.service import va_service
from kasir.va.states import is_open as va_is_open
from kasir.wallet.service import wallet_service
from kasir.wallet.states import WalletStatus

log = logging.getLogger("kasir.links")

SUCCESS_MESSAGE = "Success"
EXPIRED_BY_TIME = "Payment expired"
EXPIRED_BY_ATTEMPTS = "Too many failed attempts"
DEFAULT_FAILURE = "Payment failed"


class LinkEnded(LinkStateRefused):
    """Money for a link that has ended (paid another way, or expired): refused, nothing changes."""


class LinkBusy(LinkStateRefused):
    """A card attempt of the link is with the acquirer: another method's outcome waits until it is decided
    (`03`; the bank and the issuer retry their notifications, the customer their button)."""

    def __init__(self) -> None:
        super().__init__("Failed Request: a card payment of this link is being decided; retry in a moment")


async def card_in_flight(session: Session, link_id: str) -> bool:
    """An open card attempt of the link whose charge is with the acquirer (kasir.processors.calls): its decision
    may still pay the link, so nothing else may end it meanwhile (as the card room's expiry waits for it)."""
    for attempt in await link_repository.attempts(session, link_id):
        if attempt.method == METHOD_CARD and AttemptStatus(attempt.status) is AttemptStatus.OPEN:
            if await processor_call_repository.in_flight(session, "card", attempt.inner_id):
                return True
    return False


def _report(link: LinkRow, attempt: AttemptRow | None, *, acq: str | None = None) -> None:
    """The attempt the next callback describes (§10.5's per-method table); `acq`: a card's acquirer."""
    if attempt is None:
        link.payment_method = link.payment_channel = link.acq = None
    elif attempt.method == METHOD_CARD:
        link.payment_method, link.payment_channel, link.acq = METHOD_CARD, "CARD", acq or ""
    elif attempt.method == METHOD_VA:
        link.payment_method, link.payment_channel, link.acq = METHOD_VA, "VA", attempt.acq
    else:
        link.payment_method, link.payment_channel, link.acq = METHOD_WALLET, attempt.channel, attempt.channel


async def record_callback(session: Session, link: LinkRow, event: str) -> None:
    """The link's payment-page callback for `event` (SUCCESS, FAILED, EXPIRED), sent once the unit commits."""
    await callback_outbox.record(
        session,
        kind=CallbackKind.PAYMENT_PAGE,
        merchant_id=link.merchant_id,
        transaction_ref=link.id,
        event=event,
        url=link.callback_url,
        payload=callback_payload(link, event),
        signed_ids=SignedIds(link.id, link.external_id, link.order_id, link.sub_merchant_id),
    )


async def _save(session: Session, link: LinkRow) -> None:
    link.updated_at = clock.now()
    await link_repository.save(session, link)


async def _end_attempt(session: Session, attempt: AttemptRow, to: AttemptStatus, reason: str | None = None) -> None:
    if attempt_transition(attempt, to):
        attempt.reason = reason if reason is not None else attempt.reason
        attempt.updated_at = clock.now()
        await link_repository.save_attempt(session, attempt)


class LinkOwner:
    """The payment owner of kasir.payments.owners: registered by kasir.products."""

    async def hold(self, session: Session, owner_id: str) -> None:
        await link_repository.get(session, owner_id, lock=True)

    async def settled(self, session: Session, outcome: InnerOutcome) -> None:
        link = await link_service.get(session, outcome.owner_id, lock=True)
        attempt = await link_repository.attempt_of(session, outcome.inner_id)
        if attempt is None or attempt.link_id != link.id:  # pragma: no cover - every owned row has its attempt
            log.error("an owned payment without its attempt", extra={"transaction_id": outcome.inner_id})
            return
        if outcome.event is InnerEvent.CLOSED:
            await _end_attempt(session, attempt, AttemptStatus.CLOSED)
            return
        if attempt.method != METHOD_CARD and is_open(link) and await card_in_flight(session, link.id):
            raise LinkBusy()  # the payer's unit rolls back: one payment per link, decided one at a time
        due = is_open(link) and link.expires_at <= clock.now()
        if not is_open(link) or due:
            if outcome.event is InnerEvent.PAID:
                # §10.4: one payment per link; the payer's unit rolls back (its money is refused).
                raise LinkEnded(f"Failed Request: the payment link is {'EXPIRED' if due else link.status}")
            await _end_attempt(session, attempt, AttemptStatus.FAILED, outcome.reason)
            return
        if outcome.event is InnerEvent.PAID:
            await self._paid(session, link, attempt, outcome)
        else:
            await self._failed(session, link, attempt, outcome)

    async def _paid(self, session: Session, link: LinkRow, attempt: AttemptRow, outcome: InnerOutcome) -> None:
        transition(link, LinkStatus.SUCCESS)
        now = clock.now()
        link.paid_at, link.open_until = now, None
        link.response_message = SUCCESS_MESSAGE
        link.card_token = outcome.card_token
        _report(link, attempt, acq=outcome.acq)
        await _end_attempt(session, attempt, AttemptStatus.PAID)
        await _save(session, link)
        payment_metrics.settled_in(session, "link", LinkStatus.SUCCESS.name)
        await record_callback(session, link, LinkStatus.SUCCESS.value)
        await close_other_attempts(session, link, keep=attempt.id)

    async def _failed(self, session: Session, link: LinkRow, attempt: AttemptRow, outcome: InnerOutcome) -> None:
        transition(link, LinkStatus.PENDING)
        link.attempts_failed += 1
        link.response_message = (outcome.reason or DEFAULT_FAILURE)[:255]
        _report(link, attempt, acq=outcome.acq)
        if outcome.ended:
            await _end_attempt(session, attempt, AttemptStatus.FAILED, link.response_message)
        else:
            attempt.reason, attempt.updated_at = link.response_message, clock.now()
            await link_repository.save_attempt(session, attempt)
        await _save(session, link)
        await record_callback(session, link, "FAILED")
        if link.attempts_failed >= MAX_FAILED_ATTEMPTS:
            await end(session, link, EXPIRED_BY_ATTEMPTS)


link_owner = LinkOwner()


async def end(session: Session, link: LinkRow, message: str) -> None:
    """The locked, PENDING `link` EXPIRED: its callback, and every open attempt closed silently."""
    transition(link, LinkStatus.EXPIRED)
    link.open_until = None
    link.response_message = message
    if message == EXPIRED_BY_TIME:  # §10.5: EXPIRED describes the last attempt ("" in all three when none)
        attempts = await link_repository.attempts(session, link.id)
        last = attempts[-1] if attempts else None
        acq = None
        if last is not None and last.method == METHOD_CARD:
            acq = (await card_service.get(session, last.inner_id)).acq
        _report(link, last, acq=acq)
    await _save(session, link)
    payment_metrics.settled_in(session, "link", LinkStatus.EXPIRED.name)
    await record_callback(session, link, LinkStatus.EXPIRED.value)
    await close_other_attempts(session, link, keep=None)


async def close_other_attempts(session: Session, link: LinkRow, *, keep: int | None) -> None:
    """Every open attempt but `keep` closed silently (§10.4): the VA cancelled, the wallet transaction expired,
    the card page closed. Their rooms tell the owner (CLOSED), which only marks the attempt."""
    now = clock.now()
    for attempt in await link_repository.attempts(session, link.id):
        if attempt.id == keep or AttemptStatus(attempt.status) is not AttemptStatus.OPEN:
            continue
        if attempt.method == METHOD_VA:
            va = await va_service.get(session, attempt.inner_id, lock=True)
            if va_is_open(va) and va.expires_at > now:
                await va_service.cancel(session, va)
            elif va_is_open(va):
                await va_service.expire(session, va.id)
        elif attempt.method == METHOD_WALLET:
            tx = await wallet_service.get(session, attempt.inner_id, lock=True)
            if tx.status == WalletStatus.PENDING.value:
                await wallet_service.expire_now(session, tx)
        else:
            order = await card_service.get(session, attempt.inner_id, lock=True)
            if order.status in (CardOrderStatus.PENDING.value, CardOrderStatus.AUTHENTICATING.value):
                await expire_order(session, order, now)
        await _end_attempt(session, attempt, AttemptStatus.CLOSED)

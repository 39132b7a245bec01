"""What the payouts room offers the processors (kasir.processors.offers): its channels (the beneficiary's bank
code or e-wallet: `payout.014=NAME`) and how it applies a payout rail's notification (docs/decisions.md §11.9).

    pending   03: the rail took it
    sent      00
    failed    06 (`message`: the reason)
    returned  04 (`message`: the reason)
    canceled  05
"""

from __future__ import annotations

from kasir.db import Session
from kasir.payouts.banks import channels
from kasir.payouts.repository import transfer_repository
from kasir.payouts.transfers import TransferNotFound, answer_key, apply_answer
from kasir.processors.offers import Offer
from kasir.processors.protocols import Event, Notification, PayoutAnswer, PayoutState
from kasir.processors.service import UnsupportedEvent, check_served

_STATES = {
    Event.PENDING: PayoutState.PENDING,
    Event.SENT: PayoutState.SENT,
    Event.FAILED: PayoutState.FAILED,
    Event.RETURNED: PayoutState.RETURNED,
    Event.CANCELED: PayoutState.CANCELED,
}


async def apply_payout_notification(session: Session, notification: Notification, *, by: str, strict: bool) -> str:
    """The transfer's status after the rail's notification: applied as the rail's answer is (kasir.payouts.transfers),
    with its balance effect and notification; a repeat changes nothing, a move the states do not allow is refused."""
    state = _STATES.get(notification.event)
    if state is None:
        raise UnsupportedEvent(notification)
    transfer = await transfer_repository.get(session, notification.reference, lock=True)
    if transfer is None:
        raise TransferNotFound()
    check_served(by, "payout", transfer.bank)
    answer = PayoutAnswer(state, notification.bank_reference, notification.message)
    await apply_answer(session, transfer, answer, strict=True)
    # The first answer recorded stores the key's: the accepting process may have died before recording the rail's.
    await answer_key(session, transfer)
    return transfer.status


payout_offer = Offer("payout", channels=channels, apply=apply_payout_notification)

"""What the wallet room offers the processors (kasir.processors.offers): its channels, how it applies an
issuer's notification, and its processor calls, the refund and the void (kasir.wallet.service).

    paid     PAID (`issuer`: who paid a QRIS payment)
    failed   failed, with the issuer's reason (OVO reports failures)
    expired  EXPIRED now
"""

from __future__ import annotations

from kasir.db import Session
from kasir.processors.offers import Offer
from kasir.processors.protocols import Event, Notification
from kasir.processors.service import UnsupportedEvent, check_served
from kasir.wallet.schemas import CHANNELS
from kasir.wallet.service import WALLET_REFUND, WALLET_VOID, WalletRefundAction, WalletVoidAction, wallet_service

_STATES = {Event.PAID: "PAID", Event.FAILED: "failed", Event.EXPIRED: "EXPIRED"}


async def apply_wallet_notification(session: Session, notification: Notification, *, by: str, strict: bool) -> str:
    """The issuer's change of the notification's payment; the transaction's status after it."""
    state = _STATES.get(notification.event)
    if state is None:
        raise UnsupportedEvent(notification)
    tx = await wallet_service.get(session, notification.reference, lock=True)
    check_served(by, "wallet", tx.payment_channel)
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


def _channels() -> tuple[str, ...]:
    return CHANNELS


wallet_offer = Offer(
    "wallet",
    channels=_channels,
    apply=apply_wallet_notification,
    actions={WALLET_REFUND: WalletRefundAction(), WALLET_VOID: WalletVoidAction()},
)

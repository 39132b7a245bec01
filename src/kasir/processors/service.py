"""A processor's notification, handed to the product that owns the payment, in the caller's unit of work.

Every processor reaches the products through `apply`: the notify route for a processor's
signed notifications, the simulator's pages and dummy payment for theirs. A notification is
data (what happened to which reference); the product applies it with its callback, through
the applier its offer declared (kasir.processors.offers). Applying the same notification
again changes nothing (processors retry their notifications): a transaction already where the
notification says answers as applied; one that went elsewhere is refused (409 in the route's
format). A processor's notification applies only to a payment of a channel it serves
(`check_served`: `NotYourPayment`, 404 as for an unknown reference; with one processor per
channel, an OVO issuer cannot mark a DANA payment paid).

    paid      card: the attempt's challenge passed (SUCCESS); wallet: PAID
    failed    card: the challenge failed (a failed attempt); wallet: failed (OVO)
    expired   wallet: EXPIRED now
    approved  bnpl: 00 with the tenure
    rejected  bnpl: 06

Errors a product's applier raises besides its own state refusals:

    UnsupportedEvent    400  the event is not one of the product's (`event`)
    NotYourPayment      404  the payment's channel is not the notifying processor's (`reference`)
"""

from __future__ import annotations

from kasir.db import Session
from kasir.errors import InvalidFieldFormat, NotFound
from kasir.processors.offers import offer_of
from kasir.processors.protocols import Notification, Product
from kasir.processors.registry import serves


class UnsupportedEvent(InvalidFieldFormat):
    def __init__(self, notification: Notification) -> None:
        super().__init__("event", f"{notification.event} is not an event of {notification.product}")


class NotYourPayment(NotFound):
    def __init__(self) -> None:
        super().__init__("Not Found: no payment of this processor has that reference", field="reference")


def check_served(by: str, product: Product, channel: str | None) -> None:
    """Refuse (NotYourPayment) a notification of `by` about a payment of a channel it does not serve."""
    if not serves(by, product, channel):
        raise NotYourPayment()


async def apply(session: Session, notification: Notification, *, by: str, strict: bool = False) -> str:
    """Apply `notification` from the processor named `by`; the transaction's state after it. `strict`: a
    notification applied before is refused like any other move its state does not allow (the simulator's
    forms, sent twice)."""
    offer = offer_of(notification.product)
    return await offer.apply(session, notification, by=by, strict=strict)

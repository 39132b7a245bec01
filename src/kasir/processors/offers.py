"""What each product offers the processors: declared once at start-up, never looked up by name.

The seam points one way: a product room imports kasir.processors, kasir.processors imports no
product. So a product tells the seam what it offers, in one `Offer` of its own (card/processing.py,
wallet/processing.py, bnpl/processing.py), and one module outside processors/ lists the offers
and declares them (kasir.products.declare_products, called by every entry point: the app, the
worker, the CLI commands that reach a processor).

    channels   the channels the product takes: a channel named in KASIR_PROCESSORS must be one
    apply      how the product applies a processor's `Notification` to its payment, in the unit
               of work it is given (kasir.processors.service.apply hands every notification here)
    actions    the processor calls the product holds, asks and records, by name ("card.charge"),
               as kasir.processors.calls runs them and the worker finishes them

A processor returns what happened to which reference (a `CardDecision`, a `Notification`); the
product that owns the payment applies it (hyperswitch's connector returns an event that its
router core applies; Medusa's provider returns an action that its payment module applies).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kasir.db import Session
from kasir.processors.calls import Action, register
from kasir.processors.protocols import Notification, Product


class NotificationApplier(Protocol):
    async def __call__(self, session: Session, notification: Notification, *, by: str, strict: bool) -> str:
        """Apply `notification` from the processor named `by` to the product's payment; the payment's
        state after it. Applied before: nothing changes (`strict`: refused as any move its state does not
        allow). A payment of a channel `by` does not serve: kasir.processors.service.NotYourPayment."""
        ...


@dataclass(frozen=True, slots=True)
class Offer:
    """What one product offers the processors (see the module docstring)."""

    product: Product
    channels: Callable[[], Sequence[str]]  # read when asked: the card's come from the settings
    apply: NotificationApplier
    actions: Mapping[str, Action] = field(default_factory=dict)


class UndeclaredProduct(LookupError):
    """A product reached the processors before its offer was declared: a wiring bug of an entry point."""

    def __init__(self, product: str) -> None:
        super().__init__(
            f"the {product} product has declared no offer to the processors: "
            "the entry point must call kasir.products.declare_products() at start-up"
        )


_OFFERS: dict[Product, Offer] = {}


def declare(*offers: Offer) -> None:
    """Declare the products' offers (again: the same offers, nothing changes)."""
    for offer in offers:
        _OFFERS[offer.product] = offer
        for name, action in offer.actions.items():
            register(name, action)


def offer_of(product: Product) -> Offer:
    offer = _OFFERS.get(product)
    if offer is None:
        raise UndeclaredProduct(product)
    return offer

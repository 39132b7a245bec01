"""The products Kasir serves, declared to the processors at start-up: one explicit list, no discovery.

kasir.processors imports no product (kasir.processors.offers): each product room says what it
offers the processors in its processing.py (its channels, how it applies a notification, its
processor calls), and this module declares those offers and installs the built-in processor
plug-in, the staging simulator. Every entry point calls `declare_products()` before a processor
is reached: the app (create_app), the worker (`kasir worker`), `kasir serve`'s configuration check.
"""

from __future__ import annotations

from kasir.bnpl.processing import bnpl_offer
from kasir.card.processing import card_offer
from kasir.payouts.processing import payout_offer
from kasir.processors.offers import Offer, declare
from kasir.processors.registry import SIMULATOR, install
from kasir.simulator import create as create_simulator
from kasir.va.processing import va_offer
from kasir.wallet.processing import wallet_offer

OFFERS: tuple[Offer, ...] = (card_offer, wallet_offer, bnpl_offer, va_offer, payout_offer)


def declare_products() -> None:
    """Declare every product's offer and install the simulator (idempotent: start-up may run twice)."""
    declare(*OFFERS)
    install(SIMULATOR, create_simulator)

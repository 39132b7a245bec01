"""The staging simulator: one processor plug-in serving card, wallet, BNPL, VAs and payouts, with no money anywhere.

    card     the test cards decide (cards.py); a challenge is the OTP page (/card/pages/{id}/3ds)
    wallet   the checkout page with Pay and Fail, and the dummy payment API
    bnpl     the approval page with Approve and Reject
    va       numbers from the shipped table (kasir.va.banks), payments by the VA dummy payment API
    payout   the beneficiary account's last four digits decide (payouts.py)

A plug-in like any other (examples/processor-http): the entry point `simulator` of the group
`kasir.processors` (Kasir's pyproject.toml) names `create`, and kasir.products installs the same
factory at start-up. It sits outside kasir.processors because its pages read the products'
payments: through their public services, never a room's private helpers. Its pages and the dummy
payment change a payment as any processor's notification does (kasir.processors.service.apply);
its routes are its `router()`. `simulates` is True: production refuses to start with it and never
uses it (kasir.processors.registry).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from kasir.config import Settings, get_settings
from kasir.processors.calls import recorded_card
from kasir.processors.protocols import (
    BnplApplication,
    BnplLender,
    CardAcquirer,
    CardCharge,
    CardDecision,
    CardResult,
    Checkout,
    ForgedNotification,
    Notification,
    PayoutRail,
    ProcessorRefused,
    VaIssuer,
    VaOpening,
    WalletIssuer,
    WalletPayment,
)
from kasir.simulator import pages
from kasir.simulator.cards import MESSAGES, REASONS, RESULTS, Outcome, outcome_of
from kasir.simulator.endpoints import router as simulator_router
from kasir.simulator.payouts import SimulatedPayoutRail
from kasir.va.banks import bank_of

if TYPE_CHECKING:
    from fastapi import APIRouter

NAME = "simulator"


def otp_page_url(reference: str) -> str:
    return f"{get_settings().public_url}/card/pages/{reference}/3ds"


def _decision(outcome: Outcome, reference: str) -> CardDecision:
    result = RESULTS.get(outcome, CardResult.DECLINED)
    redirect = otp_page_url(reference) if outcome is Outcome.CHALLENGE else None
    return CardDecision(result, MESSAGES[outcome], redirect, reason=REASONS.get(outcome))


class SimulatedAcquirer:
    """Decides by the test card; a challenge waits at the OTP page.

    `status` answers as an acquirer would for an attempt whose answer Kasir did not record (a
    crash between asking and recording): its decision, remembered in the process (the latest
    DECISIONS_KEPT), or else decided by the card Kasir recorded (`recorded_card`: a test card is
    known by its masked number), since the process that decided may be gone. Without either, no
    answer: a failed attempt, the customer may try again.
    """

    DECISIONS_KEPT = 10_000

    def __init__(self) -> None:
        self._decided: OrderedDict[tuple[str, int], CardDecision] = OrderedDict()

    async def charge(self, charge: CardCharge) -> CardDecision:
        decision = _decision(outcome_of(charge.card.number or charge.card.masked), charge.reference)
        self._decided[(charge.reference, charge.attempt)] = decision
        while len(self._decided) > self.DECISIONS_KEPT:
            self._decided.popitem(last=False)
        return decision

    async def complete_challenge(self, reference: str, attempt: int, params: Mapping[str, str]) -> CardDecision:
        # The OTP page applies its result itself: a customer back without it is still at the challenge.
        return CardDecision(CardResult.CHALLENGE, MESSAGES[Outcome.CHALLENGE], otp_page_url(reference))

    async def status(self, reference: str, attempt: int) -> CardDecision:
        decided = self._decided.get((reference, attempt))
        if decided is not None:
            return decided
        masked = recorded_card.get()
        if masked:
            return _decision(outcome_of(masked), reference)
        return _decision(Outcome.ISSUER_UNAVAILABLE, reference)

    def page_notice(self) -> str | None:
        return pages.test_cards_notice()


class SimulatedIssuer:
    """The checkout page is the simulator's own (Pay, and Fail for OVO)."""

    async def create(self, payment: WalletPayment) -> Checkout:
        return Checkout(html=pages.render_wallet_checkout(payment))

    async def refund(self, reference: str, refund_reference: str, amount: int) -> None:
        if amount <= 0:
            raise ProcessorRefused("Failed Request: nothing to refund")

    async def void(self, reference: str) -> None:
        return None

    async def status(self, reference: str) -> Notification | None:
        return None  # the simulator's changes are applied as they happen


class SimulatedVaIssuer:
    """Numbers VAs by the shipped table (kasir.va.banks): the payment system's prefix, then the merchant's
    digits left-padded with 0, or digits drawn from the reference (the same draw, the same number).
    Payments are the dummy payment's (kasir.simulator.endpoints)."""

    async def create(self, opening: VaOpening) -> str:
        bank = bank_of(opening.bank)
        if opening.chosen_digits is not None:
            digits = opening.chosen_digits.rjust(bank.free_digits, "0")
        else:
            seed = hashlib.sha256(f"{opening.reference}:{opening.draw}".encode()).digest()
            digits = str(int.from_bytes(seed, "big") % 10**bank.free_digits).rjust(bank.free_digits, "0")
        return bank.prefix(opening.payment_system) + digits

    async def cancel(self, reference: str) -> None:
        return None

    async def status(self, reference: str) -> Notification | None:
        return None  # the dummy payment applies its payments as they happen


class SimulatedLender:
    async def checkout(self, application: BnplApplication) -> Checkout:
        return Checkout(html=pages.render_bnpl_approval(application))

    async def status(self, reference: str) -> Notification | None:
        return None


class Simulator:
    name = NAME
    simulates = True
    timeout_seconds = 0.0  # it answers in the process, at once

    def __init__(self) -> None:
        self.card: CardAcquirer | None = SimulatedAcquirer()
        self.wallet: WalletIssuer | None = SimulatedIssuer()
        self.bnpl: BnplLender | None = SimulatedLender()
        self.va: VaIssuer | None = SimulatedVaIssuer()
        self.payout: PayoutRail | None = SimulatedPayoutRail()

    def router(self) -> APIRouter | None:
        return simulator_router  # each answers 404 unless the simulator serves its product

    async def notifications(self, headers: Mapping[str, str], body: bytes) -> Sequence[Notification]:
        raise ForgedNotification("The simulator sends no notifications: its pages apply their changes")


def create(settings: Settings) -> Simulator:
    """The entry point (`kasir.processors`: simulator)."""
    return Simulator()

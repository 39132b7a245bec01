"""The staging test cards and the 3-D Secure one-time password: the simulator acquirer's knowledge.

A card is approved, declined or challenged by its number (the table below, printed on the
hosted payment page and in docs/merchant/card.md); any other valid number is declined, since staging
charges no real card. A challenged attempt is passed with the one-time password the OTP page
shows: derived from the order and the attempt with the service's key, so it is never stored. A
wrong code may be typed again, OTP_TRIES codes in all (the wrong ones are counted: kasir.simulator.models).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from kasir.config import get_settings
from kasir.kit.crypto import constant_time_equals, derive_key
from kasir.processors.protocols import CardResult, DeclineReason


class Outcome(StrEnum):
    """What the staging issuer does with a card (docs/decisions.md §7)."""

    APPROVED = "approved"  # frictionless success
    CHALLENGE = "challenge"  # success behind the 3-D Secure one-time-password page
    DECLINED = "declined"
    INSUFFICIENT_FUNDS = "insufficient_funds"
    ISSUER_UNAVAILABLE = "issuer_unavailable"
    EXPIRED_CARD = "expired_card"
    UNKNOWN_CARD = "unknown_card"  # any other valid number: staging charges no real card


@dataclass(frozen=True, slots=True)
class TestCard:
    number: str
    brand: str
    outcome: Outcome
    description: str


# The staging test cards (README "Card charge" and the payment page print this table).
# Any future expiry date and any CVN of the right length work with them.
TEST_CARDS: tuple[TestCard, ...] = (
    TestCard("4811111111111114", "VISA", Outcome.APPROVED, "Success, no 3-D Secure (frictionless)"),
    TestCard("5211111111111117", "MASTERCARD", Outcome.APPROVED, "Success, no 3-D Secure (frictionless)"),
    TestCard("4000000000003220", "VISA", Outcome.CHALLENGE, "Success after the 3-D Secure one-time password"),
    TestCard("4000000000000002", "VISA", Outcome.DECLINED, "Declined by the issuer"),
    TestCard("4000000000009995", "VISA", Outcome.INSUFFICIENT_FUNDS, "Declined: insufficient funds"),
    TestCard("5100000000000511", "MASTERCARD", Outcome.ISSUER_UNAVAILABLE, "Failed: the issuer does not respond"),
    TestCard("4000000000000069", "VISA", Outcome.EXPIRED_CARD, "Declined: expired card"),
)
_BY_NUMBER = {card.number: card for card in TEST_CARDS}
# A stored card (charged by its token) is known by its masked number: first 6, last 4.
_BY_MASK = {card.number[:6] + "*" * (len(card.number) - 10) + card.number[-4:]: card for card in TEST_CARDS}

# response_message of the payment-page callback and the message the page shows.
MESSAGES: dict[Outcome, str] = {
    Outcome.APPROVED: "Approved",
    Outcome.CHALLENGE: "3-D Secure authentication required",
    Outcome.DECLINED: "Card declined by the issuer",
    Outcome.INSUFFICIENT_FUNDS: "Insufficient funds",
    Outcome.ISSUER_UNAVAILABLE: "Issuer not responding",
    Outcome.EXPIRED_CARD: "Expired card",
    Outcome.UNKNOWN_CARD: "Card not recognised by the staging issuer; use a test card",
}
OTP_FAILED_MESSAGE = "3-D Secure authentication failed"
# Codes a customer may type for one challenge, as issuers' challenge pages allow (commonly 3): a wrong one
# before the last is typed again on the same page; the last wrong one fails the attempt (one of its 3).
OTP_TRIES = 3

# Why an attempt failed, as the acquirer says it (kasir.processors.protocols.DeclineReason).
REASONS: dict[Outcome, DeclineReason] = {
    Outcome.DECLINED: DeclineReason.DO_NOT_HONOUR,
    Outcome.INSUFFICIENT_FUNDS: DeclineReason.INSUFFICIENT_FUNDS,
    Outcome.ISSUER_UNAVAILABLE: DeclineReason.ISSUER_UNAVAILABLE,
    Outcome.EXPIRED_CARD: DeclineReason.EXPIRED_CARD,
    Outcome.UNKNOWN_CARD: DeclineReason.INVALID_CARD,
}

RESULTS: dict[Outcome, CardResult] = {
    Outcome.APPROVED: CardResult.APPROVED,
    Outcome.CHALLENGE: CardResult.CHALLENGE,
    Outcome.ISSUER_UNAVAILABLE: CardResult.NO_ANSWER,
}


def outcome_of(number: str) -> Outcome:
    """By the number, or by the masked number of a stored card."""
    digits = number.replace(" ", "")
    card = _BY_MASK.get(digits) if "*" in digits else _BY_NUMBER.get(digits)
    return card.outcome if card else Outcome.UNKNOWN_CARD


@lru_cache(maxsize=4)
def _otp_key(secret_key: str) -> bytes:
    return derive_key(secret_key, "kasir/card-otp")


def one_time_password(order_id: str, attempt: int, secret_key: str | None = None) -> str:
    """The staging 3-D Secure OTP of an attempt (derived, so it is never stored)."""
    key = _otp_key(secret_key or get_settings().resolved_secret_key())
    digest = hmac.digest(key, f"{order_id}:{attempt}".encode(), "sha256")
    return str(int.from_bytes(digest[:8], "big") % 1_000_000).zfill(6)


def check_one_time_password(order_id: str, attempt: int, otp: str) -> bool:
    """The OTP of the current KASIR_SECRET_KEY or of a previous one (a page shown before a rotation)."""
    keys = (None, *get_settings().previous_secret_keys())
    return any(constant_time_equals(otp, one_time_password(order_id, attempt, key)) for key in keys)

"""Card order and attempt states as data (docs/decisions.md §7).

    PENDING ──card approved──────────────▶ SUCCESS
       │    ──card needs 3-D Secure──────▶ AUTHENTICATING ──challenge passed──▶ SUCCESS
       │                                       │  ──challenge failed (attempts left)──▶ PENDING
       └──3rd failed attempt / expiredTime──▶ EXPIRED ◀──3rd failure / expiredTime──┘

A failed attempt leaves the order PENDING (a FAILED callback each time) until the third,
which closes it as EXPIRED. `paymentStatus` on the wire is PENDING for both open states.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from kasir.errors import InvalidStateTransition

MAX_FAILED_ATTEMPTS = 3  # interface.md: EXPIRED "when all attempts failed"; docs/decisions.md §7: 3


class CardOrderStatus(StrEnum):
    PENDING = "PENDING"  # the customer may (still) pay at the link
    AUTHENTICATING = "AUTHENTICATING"  # a 3-D Secure one-time password is awaited
    SUCCESS = "SUCCESS"
    EXPIRED = "EXPIRED"


class CardAttemptStatus(StrEnum):
    SUBMITTED = "SUBMITTED"  # the acquirer is being asked (kasir.processors.calls): no decision recorded yet
    CHALLENGE = "CHALLENGE"  # waiting for the acquirer's challenge (3-D Secure)
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"


# Every status is classified; a new one must be added here (tests check it).
IS_TERMINAL: dict[CardOrderStatus, bool] = {
    CardOrderStatus.PENDING: False,
    CardOrderStatus.AUTHENTICATING: False,
    CardOrderStatus.SUCCESS: True,
    CardOrderStatus.EXPIRED: True,
}

ATTEMPT_IS_TERMINAL: dict[CardAttemptStatus, bool] = {
    CardAttemptStatus.SUBMITTED: False,
    CardAttemptStatus.CHALLENGE: False,
    CardAttemptStatus.SUCCESS: True,
    CardAttemptStatus.FAILED: True,
}

TRANSITIONS: dict[CardOrderStatus, frozenset[CardOrderStatus]] = {
    CardOrderStatus.PENDING: frozenset(
        {CardOrderStatus.SUCCESS, CardOrderStatus.AUTHENTICATING, CardOrderStatus.EXPIRED}
    ),
    CardOrderStatus.AUTHENTICATING: frozenset(
        {CardOrderStatus.SUCCESS, CardOrderStatus.PENDING, CardOrderStatus.EXPIRED}
    ),
}

# The wire's data.paymentStatus for each order status.
PAYMENT_STATUS: dict[CardOrderStatus, str] = {
    CardOrderStatus.PENDING: "PENDING",
    CardOrderStatus.AUTHENTICATING: "PENDING",
    CardOrderStatus.SUCCESS: "SUCCESS",
    CardOrderStatus.EXPIRED: "EXPIRED",
}


def is_terminal(status: CardOrderStatus) -> bool:
    return IS_TERMINAL[status]


class HasStatus(Protocol):
    status: str


class CardOrderClosed(InvalidStateTransition):
    card_status = "CONFLICT"


def transition(order: HasStatus, to: CardOrderStatus) -> None:
    """Move `order` to `to`, or refuse (409) when TRANSITIONS does not allow it."""
    current = CardOrderStatus(order.status)
    if to not in TRANSITIONS.get(current, frozenset()):
        raise CardOrderClosed(f"The payment is {current.value.lower()}; it cannot become {to.value.lower()}")
    # Saved, and an outcome counted in the payment metrics, by the service (a plain row has no unit).
    order.status = to.value

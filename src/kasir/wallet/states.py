"""Wallet transaction states as data (docs/decisions.md §5).

    PENDING ──pay────▶ PAID ──refund──▶ REFUNDED ──refund (while some remains)──▶ REFUNDED
            ──expiry─▶ EXPIRED    └─void (same Jakarta day)──▶ VOID
            ──fail───▶ failed  (OVO only: the failure-reporting channel)

Every move into PAID, EXPIRED, failed, REFUNDED and VOID sends one wallet callback. Anything
not in TRANSITIONS is refused with `03` and changes nothing.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from kasir.errors import InvalidStateTransition


class WalletStatus(StrEnum):
    PENDING = "PENDING"
    PAID = "PAID"
    REFUNDED = "REFUNDED"
    VOID = "VOID"
    EXPIRED = "EXPIRED"
    FAILED = "failed"  # interface.md: the failure-reporting channel's callback says `failed`, lower case


# Every status is classified; a new one must be added here (tests check it). REFUNDED is not
# terminal: partial refunds accumulate until the paid amount is used up.
IS_TERMINAL: dict[WalletStatus, bool] = {
    WalletStatus.PENDING: False,
    WalletStatus.PAID: False,
    WalletStatus.REFUNDED: False,
    WalletStatus.VOID: True,
    WalletStatus.EXPIRED: True,
    WalletStatus.FAILED: True,
}

TRANSITIONS: dict[WalletStatus, frozenset[WalletStatus]] = {
    WalletStatus.PENDING: frozenset({WalletStatus.PAID, WalletStatus.EXPIRED, WalletStatus.FAILED}),
    WalletStatus.PAID: frozenset({WalletStatus.REFUNDED, WalletStatus.VOID}),
    WalletStatus.REFUNDED: frozenset({WalletStatus.REFUNDED}),
}

# Each move into one of these records one wallet callback (docs/decisions.md §5).
NOTIFIED: frozenset[WalletStatus] = frozenset(
    {WalletStatus.PAID, WalletStatus.EXPIRED, WalletStatus.FAILED, WalletStatus.REFUNDED, WalletStatus.VOID}
)


def is_terminal(status: WalletStatus) -> bool:
    return IS_TERMINAL[status]


class HasStatus(Protocol):
    status: str


class TransactionStateRefused(InvalidStateTransition):
    """`03` Failed Request: the transaction's state does not allow what was asked."""


def check_transition(tx: HasStatus, to: WalletStatus) -> None:
    """Refuse (`03`) when TRANSITIONS does not allow `tx` to move to `to`; change nothing."""
    current = WalletStatus(tx.status)
    if to not in TRANSITIONS.get(current, frozenset()):
        raise TransactionStateRefused(f"Failed Request: transaction is {current.value}, it cannot become {to.value}")


def transition(tx: HasStatus, to: WalletStatus) -> None:
    """Move `tx` to `to`, or refuse (`03`) when TRANSITIONS does not allow it."""
    check_transition(tx, to)
    tx.status = to.value  # counted in the payment metrics when the service saves it (a plain row has no unit)

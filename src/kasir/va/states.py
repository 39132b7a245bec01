"""Virtual-account states as data (docs/decisions.md §9.5).

    PENDING ──payment (single-use CLOSED / OPEN)──────────▶ PAID (closed)
            ──payment (multi-use CLOSED / OPEN)───────────▶ PAID (open: more payments)
            ──PARTIAL payment below the remainder─────────▶ PARTIALLY_PAID ──…──▶ PAID (closed)
    any open state ──expired_time passes──▶ EXPIRED
                   ──/va/cancel───────────▶ CANCELLED

Open (payable and cancellable): PENDING, PARTIALLY_PAID, and PAID of a multi-use VA. Every payment and
every move into EXPIRED or CANCELLED sends one callback. Anything TRANSITIONS does not allow is refused
with `03` and changes nothing.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from kasir.errors import InvalidStateTransition


class VaStatus(StrEnum):
    PENDING = "PENDING"
    PARTIALLY_PAID = "PARTIALLY_PAID"
    PAID = "PAID"
    EXPIRED = "EXPIRED"
    CANCELLED = "CANCELLED"


TRANSITIONS: dict[VaStatus, frozenset[VaStatus]] = {
    VaStatus.PENDING: frozenset({VaStatus.PAID, VaStatus.PARTIALLY_PAID, VaStatus.EXPIRED, VaStatus.CANCELLED}),
    VaStatus.PARTIALLY_PAID: frozenset({VaStatus.PARTIALLY_PAID, VaStatus.PAID, VaStatus.EXPIRED, VaStatus.CANCELLED}),
    # Only a multi-use VA is still open when PAID (`is_open`): its next payment keeps it PAID.
    VaStatus.PAID: frozenset({VaStatus.PAID, VaStatus.EXPIRED, VaStatus.CANCELLED}),
}

# Each move into one of these records one VA callback (every payment is a move: PAID to PAID included).
NOTIFIED: frozenset[VaStatus] = frozenset(VaStatus)


class HasState(Protocol):
    status: str
    is_multi_use: bool
    payment_system: str


def is_open(va: HasState) -> bool:
    """Payable and cancellable: PENDING, PARTIALLY_PAID, and PAID of a multi-use CLOSED or OPEN VA (a PARTIAL VA,
    answered multi-use, is closed once paid in full)."""
    status = VaStatus(va.status)
    if status is VaStatus.PAID:
        return va.is_multi_use and va.payment_system != "PARTIAL"
    return status in (VaStatus.PENDING, VaStatus.PARTIALLY_PAID)


class VaStateRefused(InvalidStateTransition):
    """`03` Failed Request: the VA's state does not allow what was asked."""


def transition(va: HasState, to: VaStatus) -> None:
    """Move `va` to `to`, or refuse (`03`) when the VA is closed or TRANSITIONS does not allow it."""
    current = VaStatus(va.status)
    if not is_open(va) or to not in TRANSITIONS.get(current, frozenset()):
        raise VaStateRefused(f"Failed Request: the virtual account is {current.value}, it cannot become {to.value}")
    va.status = to.value

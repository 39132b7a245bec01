"""Transfer states as data (docs/decisions.md §11.7).

    01 Initiated ──rail took it──▶ 03 Pending ──▶ 00 Success ──returned──▶ 04 Refunded
       │                              └────────▶ 06 Failed
       ├──▶ 00, 06 (the rail answered at once)
       └──▶ 05 Canceled (stopped by the rail before sending; never in staging)

Balance (§11.3): accepting holds the amount; 00 debits the ledger and drops the hold; 05 and 06 drop the hold;
04 credits the ledger back. Each move into 00, 06 or 04 sends one notification when the transfer asked for one
(§11.8). `02` and `07` are never stored. Anything TRANSITIONS does not allow is refused and changes nothing.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from kasir.errors import InvalidStateTransition


class TransferStatus(StrEnum):
    INITIATED = "01"
    PENDING = "03"
    SUCCESS = "00"
    FAILED = "06"
    REFUNDED = "04"
    CANCELED = "05"


DESCRIPTIONS: dict[TransferStatus, str] = {
    TransferStatus.INITIATED: "Initiated",
    TransferStatus.PENDING: "Pending",
    TransferStatus.SUCCESS: "Success",
    TransferStatus.FAILED: "Failed",
    TransferStatus.REFUNDED: "Refunded",
    TransferStatus.CANCELED: "Canceled",
}

TRANSITIONS: dict[TransferStatus, frozenset[TransferStatus]] = {
    TransferStatus.INITIATED: frozenset(
        {TransferStatus.PENDING, TransferStatus.SUCCESS, TransferStatus.CANCELED, TransferStatus.FAILED}
    ),
    TransferStatus.PENDING: frozenset({TransferStatus.SUCCESS, TransferStatus.FAILED}),
    TransferStatus.SUCCESS: frozenset({TransferStatus.REFUNDED}),
}

# No move leaves these.
TERMINAL: frozenset[TransferStatus] = frozenset(
    {TransferStatus.FAILED, TransferStatus.REFUNDED, TransferStatus.CANCELED}
)
# The rail is still asked about these (the worker's `status`); 00 waits only for a return, which the rail notifies.
UNSETTLED: frozenset[TransferStatus] = frozenset({TransferStatus.INITIATED, TransferStatus.PENDING})
# Each move into one of these sends the transfer's notification (§11.8), when it asked for one.
NOTIFIED: frozenset[TransferStatus] = frozenset(
    {TransferStatus.SUCCESS, TransferStatus.FAILED, TransferStatus.REFUNDED}
)
# The amount is held in these (§11.3).
HOLDING: frozenset[TransferStatus] = UNSETTLED

# The history's entry status of a transfer (§11.7).
HISTORY_STATUS: dict[TransferStatus, str] = {
    TransferStatus.INITIATED: "INIT",
    TransferStatus.PENDING: "INIT",
    TransferStatus.SUCCESS: "SUCCESS",
    TransferStatus.REFUNDED: "SUCCESS",
    TransferStatus.CANCELED: "CANCELLED",
    TransferStatus.FAILED: "CLOSED",
}


class HasStatus(Protocol):
    status: str


class TransferStateRefused(InvalidStateTransition):
    """The transfer's state does not allow the move (a rail's answer or notification out of order)."""


def allowed(current: TransferStatus, to: TransferStatus) -> bool:
    return to in TRANSITIONS.get(current, frozenset())


def transition(transfer: HasStatus, to: TransferStatus) -> None:
    """Move `transfer` to `to`, or refuse when TRANSITIONS does not allow it."""
    current = TransferStatus(transfer.status)
    if not allowed(current, to):
        raise TransferStateRefused(f"Failed Request: the transfer is {current.value}, it cannot become {to.value}")
    transfer.status = to.value

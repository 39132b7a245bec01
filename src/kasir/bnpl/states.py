"""BNPL transaction states as data (docs/decisions.md §6: SNAP status codes).

01 Initiated ──approve──▶ 00 Success
             ──reject───▶ 06 Failed
             ──expiry───▶ 05 Canceled ("Expired")
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from kasir.errors import InvalidStateTransition


class BnplStatus(StrEnum):
    SUCCESS = "00"
    INITIATED = "01"
    PAYING = "02"
    PENDING = "03"
    REFUNDED = "04"
    CANCELED = "05"
    FAILED = "06"
    NOT_FOUND = "07"


DESCRIPTIONS: dict[BnplStatus, str] = {
    BnplStatus.SUCCESS: "Success",
    BnplStatus.INITIATED: "Initiated",
    BnplStatus.PAYING: "Paying",
    BnplStatus.PENDING: "Pending",
    BnplStatus.REFUNDED: "Refunded",
    BnplStatus.CANCELED: "Canceled",
    BnplStatus.FAILED: "Failed",
    BnplStatus.NOT_FOUND: "Not Found",
}

# Every status is classified; a new one must be added here (tests check it).
IS_TERMINAL: dict[BnplStatus, bool] = {
    BnplStatus.SUCCESS: True,
    BnplStatus.INITIATED: False,
    BnplStatus.PAYING: False,
    BnplStatus.PENDING: False,
    BnplStatus.REFUNDED: True,
    BnplStatus.CANCELED: True,
    BnplStatus.FAILED: True,
    BnplStatus.NOT_FOUND: True,  # an inquiry answer, never stored
}

TRANSITIONS: dict[BnplStatus, frozenset[BnplStatus]] = {
    BnplStatus.INITIATED: frozenset({BnplStatus.SUCCESS, BnplStatus.FAILED, BnplStatus.CANCELED}),
}

# Each change into one of these sends one notification (docs/decisions.md §6).
NOTIFIED: frozenset[BnplStatus] = frozenset({BnplStatus.SUCCESS, BnplStatus.CANCELED, BnplStatus.FAILED})


def is_terminal(status: BnplStatus) -> bool:
    return IS_TERMINAL[status]


class HasStatus(Protocol):
    status: str
    status_desc: str


class TransactionNotInitiated(InvalidStateTransition):
    pass


def transition(tx: HasStatus, to: BnplStatus, desc: str | None = None) -> None:
    """Move `tx` to `to`, or refuse (409) when TRANSITIONS does not allow it."""
    current = BnplStatus(tx.status)
    if to not in TRANSITIONS.get(current, frozenset()):
        raise TransactionNotInitiated(f"Transaction is {DESCRIPTIONS[current]} ({current.value}), not Initiated")
    tx.status = to.value  # counted in the payment metrics when the service saves it (a plain row has no unit)
    tx.status_desc = desc or DESCRIPTIONS[to]

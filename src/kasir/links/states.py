"""Payment-link states as data (docs/decisions.md §10.5).

    PENDING ──money arrives by any method──────────────────▶ SUCCESS   callback SUCCESS
            ──an attempt fails, attempts left──────────────▶ PENDING   callback FAILED
            ──the 3rd failed attempt (all methods counted)─▶ EXPIRED   callbacks FAILED, then EXPIRED
            ──expired_time passes──────────────────────────▶ EXPIRED   callback EXPIRED

SUCCESS and EXPIRED are terminal: the link takes no more choices and no more money. An attempt (the inner
card order, wallet transaction or VA a choice made) is OPEN until it is PAID, FAILED, or CLOSED (it
expired unpaid, or the link ended while it was open: closed silently, no callback).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from kasir.errors import InvalidStateTransition

MAX_FAILED_ATTEMPTS = 3  # §10.5: the third failed attempt, all methods counted together, ends the link


class LinkStatus(StrEnum):
    PENDING = "PENDING"
    SUCCESS = "SUCCESS"
    EXPIRED = "EXPIRED"


class AttemptStatus(StrEnum):
    OPEN = "OPEN"
    PAID = "PAID"
    FAILED = "FAILED"
    CLOSED = "CLOSED"


TRANSITIONS: dict[LinkStatus, frozenset[LinkStatus]] = {
    # PENDING to PENDING: a failed attempt with attempts left (a FAILED callback, the link stays open).
    LinkStatus.PENDING: frozenset({LinkStatus.PENDING, LinkStatus.SUCCESS, LinkStatus.EXPIRED}),
}
TERMINAL: frozenset[LinkStatus] = frozenset({LinkStatus.SUCCESS, LinkStatus.EXPIRED})

ATTEMPT_TRANSITIONS: dict[AttemptStatus, frozenset[AttemptStatus]] = {
    AttemptStatus.OPEN: frozenset({AttemptStatus.PAID, AttemptStatus.FAILED, AttemptStatus.CLOSED}),
}
ATTEMPT_TERMINAL: frozenset[AttemptStatus] = frozenset({AttemptStatus.PAID, AttemptStatus.FAILED, AttemptStatus.CLOSED})


class HasStatus(Protocol):
    status: str


class LinkStateRefused(InvalidStateTransition):
    """`03` Failed Request: the link's state does not allow what was asked."""


def is_open(link: HasStatus) -> bool:
    return LinkStatus(link.status) is LinkStatus.PENDING


def transition(link: HasStatus, to: LinkStatus) -> None:
    """Move `link` to `to`, or refuse (`03`) what TRANSITIONS does not allow."""
    current = LinkStatus(link.status)
    if to not in TRANSITIONS.get(current, frozenset()):
        raise LinkStateRefused(f"Failed Request: the payment link is {current.value}, it cannot become {to.value}")
    link.status = to.value


def attempt_transition(attempt: HasStatus, to: AttemptStatus) -> bool:
    """Move an attempt to `to`; False (nothing changes) when it has ended already."""
    if to not in ATTEMPT_TRANSITIONS.get(AttemptStatus(attempt.status), frozenset()):
        return False
    attempt.status = to.value
    return True

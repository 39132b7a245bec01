"""The link's states as data (kasir.links.states): every state classified, and only TRANSITIONS' moves allowed."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kasir.links.states import (
    ATTEMPT_TERMINAL,
    ATTEMPT_TRANSITIONS,
    TERMINAL,
    TRANSITIONS,
    AttemptStatus,
    LinkStateRefused,
    LinkStatus,
    attempt_transition,
    transition,
)


@dataclass
class Row:
    status: str


def test_every_state_is_terminal_or_has_moves() -> None:
    for status in LinkStatus:
        assert (status in TERMINAL) != (status in TRANSITIONS), status
    for attempt_status in AttemptStatus:
        assert (attempt_status in ATTEMPT_TERMINAL) != (attempt_status in ATTEMPT_TRANSITIONS), attempt_status


@pytest.mark.parametrize("ended", [LinkStatus.SUCCESS, LinkStatus.EXPIRED])
def test_an_ended_link_moves_nowhere(ended: LinkStatus) -> None:
    for to in LinkStatus:
        with pytest.raises(LinkStateRefused):
            transition(Row(ended.value), to)


def test_a_pending_link_succeeds_fails_an_attempt_or_expires() -> None:
    for to in LinkStatus:
        row = Row("PENDING")
        transition(row, to)
        assert row.status == to.value


def test_an_ended_attempt_stays_ended() -> None:
    row = Row("CLOSED")
    assert attempt_transition(row, AttemptStatus.PAID) is False
    assert row.status == "CLOSED"
    row = Row("OPEN")
    assert attempt_transition(row, AttemptStatus.PAID) is True
    assert row.status == "PAID"

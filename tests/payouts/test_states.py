"""Transfer states as data (docs/decisions.md §11.7): every state classified, the table's moves and no other."""

from __future__ import annotations

import pytest

from kasir.payouts.states import (
    DESCRIPTIONS,
    HISTORY_STATUS,
    TERMINAL,
    TRANSITIONS,
    TransferStateRefused,
    TransferStatus,
    transition,
)

S = TransferStatus


def test_every_state_is_either_terminal_or_has_moves() -> None:
    for state in S:
        assert (state in TERMINAL) != (state in TRANSITIONS), state
        assert state in DESCRIPTIONS
        assert state in HISTORY_STATUS


def test_the_moves_are_the_decisions() -> None:
    moves = {(a.value, b.value) for a, targets in TRANSITIONS.items() for b in targets}
    assert moves == {("01", "03"), ("01", "00"), ("01", "05"), ("01", "06"), ("03", "00"), ("03", "06"), ("00", "04")}


class _T:
    def __init__(self, status: str) -> None:
        self.status = status


@pytest.mark.parametrize(("start", "to"), [("03", "05"), ("00", "06"), ("06", "00"), ("04", "00"), ("03", "01")])
def test_a_move_not_in_the_table_is_refused_and_changes_nothing(start: str, to: str) -> None:
    transfer = _T(start)
    with pytest.raises(TransferStateRefused):
        transition(transfer, S(to))
    assert transfer.status == start

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kasir.bnpl.states import (
    DESCRIPTIONS,
    IS_TERMINAL,
    NOTIFIED,
    TRANSITIONS,
    BnplStatus,
    TransactionNotInitiated,
    is_terminal,
    transition,
)


@dataclass
class Tx:
    status: str
    status_desc: str = ""


def test_every_state_is_classified_and_described() -> None:
    assert set(IS_TERMINAL) == set(BnplStatus)
    assert set(DESCRIPTIONS) == set(BnplStatus)


def test_terminal_states_have_no_way_out() -> None:
    for status in BnplStatus:
        if is_terminal(status):
            assert not TRANSITIONS.get(status)
    assert not is_terminal(BnplStatus.INITIATED)
    assert is_terminal(BnplStatus.SUCCESS)
    assert is_terminal(BnplStatus.CANCELED)
    assert is_terminal(BnplStatus.FAILED)


def test_initiated_goes_to_success_failed_or_canceled_only() -> None:
    assert TRANSITIONS[BnplStatus.INITIATED] == {BnplStatus.SUCCESS, BnplStatus.FAILED, BnplStatus.CANCELED}
    assert NOTIFIED == TRANSITIONS[BnplStatus.INITIATED]


@pytest.mark.parametrize("target", list(BnplStatus))
@pytest.mark.parametrize("source", list(BnplStatus))
def test_transition_refuses_what_the_table_does_not_allow(source: BnplStatus, target: BnplStatus) -> None:
    tx = Tx(source.value, "before")
    if target in TRANSITIONS.get(source, frozenset()):
        transition(tx, target, "custom" if target is BnplStatus.CANCELED else None)
        assert tx.status == target.value
        assert tx.status_desc == ("custom" if target is BnplStatus.CANCELED else DESCRIPTIONS[target])
    else:
        with pytest.raises(TransactionNotInitiated):
            transition(tx, target)
        assert (tx.status, tx.status_desc) == (source.value, "before")

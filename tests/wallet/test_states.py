from __future__ import annotations

from dataclasses import dataclass

import pytest

from kasir.wallet.states import (
    IS_TERMINAL,
    NOTIFIED,
    TRANSITIONS,
    TransactionStateRefused,
    WalletStatus,
    is_terminal,
    transition,
)


@dataclass
class Tx:
    status: str


def test_every_state_is_classified() -> None:
    assert set(IS_TERMINAL) == set(WalletStatus)


def test_terminal_states_have_no_way_out() -> None:
    for status in WalletStatus:
        if is_terminal(status):
            assert not TRANSITIONS.get(status)
    assert {s for s in WalletStatus if is_terminal(s)} == {WalletStatus.VOID, WalletStatus.EXPIRED, WalletStatus.FAILED}


def test_the_table() -> None:
    assert TRANSITIONS == {
        WalletStatus.PENDING: {WalletStatus.PAID, WalletStatus.EXPIRED, WalletStatus.FAILED},
        WalletStatus.PAID: {WalletStatus.REFUNDED, WalletStatus.VOID},
        WalletStatus.REFUNDED: {WalletStatus.REFUNDED},
    }
    assert set().union(*TRANSITIONS.values()) == NOTIFIED
    assert WalletStatus.FAILED.value == "failed"  # interface.md: lower case on the wire


@pytest.mark.parametrize("target", list(WalletStatus))
@pytest.mark.parametrize("source", list(WalletStatus))
def test_transition_refuses_what_the_table_does_not_allow(source: WalletStatus, target: WalletStatus) -> None:
    tx = Tx(source.value)
    if target in TRANSITIONS.get(source, frozenset()):
        transition(tx, target)
        assert tx.status == target.value
    else:
        with pytest.raises(TransactionStateRefused) as refused:
            transition(tx, target)
        assert refused.value.wallet_code == "03"
        assert tx.status == source.value

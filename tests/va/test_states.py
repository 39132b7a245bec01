"""The VA state machine as data (docs/decisions.md §9.5): every pair of states, allowed or refused."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import pytest

from kasir.va.states import TRANSITIONS, VaStateRefused, VaStatus, is_open, transition

# §9.5's table: (from, to) for a VA that is open in `from`.
ALLOWED = {
    (VaStatus.PENDING, VaStatus.PAID),
    (VaStatus.PENDING, VaStatus.PARTIALLY_PAID),
    (VaStatus.PENDING, VaStatus.EXPIRED),
    (VaStatus.PENDING, VaStatus.CANCELLED),
    (VaStatus.PARTIALLY_PAID, VaStatus.PARTIALLY_PAID),
    (VaStatus.PARTIALLY_PAID, VaStatus.PAID),
    (VaStatus.PARTIALLY_PAID, VaStatus.EXPIRED),
    (VaStatus.PARTIALLY_PAID, VaStatus.CANCELLED),
    (VaStatus.PAID, VaStatus.PAID),  # a multi-use VA's next payment
    (VaStatus.PAID, VaStatus.EXPIRED),
    (VaStatus.PAID, VaStatus.CANCELLED),
}


@dataclass
class Va:
    status: str
    is_multi_use: bool
    payment_system: str


def test_the_table_is_section_9_5() -> None:
    assert {(source, target) for source, targets in TRANSITIONS.items() for target in targets} == ALLOWED


@pytest.mark.parametrize(("source", "target"), list(product(VaStatus, VaStatus)))
@pytest.mark.parametrize(
    ("system", "multi_use"), [("CLOSED", False), ("CLOSED", True), ("OPEN", True), ("PARTIAL", True)]
)
def test_every_move(source: VaStatus, target: VaStatus, system: str, multi_use: bool) -> None:
    va = Va(source.value, multi_use, system)
    # PAID is open only for a multi-use CLOSED or OPEN VA; EXPIRED and CANCELLED never.
    open_now = source in (VaStatus.PENDING, VaStatus.PARTIALLY_PAID) or (
        source is VaStatus.PAID and multi_use and system != "PARTIAL"
    )
    assert is_open(va) is open_now
    if open_now and (source, target) in ALLOWED:
        transition(va, target)
        assert va.status == target.value
    else:
        with pytest.raises(VaStateRefused):
            transition(va, target)
        assert va.status == source.value

"""A card decline's reason is data: the acquirer names a DeclineReason, the card dialect maps it to its
transaction_code (tests/card/test_dialect.py checks every code on the wire), and no product reads an
acquirer's text."""

from __future__ import annotations

from pathlib import Path

import pytest

from kasir.card import dialect
from kasir.processors.protocols import CardDecision, CardResult, DeclineReason
from kasir.simulator.cards import MESSAGES, REASONS, Outcome

CONNECTOR_SRC = Path(__file__).resolve().parents[2] / "examples" / "processor-http" / "src"


def test_the_simulator_names_the_reason_of_every_failing_card() -> None:
    failing = {outcome for outcome in Outcome if outcome not in (Outcome.APPROVED, Outcome.CHALLENGE)}
    assert set(REASONS) == failing
    assert REASONS[Outcome.UNKNOWN_CARD] is DeclineReason.INVALID_CARD
    assert MESSAGES[Outcome.UNKNOWN_CARD] == "Card not recognised by the staging issuer; use a test card"


def test_the_dialect_maps_reasons_and_knows_no_simulator_text() -> None:
    assert set(dialect.TRANSACTION_CODES) == set(DeclineReason)
    source = Path(dialect.__file__).read_text()
    assert all(message not in source for message in MESSAGES.values() if message != "Approved")


def test_a_decision_names_no_reason_unless_the_acquirer_does() -> None:
    assert CardDecision(CardResult.DECLINED, "Do not honour").reason is None


def test_the_reference_connector_passes_the_money_movers_reason_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(CONNECTOR_SRC))
    from kasir_processor_http import decision_of

    declined = decision_of({"result": "declined", "message": "Insufficient funds", "reason": "insufficient_funds"})
    assert (declined.result, declined.reason) == (CardResult.DECLINED, DeclineReason.INSUFFICIENT_FUNDS)
    assert decision_of({"result": "declined", "message": "No", "reason": "stolen_card"}).reason is None
    assert decision_of({"result": "approved"}).reason is None

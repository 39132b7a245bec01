"""cards.py and states.py: Luhn, brands, masking, parsing; every state classified, transitions as data."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kasir.card.cards import (
    DEFAULT_CHANNELS,
    InvalidCardData,
    acquirer_for,
    brand_of,
    card_channels,
    luhn_valid,
    mask,
    parse_card,
)
from kasir.card.service import installment, page_token
from kasir.card.states import (
    ATTEMPT_IS_TERMINAL,
    IS_TERMINAL,
    PAYMENT_STATUS,
    TRANSITIONS,
    CardAttemptStatus,
    CardOrderClosed,
    CardOrderStatus,
    transition,
)
from kasir.config import configure, get_settings
from kasir.simulator.cards import TEST_CARDS, Outcome, one_time_password, outcome_of

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def luhn_reference(number: str) -> bool:
    digits = [int(d) for d in number][::-1]
    total = sum(digits[0::2]) + sum(sum(divmod(2 * d, 10)) for d in digits[1::2])
    return total % 10 == 0


@given(st.text(alphabet="0123456789", min_size=1, max_size=19))
def test_luhn_matches_the_reference(number: str) -> None:
    assert luhn_valid(number) == luhn_reference(number)


def test_every_test_card_is_valid_and_distinct() -> None:
    assert len({card.number for card in TEST_CARDS}) == len(TEST_CARDS)
    assert {card.outcome for card in TEST_CARDS} == set(Outcome) - {Outcome.UNKNOWN_CARD}
    for card in TEST_CARDS:
        assert luhn_reference(card.number)
        assert brand_of(card.number) == card.brand


def test_brands_and_acquirers() -> None:
    assert brand_of("4111111111111111") == "VISA"
    assert brand_of("5500000000000004") == "MASTERCARD"
    assert brand_of("2221000000000009") == "MASTERCARD"
    assert brand_of("378282246310005") == "AMEX"
    assert brand_of("3530111333300000") == "JCB"
    assert acquirer_for("CARD", "VISA") == "BCA"
    assert acquirer_for("CARD", "MASTERCARD") == "CIMB"
    assert acquirer_for("CARD", "JCB") == "BRI"
    assert acquirer_for("BRICC", "VISA") == "BRI"


def test_configured_channels_replace_the_shipped_list() -> None:
    shipped = get_settings()
    configure(shipped.model_copy(update={"card_channels": " CARD, MANDIRICC:MANDIRI "}))
    try:
        assert card_channels() == {"CARD": None, "MANDIRICC": "MANDIRI"}
        assert acquirer_for("MANDIRICC", "VISA") == "MANDIRI"
        assert acquirer_for("CARD", "VISA") == "BCA"
        assert acquirer_for("BCACC", "JCB") == "BRI"  # no longer a channel: no fixed acquirer
    finally:
        configure(shipped)
    assert card_channels() == DEFAULT_CHANNELS


def test_mask_keeps_first_six_and_last_four() -> None:
    assert mask("4811111111111114") == "481111******1114"
    assert mask("4811111111114") == "481111***1114"
    assert mask("4811111111111111114") == "481111*********1114"


def test_parse_masks_and_hides() -> None:
    """The number and CVN are held for the acquirer's call only: in no field but their own, never in repr."""
    card = parse_card(
        number="4811 1111 1111 1114", exp_month="09", exp_year="27", cvn="123", holder_name=" siti  rahayu ", now=NOW
    )
    assert (card.masked, card.brand, card.exp_month, card.exp_year) == ("481111******1114", "VISA", "09", "2027")
    assert card.holder_name == "SITI RAHAYU"
    assert (card.number, card.cvn) == ("4811111111111114", "123")
    assert outcome_of(card.number) is Outcome.APPROVED
    assert "4811111111111114" not in repr(card)
    assert "123" not in repr(card)
    others = set(card.__slots__) - {"number", "cvn"}
    assert not any("4811111111111114" in str(getattr(card, field)) for field in others)
    assert outcome_of("4242424242424242") is Outcome.UNKNOWN_CARD


@pytest.mark.parametrize(
    ("number", "month", "year", "cvn", "fields"),
    [
        ("4811111111111114", "11", "2026", "123", []),  # this month is still valid
        ("4811111111111114", "10", "2026", "123", ["cardExpiredYear"]),
        ("4811111111111114", "12", "25", "123", ["cardExpiredYear"]),
        ("481111111111", "12", "2030", "123", ["cardNumber"]),
        ("48111111111111141111", "12", "2030", "123", ["cardNumber"]),
        ("4811111111111113", "12", "2030", "12345", ["cardNumber", "cardCvn"]),
        ("4811111111111114", "", "", "", ["cardExpiredMonth", "cardExpiredYear", "cardCvn"]),
        # Issue 26: the month is exactly two digits, 01 to 12.
        ("4811111111111114", "9", "2030", "123", ["cardExpiredMonth"]),
        ("4811111111111114", " 09", "2030", "123", ["cardExpiredMonth"]),
        ("4811111111111114", "009", "2030", "123", ["cardExpiredMonth"]),
        ("4811111111111114", "00", "2030", "123", ["cardExpiredMonth"]),
        ("4811111111111114", "01", "2030", "123", []),
    ],
)
def test_parse_refusals(number: str, month: str, year: str, cvn: str, fields: list[str]) -> None:
    def parse() -> object:
        return parse_card(
            number=number, exp_month=month, exp_year=year, cvn=cvn, holder_name="SITI", now=NOW, prefix=""
        )

    if not fields:
        parse()
        return
    with pytest.raises(InvalidCardData) as refused:
        parse()
    assert [e.field for e in refused.value.errors] == fields
    assert number not in str(refused.value)
    assert all(number not in e.message for e in refused.value.errors)


def test_every_state_is_classified() -> None:
    assert set(IS_TERMINAL) == set(CardOrderStatus)
    assert set(PAYMENT_STATUS) == set(CardOrderStatus)
    assert set(ATTEMPT_IS_TERMINAL) == set(CardAttemptStatus)
    for status, targets in TRANSITIONS.items():
        assert not IS_TERMINAL[status]
        assert targets
    for status in CardOrderStatus:
        if IS_TERMINAL[status]:
            assert status not in TRANSITIONS


def test_transition_refuses_what_is_not_listed() -> None:
    order = SimpleNamespace(status="PENDING")
    transition(order, CardOrderStatus.AUTHENTICATING)
    transition(order, CardOrderStatus.PENDING)
    transition(order, CardOrderStatus.SUCCESS)
    with pytest.raises(CardOrderClosed):
        transition(order, CardOrderStatus.EXPIRED)
    with pytest.raises(CardOrderClosed):
        transition(SimpleNamespace(status="EXPIRED"), CardOrderStatus.SUCCESS)


def test_installments_round_up_to_the_rupiah() -> None:
    assert [installment(150000, t) for t in ("0", "3", "6", "12")] == [150000, 50000, 25000, 12500]
    assert installment(100000, "3") == 33334


def test_page_tokens_and_otps_are_bound() -> None:
    assert page_token("CARD1", 1, "pay") != page_token("CARD1", 2, "pay")
    assert page_token("CARD1", 1, "pay") != page_token("CARD2", 1, "pay")
    assert page_token("CARD1", 1, "pay") != page_token("CARD1", 1, "3ds")
    otp = one_time_password("CARD1", 1)
    assert len(otp) == 6
    assert otp.isdigit()
    assert otp == one_time_password("CARD1", 1)

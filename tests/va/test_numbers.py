"""VA numbers from the table the operator can change (docs/decisions.md §9.4, KASIR_VA_BANKS)."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from kasir.config import Settings, VaBankNumbers, get_settings
from tests.support.builders import make_merchant
from tests.support.wire.va import CREATE, create, create_body, post
from tests.support.wire.wallet import assert_problem


async def test_a_bank_the_operator_renumbered_numbers_by_its_new_prefixes_and_digits(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    renumbered = {"BCA": VaBankNumbers(closed="12", open="34", free_digits=4)}
    monkeypatch.setattr(get_settings(), "va_banks", renumbered)
    merchant = await make_merchant(app)
    closed = await create(client, merchant, channel="BCA-MOLA", va_number="7")
    assert closed["payment_details"]["va_number"] == "120007"
    opened = await create(client, merchant, channel="BCA", system="OPEN", amount=None, va_number="8")
    assert opened["payment_details"]["va_number"] == "340008"
    partial = await create(client, merchant, channel="BCA", system="PARTIAL", va_number="9")
    assert partial["payment_details"]["va_number"] == "120009"  # no partial prefix given: the closed one
    assert_problem(await post(client, merchant, CREATE, create_body(channel="BCA", va_number="12345")), 400, "01",
                   "1 to 4 digits")  # fmt: skip
    drawn = await create(client, merchant, channel="BCA")
    assert len(drawn["payment_details"]["va_number"]) == 6
    other = await create(client, merchant, channel="BRI", va_number="5")  # a bank not named keeps the shipped table
    assert other["payment_details"]["va_number"] == "13033" + "00000000005"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ('{"XYZ": {"closed": "12", "free_digits": 4}}', "XYZ: not a bank"),
        ('{"BCA": {"closed": "1A", "free_digits": 4}}', "closed"),
        ('{"BCA": {"closed": "12", "free_digits": 0}}', "free_digits"),
        ('{"BCA": {"closed": "12"}}', "free_digits"),
        ("not json", "va_banks"),
    ],
)
def test_a_table_that_cannot_number_stops_start_up(monkeypatch: pytest.MonkeyPatch, value: str, words: str) -> None:
    monkeypatch.setenv("KASIR_VA_BANKS", value)
    with pytest.raises(ValueError, match=words):
        Settings()

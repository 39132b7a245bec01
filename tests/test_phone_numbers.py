"""Issue 26: one phone rule for every product (docs/merchant/field-rules.md).

After removing spaces, `-`, `.` and parentheses: an optional `+` and 6 to 16 digits; within the
field's length (BNPL 16, card and wallet 32); stored and echoed exactly as sent.
"""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import FastAPI
from pydantic_core import PydanticCustomError

from kasir.bnpl.schemas import QrCheckoutRequest
from kasir.card.schemas import ChargeRequest
from kasir.kit.fields import PHONE_PATTERN, phone
from kasir.wallet.schemas import CreatePaymentRequest
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.wire.card import charge_body, post_charge
from tests.support.wire.snap import checkout_body, post_signed
from tests.support.wire.wallet import CREATE, create_body, post_wallet

ACCEPTED = [
    "0811111111111111",
    "0812-3456-7890",
    "+6281234567890",
    "+62 812 3456 7890",
    "(021) 555-0100",
    "021.555.0100",
    "123456",
    "1234567890123456",
]
REFUSED = [
    "12345",
    "1" * 17,
    "+",
    "",
    "call me",
    "0812/3456/78",
    "0812\t3456",
    "08123456\n",
    "++62812345",
    "0812+3456",
    "٠٨١٢٣٤٥٦٧٨",
]


def _digits(value: str) -> str:
    return re.sub(r"[ .()-]", "", value)


@pytest.mark.parametrize("value", ACCEPTED)
def test_accepted(value: str) -> None:
    assert phone(value) == value  # never rewritten


@pytest.mark.parametrize("value", REFUSED)
def test_refused(value: str) -> None:
    with pytest.raises(PydanticCustomError):
        phone(value)


def test_the_pattern_is_the_rule_as_written() -> None:
    # The published pattern against the sentence of the rule, computed apart, on every short string
    # of the characters that matter.
    import itertools

    def by_the_sentence(value: str) -> bool:
        return re.fullmatch(r"\+?[0-9]{6,16}", _digits(value)) is not None

    alphabet = "1+ -.()/"
    for length in range(0, 6):
        for chars in itertools.product(alphabet, repeat=length):
            value = "".join(chars) + "23456"  # reach six digits with few characters
            assert (re.fullmatch(PHONE_PATTERN, value) is not None) == by_the_sentence(value), value


@pytest.mark.parametrize(
    ("model", "path", "max_length"),
    [
        (CreatePaymentRequest, ("WalletCustomerDetails", "phone"), 32),
        (CreatePaymentRequest, ("WalletAddress", "phone"), 32),
        (ChargeRequest, ("CardCustomerDetails", "phone"), 32),
        (ChargeRequest, ("CardAddress", "phone"), 32),
        (QrCheckoutRequest, ("BnplCustomerDetails", "phone"), 16),
        (QrCheckoutRequest, ("BnplSellerAddress", "phone"), 16),
    ],
)
def test_the_rule_is_in_every_schema(model: type, path: tuple[str, str], max_length: int) -> None:
    schema = model.model_json_schema()  # type: ignore[attr-defined]
    field = schema["$defs"][path[0]]["properties"][path[1]]
    assert field["pattern"] == PHONE_PATTERN
    assert field["maxLength"] == max_length
    assert "6 to 16 digits" in field["description"]
    assert "spaces, '-', '.' and parentheses" in field["description"]


@pytest.fixture(scope="module")
async def merchant(app: FastAPI) -> builders.TestMerchant:
    return await make_merchant(app)


@pytest.mark.parametrize("number", ["0811111111111111", "0812-3456-7890", "+62 (812) 3456-7890"])
async def test_wallet_and_card_take_them(
    merchant: builders.TestMerchant, client: httpx.AsyncClient, number: str
) -> None:
    body = create_body(customer_details={"email": "siti@example.id", "full_name": "Siti", "phone": number})
    response = await post_wallet(client, merchant, CREATE, body)
    assert response.status_code == 200, response.text
    charge = charge_body()
    charge["customerDetails"]["phone"] = charge["billingAddress"]["phone"] = number
    assert (await post_charge(client, merchant, charge)).status_code == 200


@pytest.mark.parametrize("number", ["0811111111111111", "0812-3456-7890", "(021) 555-0100"])
async def test_bnpl_takes_them_within_16_characters(
    merchant: builders.TestMerchant, client: httpx.AsyncClient, number: str
) -> None:
    body = checkout_body()
    body["customerDetails"]["phone"] = body["sellers"][0]["address"]["phone"] = number
    response = await post_signed(client, merchant, "/v1.0/bnpl/qr-checkout", body)
    assert response.status_code == 200, response.text


async def test_bnpl_refuses_more_than_16_characters(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    body = checkout_body()
    body["customerDetails"]["phone"] = "+62 812 3456 7890"  # a valid number, 17 characters
    response = await post_signed(client, merchant, "/v1.0/bnpl/qr-checkout", body)
    assert response.json() == {
        "responseCode": "4009201",
        "responseMessage": "Invalid Field Format customerDetails.phone",
    }


async def test_refusals_name_the_field(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    body = create_body(customer_details={"email": "siti@example.id", "full_name": "Siti", "phone": "0812/3456/78"})
    answer = (await post_wallet(client, merchant, CREATE, body)).json()
    assert answer["response_code"] == "01"
    assert answer["response_message"].startswith("customer_details.phone must be a phone number")
    charge = charge_body()
    charge["shippingAddress"]["phone"] = "1" * 33
    response = await post_charge(client, merchant, charge)
    assert response.status_code == 400
    assert [e["field"] for e in response.json()["errors"]] == ["shippingAddress.phone"]

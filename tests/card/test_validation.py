"""Every field rule of the charge request: 400 VALIDATION_ERROR naming exactly the violated fields."""

from __future__ import annotations

import ipaddress
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st
from pydantic_core import PydanticCustomError

from kasir.card.schemas import _ip
from tests.card.helpers import charge_body, jakarta_in, post_charge, with_change
from tests.support import builders
from tests.support.builders import make_merchant

A64 = "A" * 64


@pytest.fixture(scope="module")
async def merchant(app: FastAPI) -> builders.TestMerchant:
    return await make_merchant(app)


def fields(response: httpx.Response) -> list[str]:
    body = response.json()
    assert response.status_code == 400, response.text
    assert body["statusCode"] == "400"
    assert body["statusMessage"] == "VALIDATION_ERROR"
    assert all(isinstance(e["message"], str) and e["message"] for e in body["errors"])
    return [e["field"] for e in body["errors"]]


CASES: list[tuple[str, Any, list[str]]] = [
    ("externalId", ..., ["externalId"]),
    ("externalId", "", ["externalId"]),
    ("externalId", A64 + "A", ["externalId"]),
    ("orderId", A64 + "A", ["orderId"]),
    ("orderId", 12345, ["orderId"]),
    ("currency", "USD", ["currency"]),
    ("currency", ..., ["currency"]),
    ("paymentMethod", "cash", ["paymentMethod"]),
    ("paymentChannel", "VISA", ["paymentChannel"]),
    ("paymentChannel", ..., ["paymentChannel"]),
    ("paymentMode", "close", ["paymentMode"]),
    ("paymentMode", "HALF", ["paymentMode"]),
    ("paymentDetails", ..., ["paymentDetails"]),
    ("paymentDetails.amount", 0, ["paymentDetails.amount"]),
    ("paymentDetails.amount", -5, ["paymentDetails.amount"]),
    ("paymentDetails.amount", "150000", ["paymentDetails.amount"]),
    ("paymentDetails.amount", 150000.5, ["paymentDetails.amount"]),
    ("paymentDetails.amount", 150001, ["paymentDetails.amount"]),  # not the items' total
    ("paymentDetails.isCustomerPayingFee", ..., ["paymentDetails.isCustomerPayingFee"]),
    ("paymentDetails.isCustomerPayingFee", "no", ["paymentDetails.isCustomerPayingFee"]),
    ("paymentDetails.transactionDescription", ..., ["paymentDetails.transactionDescription"]),
    ("paymentDetails.expiredTime", "tomorrow", ["paymentDetails.expiredTime"]),
    ("paymentDetails.expiredTime", "2026-01-01T10:00:00", ["paymentDetails.expiredTime"]),  # no offset
    ("itemDetails", [], ["itemDetails"]),
    ("itemDetails", ..., ["itemDetails"]),
    ("itemDetails[0].qty", 0, ["itemDetails[0].qty"]),
    ("itemDetails[0].qty", 1000, ["itemDetails[0].qty"]),
    ("itemDetails[0].qty", 3, ["paymentDetails.amount"]),
    ("itemDetails[0].qty", "2", ["itemDetails[0].qty"]),
    ("itemDetails[1].itemId", ..., ["itemDetails[1].itemId"]),
    ("itemDetails[1].name", "", ["itemDetails[1].name"]),
    ("itemDetails[0].amount", "50000", ["itemDetails[0].amount"]),
    ("itemDetails[0].amount", -1, ["itemDetails[0].amount"]),
    ("customerDetails.email", "siti-at-example", ["customerDetails.email"]),
    ("customerDetails.fullName", ..., ["customerDetails.fullName"]),
    ("customerDetails.phone", "12ab", ["customerDetails.phone"]),
    ("customerDetails.ipAddress", "300.1.1.1", ["customerDetails.ipAddress"]),
    ("billingAddress.country", "XX", ["billingAddress.country"]),
    ("billingAddress.country", "id", ["billingAddress.country"]),
    ("shippingAddress.country", "Indonesia", ["shippingAddress.country"]),
    ("shippingAddress.postalCode", ..., ["shippingAddress.postalCode"]),
    ("billingAddress.phone", "+", ["billingAddress.phone"]),
    ("billingAddress", ..., ["billingAddress"]),
    ("returnUrl", ..., ["returnUrl"]),
    ("returnUrl", "shop.example/return", ["returnUrl"]),
    ("callbackUrl", "ftp://shop.example/cb", ["callbackUrl"]),
    ("paymentOptions", {"tenor": "4"}, ["paymentOptions.tenor"]),
    ("paymentOptions", {"tenor": 3}, ["paymentOptions.tenor"]),
    ("paymentOptions", {"useRewards": "yes"}, ["paymentOptions.useRewards"]),
    ("paymentOptions", {"campaign_code": "c" * 65}, ["paymentOptions.campaign_code"]),
    ("cardDetails", ..., ["cardDetails"]),
    ("cardDetails.cardCvn", ..., ["cardDetails.cardCvn"]),
    ("cardDetails.cardNumber", "", ["cardDetails.cardNumber"]),
    ("cardDetails.cardNumber", 4811111111111114, ["cardDetails.cardNumber"]),
]


@pytest.mark.parametrize(("path", "value", "expected"), CASES, ids=[f"{c[0]}={c[1]!r}"[:60] for c in CASES])
async def test_each_rule_names_its_field(
    merchant: builders.TestMerchant, client: httpx.AsyncClient, path: str, value: Any, expected: list[str]
) -> None:
    body = with_change(charge_body(), path, value)
    response = await post_charge(client, merchant, body)
    assert sorted(fields(response)) == sorted(expected)


async def test_every_violation_is_listed_at_once(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    body = charge_body()
    body["externalId"] = ""
    body["currency"] = "USD"
    body["paymentMode"] = "SOMETIMES"
    body["itemDetails"][0]["qty"] = 0
    body["itemDetails"][1]["name"] = "x" * 129
    body["customerDetails"]["email"] = "nope"
    body["shippingAddress"]["country"] = "ZZ"
    body["paymentOptions"] = {"tenor": "24", "campaign_code": "c" * 65}
    del body["returnUrl"]
    response = await post_charge(client, merchant, body)
    assert sorted(fields(response)) == sorted(
        [
            "externalId",
            "currency",
            "paymentMode",
            "itemDetails[0].qty",
            "itemDetails[1].name",
            "customerDetails.email",
            "shippingAddress.country",
            "paymentOptions.tenor",
            "paymentOptions.campaign_code",
            "returnUrl",
        ]
    )
    by_field = {e["field"]: e["message"] for e in response.json()["errors"]}
    assert by_field["returnUrl"] == "is required"
    assert by_field["itemDetails[0].qty"] == "Input should be greater than or equal to 1"


async def test_amount_must_equal_the_items_total(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    response = await post_charge(client, merchant, with_change(charge_body(), "paymentDetails.amount", 100000))
    [error] = response.json()["errors"]
    assert error == {
        "field": "paymentDetails.amount",
        "message": "must equal the sum of itemDetails amount × qty (150000)",
    }


async def test_expired_time_must_be_in_the_future(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    response = await post_charge(client, merchant, charge_body(expired_time=jakarta_in(-60)))
    assert fields(response) == ["paymentDetails.expiredTime"]


async def test_accepted_edges(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    """qty 999, 64-character ids, alpha-3 country, YY expiry, tenor 12, campaign_code snake_case: all fine."""
    body = charge_body(tenor="12")
    body["externalId"], body["orderId"] = "E" + A64[1:], "O" + A64[1:]
    body["itemDetails"] = [{"itemId": "SKU-9", "name": "Pin", "amount": 150, "qty": 999}]
    body["paymentDetails"]["amount"] = 149850
    body["billingAddress"]["country"] = "IDN"
    body["cardDetails"]["cardExpiredYear"] = body["cardDetails"]["cardExpiredYear"][2:]
    body["cardDetails"]["cardHolderName"] = "budi santoso"
    response = await post_charge(client, merchant, body)
    assert response.status_code == 200, response.text


async def test_body_that_is_not_json_or_not_an_object(
    merchant: builders.TestMerchant, client: httpx.AsyncClient
) -> None:
    assert fields(await post_charge(client, merchant, "{not json")) == ["body"]
    assert fields(await post_charge(client, merchant, "[1, 2]")) == ["body"]


async def test_idempotency_key_too_long(merchant: builders.TestMerchant, client: httpx.AsyncClient) -> None:
    response = await post_charge(client, merchant, charge_body(), key="k" * 256)
    assert fields(response) == ["X-Idempotency-Key"]


@given(
    st.one_of(
        st.from_regex(r"\A[0-9]{1,4}(\.[0-9]{1,4}){2,4}\Z"),
        st.ip_addresses(v=4).map(str),
        st.text(alphabet="0123456789.:abcdef٣ ", max_size=20),
    )
)
def test_the_quick_ipv4_check_agrees_with_ipaddress(value: str) -> None:
    # customerDetails.ipAddress takes dotted quads by a regular expression, and everything else to
    # ipaddress: both ways must accept and refuse exactly what ipaddress alone does.
    try:
        ipaddress.ip_address(value)
        valid = True
    except ValueError:
        valid = False
    try:
        _ip(value)
        accepted = True
    except PydanticCustomError:
        accepted = False
    assert accepted == valid

"""Payment calculation (service code 90): validation of every field, options per pricing table."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from kasir.bnpl.pricing import Plan
from kasir.bnpl.service import bnpl_service
from kasir.config import Settings, configure
from tests.support.builders import make_merchant
from tests.support.wire.snap import calculation_body, calculation_item, post_signed

CALC = "/v1.0/bnpl/payment-calculation"


def money(value: str) -> dict[str, str]:
    return {"value": value, "currency": "IDR"}


async def test_options_for_the_default_table(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    items = [
        calculation_item(amount="40000.00", qty=2),
        calculation_item(amount="20000.00", qty=1, item_id="shippingfee", category="FEES"),
    ]
    response = await post_signed(client, merchant, CALC, calculation_body("100000.00", items))
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["responseCode"] == "2009000"
    assert data["responseMessage"] == "Successful"
    assert [p["id"] for p in data["payments"]] == ["3_months", "6_months", "12_months"]
    three = data["payments"][0]
    assert three == {
        "id": "3_months",
        "tenure": 3,
        "tenureTimeUnit": "MONTH",
        "paymentType": three["paymentType"],
        "rate": 0,
        "amount": money("101500.00"),
        "installmentAmount": money("101502.00"),
        "monthlyInstallment": money("33834.00"),
        "totalInterest": money("2.00"),
        "provision": money("1500.00"),
        "totalTransactionAmount": money("100000.00"),
    }
    assert isinstance(three["paymentType"], str)
    assert data["payments"][1]["monthlyInstallment"] == money("18947.00")


async def test_per_merchant_pricing_table(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await bnpl_service.set_pricing(session, merchant.id, [Plan(tenure=4, rate=1, provision=Decimal("0"))])
    response = await post_signed(client, merchant, CALC, calculation_body("100000.00", [calculation_item(qty=2)]))
    assert response.status_code == 200, response.text
    [only] = response.json()["payments"]
    # 100000 × (1 + 1% × 4) / 4 = 26000
    assert only["id"] == "4_months"
    assert only["monthlyInstallment"] == money("26000.00")
    assert only["totalInterest"] == money("4000.00")
    assert only["provision"] == money("0.00")
    other = await make_merchant(app)
    default = await post_signed(client, other, CALC, calculation_body())
    assert len(default.json()["payments"]) == 3


async def test_a_pricing_table_set_again_replaces_the_one_before(app: FastAPI, client: httpx.AsyncClient) -> None:
    """One row per merchant: a second table replaces the first, and None goes back to the shipped default."""
    merchant = await make_merchant(app)

    async def tenures() -> list[int]:
        response = await post_signed(client, merchant, CALC, calculation_body())
        assert response.status_code == 200, response.text
        return [option["tenure"] for option in response.json()["payments"]]

    shipped = await tenures()
    for plans, expected in (
        ([Plan(tenure=4, rate=1, provision=Decimal("0"))], [4]),
        ([Plan(tenure=2, rate=1, provision=Decimal("0")), Plan(tenure=5, rate=1, provision=Decimal("0"))], [2, 5]),
        (None, shipped),
    ):
        async with app.state.database.unit_of_work() as session:
            await bnpl_service.set_pricing(session, merchant.id, plans)
        assert await tenures() == expected
    assert len(shipped) == 3


async def test_amount_must_equal_items_total(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    response = await post_signed(client, merchant, CALC, calculation_body("100000.01"))
    assert response.status_code == 400
    assert response.json() == {"responseCode": "4009001", "responseMessage": "Invalid Field Format amount.value"}


async def test_qty_may_be_sent_as_number_or_digit_string(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    response = await post_signed(client, merchant, CALC, calculation_body("100000.00", [calculation_item(qty="2")]))
    assert response.status_code == 200, response.text


def _set(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    body = copy.deepcopy(body)
    target: Any = body
    parts = path.replace("[0]", ".0").split(".")
    for part in parts[:-1]:
        target = target[int(part)] if part.isdigit() else target[part]
    last = parts[-1]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return body


_DELETE = object()

# (field path, bad value, expected case, field named in the message)
INVALID = [
    ("amount.value", "100000", "01", "amount.value"),
    ("amount.value", 100000, "01", "amount.value"),
    ("amount.value", "1" * 17 + ".00", "01", "amount.value"),
    # Issue 26: 16,2 is DECIMAL(16,2): 16 digits in all, so at most 14 before the point.
    ("itemDetails[0].amount.value", "1" * 15 + ".00", "01", "itemDetails[0].amount.value"),
    ("itemDetails[0].amount.value", "1" * 16 + ".00", "01", "itemDetails[0].amount.value"),
    ("itemDetails[0].amount.value", "01.00", "01", "itemDetails[0].amount.value"),
    ("itemDetails[0].amount.value", "1.00\n", "01", "itemDetails[0].amount.value"),
    ("amount.value", _DELETE, "02", "amount.value"),
    ("amount.currency", "USD", "01", "amount.currency"),
    ("amount.currency", _DELETE, "02", "amount.currency"),
    ("amount", _DELETE, "02", "amount"),
    ("itemDetails", _DELETE, "02", "itemDetails"),
    ("itemDetails", [], "01", "itemDetails"),
    ("itemDetails", "x", "01", "itemDetails"),
    ("itemDetails[0].itemId", "x" * 65, "01", "itemDetails[0].itemId"),
    ("itemDetails[0].itemId", "", "02", "itemDetails[0].itemId"),
    ("itemDetails[0].itemId", "ShippingFee", "01", "itemDetails[0].itemId"),
    ("itemDetails[0].itemId", 12, "01", "itemDetails[0].itemId"),
    ("itemDetails[0].name", "n" * 129, "01", "itemDetails[0].name"),
    ("itemDetails[0].name", _DELETE, "02", "itemDetails[0].name"),
    ("itemDetails[0].amount.value", "50000.0", "01", "itemDetails[0].amount.value"),
    ("itemDetails[0].amount.currency", "idr", "01", "itemDetails[0].amount.currency"),
    ("itemDetails[0].url", "shop.example/x", "01", "itemDetails[0].url"),
    ("itemDetails[0].url", "https://shop.example/" + "u" * 240, "01", "itemDetails[0].url"),
    ("itemDetails[0].url", _DELETE, "02", "itemDetails[0].url"),
    ("itemDetails[0].imageUrl", "ftp://x", "01", "itemDetails[0].imageUrl"),
    ("itemDetails[0].category", "ZZZZ", "01", "itemDetails[0].category"),
    ("itemDetails[0].category", _DELETE, "02", "itemDetails[0].category"),
    ("itemDetails[0].qty", 0, "01", "itemDetails[0].qty"),
    ("itemDetails[0].qty", 100_000_000, "01", "itemDetails[0].qty"),
    ("itemDetails[0].qty", 1.5, "01", "itemDetails[0].qty"),
    ("itemDetails[0].qty", True, "01", "itemDetails[0].qty"),
    ("itemDetails[0].qty", _DELETE, "02", "itemDetails[0].qty"),
    ("itemDetails[0].parentType", "BUYER", "01", "itemDetails[0].parentType"),
    ("itemDetails[0].parentType", _DELETE, "02", "itemDetails[0].parentType"),
    ("itemDetails[0].parentId", _DELETE, "02", "itemDetails[0].parentId"),
    ("itemDetails[0].parentId", " ", "02", "itemDetails[0].parentId"),
]


@pytest.mark.parametrize(("path", "value", "case", "field"), INVALID)
async def test_each_invalid_field(
    app: FastAPI, client: httpx.AsyncClient, path: str, value: Any, case: str, field: str
) -> None:
    merchant = await make_merchant(app)
    body = _set(calculation_body(), path, value)
    response = await post_signed(client, merchant, CALC, body)
    assert response.status_code == 400, response.text
    kind = "Invalid Field Format" if case == "01" else "Invalid Mandatory Field"
    assert response.json() == {"responseCode": f"40090{case}", "responseMessage": f"{kind} {field}"}


async def test_body_must_be_an_object(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    response = await post_signed(client, merchant, CALC, "[1, 2]")
    assert response.status_code == 400
    assert response.json()["responseCode"] == "4009001"


async def test_configured_category_table(app: FastAPI, client: httpx.AsyncClient, settings: Settings) -> None:
    """KASIR_BNPL_CATEGORIES, read from the environment (tests/test_settings.py) into the settings."""
    merchant = await make_merchant(app)
    configure(settings.model_copy(update={"bnpl_categories": ["ABCD", "WXYZ"]}))
    try:
        custom = await post_signed(
            client, merchant, CALC, calculation_body(items=[calculation_item(category="ABCD", qty=2)])
        )
        shipped = await post_signed(client, merchant, CALC, calculation_body(items=[calculation_item(qty=2)]))
    finally:
        configure(settings)
    assert custom.status_code == 200, custom.text
    assert shipped.json()["responseCode"] == "4009001"


async def test_same_options_whatever_the_item_order(app: FastAPI, client: httpx.AsyncClient) -> None:
    import itertools

    merchant = await make_merchant(app)
    items = [
        calculation_item(amount="12345.67", qty=3, item_id="A"),
        calculation_item(amount="999.99", qty=7, item_id="B"),
        calculation_item(amount="15000.00", qty=1, item_id="shippingfee", category="FEES"),
    ]
    total = "59036.94"  # 37037.01 + 6999.93 + 15000.00
    answers = []
    for order in itertools.permutations(items):
        response = await post_signed(client, merchant, CALC, calculation_body(total, list(order)))
        assert response.status_code == 200, response.text
        answers.append(response.json()["payments"])
    assert all(answer == answers[0] for answer in answers)
    assert answers[0][0]["totalTransactionAmount"] == money(total)


async def test_more_than_100_items_are_refused(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = calculation_body()
    body["itemDetails"] = body["itemDetails"] * 101
    response = await post_signed(client, merchant, CALC, body)
    assert response.status_code == 400, response.text
    assert response.json() == {"responseCode": "4009001", "responseMessage": "Invalid Field Format itemDetails"}


@pytest.mark.parametrize("value", ["99999999999999.99", "10000000000000.00", "0.01"])
async def test_amounts_of_up_to_16_digits_with_2_decimals_are_accepted(
    app: FastAPI, client: httpx.AsyncClient, value: str
) -> None:
    # Issue 26: the largest DECIMAL(16,2) value (14 digits before the point) is taken, and answered as sent.
    merchant = await make_merchant(app)
    body = calculation_body(value, [calculation_item(amount=value, qty=1)])
    response = await post_signed(client, merchant, CALC, body)
    assert response.status_code == 200, response.text
    assert {p["totalTransactionAmount"]["value"] for p in response.json()["payments"]} == {value}


def test_the_amount_rule_is_the_schemas_pattern() -> None:
    import re

    from kasir.bnpl.schemas import PaymentCalculationRequest, QrCheckoutRequest
    from kasir.kit.money import parse_snap_amount

    for model in (PaymentCalculationRequest, QrCheckoutRequest):
        value = model.model_json_schema()["$defs"]["BnplMoney"]["properties"]["value"]
        assert "16 digits in all, 2 of them decimals" in value["description"]
        pattern = value["pattern"]
        for sample in ("0.00", "0.01", "10000.00", "9" * 14 + ".99", "1" * 15 + ".00", "01.00", "1.0", "1", "-1.00"):
            try:
                parse_snap_amount(sample)
                accepted = True
            except ValueError:
                accepted = False
            assert (re.fullmatch(pattern, sample) is not None) == accepted, sample
            assert accepted == (sample in ("0.00", "0.01", "10000.00", "9" * 14 + ".99")), sample

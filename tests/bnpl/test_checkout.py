from __future__ import annotations

import asyncio
import copy
import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from kasir.bnpl.repository import bnpl_repository
from kasir.kit.clock import parse_aware
from tests.support.builders import make_merchant
from tests.support.forms import page_forms, post_form
from tests.support.wire.snap import access_token, checkout_body, item, post_signed

CHECKOUT = "/v1.0/bnpl/qr-checkout"


@pytest.mark.parametrize("version", ["v1.0", "v1.1"])
async def test_checkout_answers_every_response_field(app: FastAPI, client: httpx.AsyncClient, version: str) -> None:
    merchant = await make_merchant(app)
    body = checkout_body(partner_reference_no="ORDER-1")
    response = await post_signed(client, merchant, f"/{version}/bnpl/qr-checkout", body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["responseCode"] == "2009200"
    assert data["responseMessage"] == "Successful"
    assert data["partnerReferenceNo"] == "ORDER-1"
    assert 0 < len(data["referenceNo"]) <= 64
    assert 0 < len(data["paymentChannel"]) <= 30
    assert data["paymentDetails"] == {
        "amount": {"value": "100000.00", "currency": "IDR"},
        "totalAmount": {"value": "100000.00", "currency": "IDR"},
    }
    assert data["qrContent"] == f"http://kasir.test/bnpl/pages/{data['referenceNo']}"
    assert data["qrUrl"].startswith("http://kasir.test/")
    assert data["latestTransactionStatus"] == "01"
    assert data["transactionStatusDesc"] == "Initiated"
    created, valid = parse_aware(data["createdAt"]), parse_aware(data["validityPeriod"])
    assert len(data["createdAt"]) <= 25
    assert data["createdAt"].endswith("+07:00")
    assert valid - created == timedelta(hours=24)

    image = await client.get(data["qrUrl"].removeprefix("http://kasir.test"))
    assert image.status_code == 200
    assert image.headers["content-type"] == "image/png"
    assert image.content.startswith(b"\x89PNG\r\n\x1a\n")


async def test_checkout_with_token_symmetric(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    token = await access_token(client, merchant)
    response = await post_signed(client, merchant, CHECKOUT, checkout_body(), token=token)
    assert response.status_code == 200, response.text
    assert response.json()["responseCode"] == "2009200"


async def test_duplicate_partner_reference_is_4099201(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    other = await make_merchant(app)
    assert (
        await post_signed(client, merchant, CHECKOUT, checkout_body(partner_reference_no="DUP-1"))
    ).status_code == 200
    again = await post_signed(client, merchant, CHECKOUT, checkout_body(partner_reference_no="DUP-1"))
    assert again.status_code == 409
    assert again.json()["responseCode"] == "4099201"
    # unique per merchant: another merchant may use it
    assert (await post_signed(client, other, CHECKOUT, checkout_body(partner_reference_no="DUP-1"))).status_code == 200


async def test_concurrent_checkouts_with_one_partner_reference(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    responses = await asyncio.gather(
        *(post_signed(client, merchant, CHECKOUT, checkout_body(partner_reference_no="RACE-1")) for _ in range(3))
    )
    assert sorted(r.status_code for r in responses) == [200, 409, 409]
    assert sorted(r.json()["responseCode"] for r in responses) == ["2009200", "4099201", "4099201"]


async def test_checkout_stores_what_it_answers(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = checkout_body("http://127.0.0.1:9/stored", total="123456.78", items=[item("123456.78", 1)])
    body["additionalInfo"] = {"note": "Kopi ☕"}
    response = await post_signed(client, merchant, CHECKOUT, body, channel="WEB")
    assert response.status_code == 200, response.text
    data = response.json()
    async with app.state.database.unit_of_work(read_only=True) as session:
        tx = await bnpl_repository.row(session, data["referenceNo"])
    assert tx is not None
    assert (tx.merchant_id, tx.partner_reference_no) == (merchant.id, body["partnerReferenceNo"])
    assert (tx.amount_cents, tx.currency, tx.channel_id) == (12345678, "IDR", "WEB")
    assert (tx.status, tx.status_desc, tx.tenure, tx.paid_at) == ("01", "Initiated", None, None)
    assert tx.callback_url == "http://127.0.0.1:9/stored"
    assert tx.updated_at == tx.created_at
    assert tx.created_at.replace(microsecond=0) == parse_aware(data["createdAt"])
    assert tx.expires_at.replace(microsecond=0) == parse_aware(data["validityPeriod"])
    assert tx.expires_at - tx.created_at == timedelta(hours=24)
    details = json.loads(tx.details)
    assert details["itemDetails"] == body["itemDetails"]
    assert details["customerDetails"] == body["customerDetails"]
    assert details["sellers"][0]["address"]["city"] == "Jakarta"
    assert details["additionalInfo"] == {"note": "Kopi ☕"}


async def test_amount_must_equal_items_total(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = checkout_body(
        total="100000.00", items=[item("50000.00", 1), item("25000.00", 1, item_id="shippingfee", category="FEES")]
    )
    response = await post_signed(client, merchant, CHECKOUT, body)
    assert response.status_code == 400
    assert response.json() == {
        "responseCode": "4009201",
        "responseMessage": "Invalid Field Format paymentDetails.amount.value",
    }


_DELETE = object()


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


INVALID = [
    ("partnerReferenceNo", "p" * 65, "01"),
    ("partnerReferenceNo", _DELETE, "02"),
    ("partnerReferenceNo", "", "02"),
    ("partnerReferenceNo", 123, "01"),
    ("paymentDetails", _DELETE, "02"),
    ("paymentDetails.amount.value", "100000", "01"),
    ("paymentDetails.amount.value", _DELETE, "02"),
    ("paymentDetails.amount.currency", "USD", "01"),
    ("itemDetails", _DELETE, "02"),
    ("itemDetails", [], "01"),
    ("itemDetails[0].itemId", "i" * 65, "01"),
    ("itemDetails[0].itemId", "TAXFEE", "01"),
    ("itemDetails[0].name", "n" * 129, "01"),
    ("itemDetails[0].amount.value", "50000", "01"),
    ("itemDetails[0].amount.currency", "SGD", "01"),
    ("itemDetails[0].category", "ELECTRONICS", "01"),
    ("itemDetails[0].category", "NOPE", "01"),
    ("itemDetails[0].qty", "2", "01"),
    ("itemDetails[0].qty", 0, "01"),
    ("itemDetails[0].qty", _DELETE, "02"),
    ("customerDetails", _DELETE, "02"),
    ("customerDetails.firstName", "f" * 17, "01"),
    ("customerDetails.firstName", _DELETE, "02"),
    ("customerDetails.lastName", "l" * 17, "01"),
    ("customerDetails.email", "not-an-email", "01"),
    ("customerDetails.email", "a" * 60 + "@x.id", "01"),
    ("customerDetails.email", _DELETE, "02"),
    ("customerDetails.phone", "0812/3456/78", "01"),  # issue 26: spaces - . ( ) only
    ("customerDetails.phone", "1" * 17, "01"),
    ("customerDetails.phone", _DELETE, "02"),
    ("sellers", "x", "01"),
    ("sellers[0].id", "s" * 17, "01"),
    ("sellers[0].name", "s" * 17, "01"),
    ("sellers[0].url", "not a url", "01"),
    ("sellers[0].sellerIdNumber", "9" * 33, "01"),
    ("sellers[0].email", "nope", "01"),
    ("sellers[0].address.firstName", _DELETE, "02"),
    ("sellers[0].address.firstName", "f" * 17, "01"),
    ("sellers[0].address.lastName", "l" * 17, "01"),
    ("sellers[0].address.address", _DELETE, "02"),
    ("sellers[0].address.address", "a" * 257, "01"),
    ("sellers[0].address.city", _DELETE, "02"),
    ("sellers[0].address.city", "c" * 33, "01"),
    ("sellers[0].address.postalCode", _DELETE, "02"),
    ("sellers[0].address.postalCode", "123456789", "01"),
    ("sellers[0].address.phone", _DELETE, "02"),
    ("sellers[0].address.countryCode", "Indonesia", "01"),
    ("sellers[0].address.countryCode", _DELETE, "02"),
    ("callbackUrl", _DELETE, "02"),
    ("callbackUrl", "example.com/cb", "01"),
]


@pytest.mark.parametrize(("path", "value", "case"), INVALID)
async def test_each_invalid_field(app: FastAPI, client: httpx.AsyncClient, path: str, value: Any, case: str) -> None:
    merchant = await make_merchant(app)
    response = await post_signed(client, merchant, CHECKOUT, _set(checkout_body(), path, value))
    assert response.status_code == 400, response.text
    kind = "Invalid Field Format" if case == "01" else "Invalid Mandatory Field"
    assert response.json() == {"responseCode": f"40092{case}", "responseMessage": f"{kind} {path}"}


async def test_optional_parts_may_be_left_out(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = checkout_body()
    del body["sellers"]
    del body["customerDetails"]["lastName"]
    assert (await post_signed(client, merchant, CHECKOUT, body)).status_code == 200
    body = checkout_body()
    body["sellers"] = [{"id": "S1"}, {"name": "Two", "email": "two@shop.id"}]
    assert (await post_signed(client, merchant, CHECKOUT, body)).status_code == 200


async def test_callback_url_must_be_https_in_production(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kasir.config import get_settings

    merchant = await make_merchant(app)
    monkeypatch.setattr(get_settings(), "env", "production")
    response = await post_signed(client, merchant, CHECKOUT, checkout_body("http://127.0.0.1:9/cb"))
    assert response.status_code == 400
    assert response.json()["responseCode"] == "4009201"


async def test_unknown_transactions_and_bad_tenure_values(app: FastAPI, client: httpx.AsyncClient) -> None:
    assert (await client.get("/bnpl/qr/BNPLNOSUCH.png")).status_code == 404
    assert (await client.get("/bnpl/pages/BNPLNOSUCH")).status_code == 404
    assert (await client.post("/bnpl/pages/BNPLNOSUCH/approve", data={"tenure": "3"})).status_code == 404
    merchant = await make_merchant(app)
    data = (await post_signed(client, merchant, CHECKOUT, checkout_body())).json()
    forms = await page_forms(client, f"/bnpl/pages/{data['referenceNo']}")
    assert (await post_form(client, forms["approve-form"], tenure="three")).status_code == 400
    no_tenure = {"csrf": forms["approve-form"].fields["csrf"]}
    assert (await client.post(forms["approve-form"].action, data=no_tenure)).status_code == 400


@pytest.mark.parametrize("path", ["itemDetails", "sellers"])
async def test_a_list_of_more_than_100_is_refused(app: FastAPI, client: httpx.AsyncClient, path: str) -> None:
    merchant = await make_merchant(app)
    body = checkout_body()
    body["sellers"] = [{"id": "S1"}]
    body[path] = body[path] * 101
    response = await post_signed(client, merchant, CHECKOUT, body)
    assert response.status_code == 400, response.text
    assert response.json() == {"responseCode": "4009201", "responseMessage": f"Invalid Field Format {path}"}

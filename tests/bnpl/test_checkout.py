from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI

from kasir.kit.clock import parse_aware
from tests.bnpl.helpers import access_token, checkout_body, item, post_signed
from tests.support.builders import make_merchant

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

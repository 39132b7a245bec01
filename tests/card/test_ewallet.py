"""`paymentMethod` ewallet (docs/decisions.md §7): the charge creates a wallet transaction; wallet callbacks follow."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from kasir.config import get_settings
from tests.support.builders import make_merchant
from tests.support.forms import submit
from tests.support.receiver import CallbackReceiver
from tests.support.wire import x_req_signature
from tests.support.wire.callbacks import callback_signature
from tests.support.wire.card import charge_body, post_charge


def wallet_body(channel: str = "DANA", **kwargs: Any) -> dict[str, Any]:
    body = charge_body(mode="OPEN", channel=channel, **kwargs)
    body["paymentMethod"] = "ewallet"
    return body


async def test_ewallet_charge_links_to_the_wallet_checkout(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    body = wallet_body(callback_url=receiver.url("/ewallet/cb"))
    response = await post_charge(client, merchant, body)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["paymentStatus"] == "PENDING"
    assert data["externalId"] == body["externalId"]
    assert data["link"] == f"{get_settings().public_url}/ewallet/pages/{data['transactionId']}"
    path = data["link"].removeprefix(get_settings().public_url)
    assert (await client.get(path)).status_code == 200
    assert (await submit(client, path, "pay-form")).status_code == 303

    [callback] = await receiver.wait_for(1, path="/ewallet/cb")
    payload = callback.json()
    assert payload["transaction_id"] == data["transactionId"]
    assert payload["order_id"] == body["orderId"]
    assert payload["payment_method"] == "WALLET"
    assert payload["payment_channel"] == "DANA"
    signature = callback_signature(
        data["transactionId"], x_req_signature(merchant.credentials.hash_key, body["externalId"], body["orderId"])
    )
    assert callback.headers["svc-signature"] == signature
    assert callback.query["svc-signature"] == signature  # a wallet callback, not a payment-page one

    again = await post_charge(client, merchant, {**charge_body(), "externalId": body["externalId"]})
    assert again.status_code == 409
    assert again.json()["errors"][0]["field"] == "externalId"
    again = await post_charge(client, merchant, {**charge_body(), "orderId": body["orderId"]})
    assert again.json()["errors"][0]["field"] == "orderId"


async def test_ewallet_refusals_name_the_card_request_fields(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)  # no default callback URL
    for body, field in (
        (wallet_body(channel="QRIS", callback_url="https://shop.example/cb"), "paymentChannel"),
        (wallet_body(channel="BCACC", callback_url="https://shop.example/cb"), "paymentChannel"),
        ({**wallet_body(callback_url="https://shop.example/cb"), "orderId": "ORDER_1"}, "orderId"),
        (wallet_body(), "callbackUrl"),  # a wallet transaction needs somewhere to send its callback
    ):
        response = await post_charge(client, merchant, body)
        assert response.status_code == 400, response.text
        assert response.json()["statusMessage"] == "VALIDATION_ERROR"
        assert [e["field"] for e in response.json()["errors"]] == [field]

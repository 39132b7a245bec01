"""The payment-link API as a merchant calls it (docs/decisions.md §10): bodies, headers computed here,
callbacks checked here."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.builders import TestMerchant
from tests.support.receiver import ReceivedRequest
from tests.support.wire import auth, compact, x_req_signature
from tests.support.wire.callbacks import callback_signature, sub_merchant_signature
from tests.support.wire.wallet import unique, wallet_headers

CREATE = "/payment-page/payment"


def create_body(
    callback_url: str | None = "http://127.0.0.1:9/cb",
    *,
    channels: list[dict[str, Any]] | None = None,
    amount: Any = 50_000,
    **extra: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "external_id": unique("ppl-ext"),
        "order_id": unique("ppl")[:25],
        "amount": amount,
        "description": "Two coffees",
        "customer_details": {
            "full_name": "Budi Santoso",
            "email": "budi@example.id",
            "phone": "081234567890",
            "address": "Jl. Sudirman 1",
        },
        "selected_channels": channels if channels is not None else [{"channel": "CARD", "acq": "BCACC"}],
    }
    if callback_url is not None:
        body["callback_url"] = callback_url
    body.update(extra)
    return body


async def post(
    client: httpx.AsyncClient, merchant: TestMerchant, body: dict[str, Any], **headers: str
) -> httpx.Response:
    return await client.post(
        CREATE, content=compact(body).encode(), headers={**wallet_headers(merchant, body), **headers}
    )


async def create(client: httpx.AsyncClient, merchant: TestMerchant, *args: Any, **kwargs: Any) -> dict[str, Any]:
    response = await post(client, merchant, create_body(*args, **kwargs))
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["response_code"], body["response_message"]) == ("00", "Success")
    return dict(body["data"])


async def read(client: httpx.AsyncClient, merchant: TestMerchant, transaction_id: str) -> httpx.Response:
    return await client.get(f"{CREATE}/{transaction_id}", headers={"Authorization": auth(merchant)})


def check_callback(request: ReceivedRequest, merchant: TestMerchant, link: dict[str, Any]) -> dict[str, Any]:
    """The callback's svc-signature, computed here from §3.5 with the link's ids; its payload."""
    x_req = x_req_signature(merchant.credentials.hash_key, link["external_id"], link["order_id"])
    payload = request.json()
    sub = payload.get("sub_merchant_id")
    expected = (
        sub_merchant_signature(link["transaction_id"], x_req, sub)
        if sub
        else callback_signature(link["transaction_id"], x_req)
    )
    assert request.headers["svc-signature"] == expected
    assert payload["transaction_id"] == link["transaction_id"]
    return dict(payload)

"""The VA API as a merchant calls it (docs/decisions.md §9): bodies, headers computed here, callbacks checked here."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.builders import TestMerchant
from tests.support.receiver import ReceivedRequest
from tests.support.wire import compact, x_req_signature
from tests.support.wire.callbacks import callback_signature, sub_merchant_signature
from tests.support.wire.wallet import unique, wallet_headers

CREATE = "/va"
INQUIRY = "/va/inquiry"
CANCEL = "/va/cancel"
DUMMY = "/va/dummy-payment"


def create_body(
    callback_url: str | None = "http://127.0.0.1:9/cb",
    *,
    channel: str = "BCA",
    system: str | None = "CLOSED",
    amount: float | None = 50_000,  # a float: to see one refused, or taken when its fraction is zero
    multi_use: bool | None = None,
    **details: Any,
) -> dict[str, Any]:
    payment_details: dict[str, Any] = {"billing_name": "Toko Kasir", "transaction_description": "Order"}
    if system is not None:
        payment_details["payment_system"] = system
    if amount is not None:
        payment_details["amount"] = amount
    if multi_use is not None:
        payment_details["is_multi_use"] = multi_use
    payment_details.update(details)
    body: dict[str, Any] = {
        "external_id": unique("va-ext"),
        "order_id": unique("va-ord")[:25],
        "currency": "IDR",
        "payment_method": "bank_transfer",
        "payment_channel": channel,
        "payment_details": payment_details,
        "customer_details": {"email": "budi@example.id", "full_name": "Budi", "phone": "081234567890"},
    }
    if callback_url is not None:
        body["callback_url"] = callback_url
    return body


async def post(
    client: httpx.AsyncClient, merchant: TestMerchant, path: str, body: dict[str, Any], **headers: str
) -> httpx.Response:
    return await client.post(
        path, content=compact(body).encode(), headers={**wallet_headers(merchant, body), **headers}
    )


async def create(client: httpx.AsyncClient, merchant: TestMerchant, *args: Any, **kwargs: Any) -> dict[str, Any]:
    response = await post(client, merchant, CREATE, create_body(*args, **kwargs))
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["response_code"], body["response_message"]) == ("00", "Success")
    return dict(body["data"])


def ref(va: dict[str, Any]) -> dict[str, Any]:
    return {"transaction_id": va["transaction_id"], "external_id": va["external_id"], "order_id": va["order_id"]}


async def pay(
    client: httpx.AsyncClient, merchant: TestMerchant, va: dict[str, Any], amount: int | None = None, **headers: str
) -> httpx.Response:
    body: dict[str, Any] = {**ref(va), "payment_method": "bank_transfer", "payment_channel": va["payment_channel"]}
    if amount is not None:
        body["amount"] = amount
    return await post(client, merchant, DUMMY, body, **headers)


async def inquire(client: httpx.AsyncClient, merchant: TestMerchant, va: dict[str, Any]) -> dict[str, Any]:
    response = await post(client, merchant, INQUIRY, ref(va))
    assert response.status_code == 200, response.text
    return dict(response.json()["data"])


async def cancel(
    client: httpx.AsyncClient, merchant: TestMerchant, va: dict[str, Any], **headers: str
) -> httpx.Response:
    return await post(client, merchant, CANCEL, ref(va), **headers)


def check_callback(
    request: ReceivedRequest, merchant: TestMerchant, va: dict[str, Any], sub_merchant_id: str | None = None
) -> dict[str, Any]:
    """§9.7, computed here: svc-signature in the header and the query (with the sub-merchant, its own formula)."""
    x_req = x_req_signature(merchant.credentials.hash_key, va["external_id"], va["order_id"])
    if sub_merchant_id is None:
        expected = callback_signature(va["transaction_id"], x_req)
    else:
        expected = sub_merchant_signature(va["transaction_id"], x_req, sub_merchant_id)
    assert request.method == "POST"
    assert request.headers["svc-signature"] == expected
    assert request.query["svc-signature"] == expected
    return dict(request.json())

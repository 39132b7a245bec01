"""The wallet API's wire format: Basic (§3.4) + x-req-signature (§3.3), snake_case bodies, its callback."""

from __future__ import annotations

import itertools
import secrets
from datetime import datetime
from typing import Any

import httpx

from kasir.kit.clock import JAKARTA
from tests.support.builders import TestMerchant
from tests.support.receiver import ReceivedRequest
from tests.support.wire import auth, compact, x_req_signature
from tests.support.wire.callbacks import callback_signature

CREATE = "/ewallet/v2/create-payment"
CREATE_QR = "/ewallet/v2/create-qr"
INQUIRY = "/ewallet/v2/inquiry"
REFUND = "/ewallet/v2/refund"
VOID = "/ewallet/v2/void"
DUMMY = "/ewallet/v2/dummy-payment"
CHANNELS = ("OVO", "DANA", "SHOPEEPAY", "LINKAJA", "VIRGO", "QRIS")

_serial = itertools.count(1)


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_serial)}-{secrets.token_hex(5)}"


def item(
    amount: int = 50_000, qty: int = 2, item_id: str = "SKU-1", name: str = "Kopi Susu", **extra: Any
) -> dict[str, Any]:
    return {"item_id": item_id, "name": name, "amount": amount, "qty": qty, **extra}


def address(**extra: Any) -> dict[str, Any]:
    return {
        "full_name": "Siti Rahayu",
        "phone": "081234567890",
        "address": "Jl. Sudirman 1",
        "city": "Jakarta",
        "postal_code": "10220",
        "country": "ID",
        **extra,
    }


def create_body(
    callback_url: str | None = "http://127.0.0.1:9/cb",
    *,
    channel: str = "DANA",
    amount: int = 100_000,
    items: list[dict[str, Any]] | None = None,
    expired_time: datetime | None = None,
    **extra: Any,
) -> dict[str, Any]:
    payment_details: dict[str, Any] = {"amount": amount, "transaction_description": "Order at Toko Maju"}
    if expired_time is not None:
        payment_details["expired_time"] = expired_time.astimezone(JAKARTA).isoformat(timespec="seconds")
    body: dict[str, Any] = {
        "external_id": unique("EXT"),
        "order_id": unique("ORDER"),
        "currency": "IDR",
        "payment_method": "wallet",
        "payment_channel": channel,
        "payment_details": payment_details,
        "customer_details": {"email": "siti@example.id", "full_name": "Siti Rahayu", "phone": "081234567890"},
        "item_details": items or [item()],
        "wallet_details": {"id": "081234567890", "id_type": "HP"},
    }
    if callback_url is not None:
        body["callback_url"] = callback_url
    body.update(extra)
    return body


def wallet_headers(
    merchant: TestMerchant,
    body: dict[str, Any],
    *,
    version: str | None = "v3",
    three_part: bool = False,
    signature: str | None = None,
    hash_key: str | None = None,
    secret: str | None = None,
    sub_merchant_id: str | None = None,
    response_type: str | None = None,
) -> dict[str, str]:
    """Basic and x-req-signature over the body's external_id and order_id ("" where one is missing), as the
    wallet API and the provider SDK's card dialect (its getRequestHeaders) both send them."""
    creds = merchant.credentials
    headers = {
        "Content-Type": "application/json",
        "Authorization": auth(merchant, three_part=three_part, secret=secret),
        "x-req-signature": signature
        if signature is not None
        else x_req_signature(
            hash_key or creds.hash_key, str(body.get("external_id", "")), str(body.get("order_id", ""))
        ),
    }
    if version is not None:
        headers["x-version"] = version
    if sub_merchant_id is not None:
        headers["sub-merchant-id"] = sub_merchant_id
    if response_type is not None:
        headers["response-type"] = response_type
    return headers


async def post_wallet(
    client: httpx.AsyncClient, merchant: TestMerchant, path: str, body: dict[str, Any], **header_options: Any
) -> httpx.Response:
    headers = wallet_headers(merchant, body, **header_options)
    return await client.post(path, content=compact(body).encode(), headers=headers)


async def create(
    client: httpx.AsyncClient, merchant: TestMerchant, callback_url: str | None = "http://127.0.0.1:9/cb", **kwargs: Any
) -> dict[str, Any]:
    body = create_body(callback_url, **kwargs)
    path = CREATE_QR if body["payment_channel"] == "QRIS" else CREATE
    response = await post_wallet(client, merchant, path, body)
    assert response.status_code == 200, response.text
    data = dict(response.json())
    assert data["response_code"] == "00"
    return data


def ref(tx: dict[str, Any]) -> dict[str, Any]:
    return {"transaction_id": tx["transaction_id"], "external_id": tx["external_id"], "order_id": tx["order_id"]}


async def dummy_payment(
    client: httpx.AsyncClient, merchant: TestMerchant, tx: dict[str, Any], **extra: Any
) -> httpx.Response:
    body = {**ref(tx), "payment_method": "wallet", "payment_channel": tx["payment_channel"], **extra}
    return await post_wallet(client, merchant, DUMMY, body)


async def inquire(client: httpx.AsyncClient, merchant: TestMerchant, tx: dict[str, Any]) -> dict[str, Any]:
    response = await post_wallet(client, merchant, INQUIRY, ref(tx))
    assert response.status_code == 200, response.text
    return dict(response.json())


async def refund(client: httpx.AsyncClient, merchant: TestMerchant, tx: dict[str, Any], amount: Any) -> httpx.Response:
    return await post_wallet(client, merchant, REFUND, {**ref(tx), "refund_amount": amount})


async def void(client: httpx.AsyncClient, merchant: TestMerchant, tx: dict[str, Any]) -> httpx.Response:
    return await post_wallet(client, merchant, VOID, ref(tx))


def check_callback(request: ReceivedRequest, merchant: TestMerchant, tx: dict[str, Any]) -> dict[str, Any]:
    """§3.5, computed here: header and query parameter svc-signature."""
    expected = callback_signature(
        tx["transaction_id"], x_req_signature(merchant.credentials.hash_key, tx["external_id"], tx["order_id"])
    )
    assert request.method == "POST"
    assert request.headers["content-type"].startswith("application/json")
    assert request.headers["svc-signature"] == expected
    assert request.query["svc-signature"] == expected
    return dict(request.json())


def assert_problem(response: httpx.Response, status: int, code: str, *words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"response_code", "response_message"}, body
    assert body["response_code"] == code, body
    for word in words:
        assert word in body["response_message"], body

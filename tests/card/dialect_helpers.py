"""Requests of the provider SDK's snake_case card dialect, built as IFORTEPAY/ifp-node builds them."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import httpx

from kasir.kit.clock import clock
from tests.support.builders import TestMerchant
from tests.support.signing import basic_auth, compact, x_req_signature

CHARGE = "/card-v2/v1/charge"
DIRECT_V1 = "/card-v2/v1/charge-direct"
DIRECT_V2 = "/card-v2/v2/charge-direct"

APPROVED = "4811111111111114"
CHALLENGE = "4000000000003220"
DECLINED = "4000000000000002"
INSUFFICIENT = "4000000000009995"


def reference(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(8)}"


def card_details(number: str = APPROVED, *, cvn: str | None = "123") -> dict[str, Any]:
    details = {
        "card_holder_name": "Siti Rahayu",
        "card_number": number,
        "card_expired_month": "12",
        "card_expired_year": str(clock.local_now().year + 3),
    }
    if cvn is not None:
        details["card_cvn"] = cvn
    return details


def dialect_body(
    *,
    number: str = APPROVED,
    callback_url: str | None = None,
    channel: str = "BCAPG",
    mode: str = "CLOSE",
    tenor: int | None = None,
    store_token: bool | None = None,
    cvn: str | None = "123",
    items: bool = True,
    **overrides: Any,
) -> dict[str, Any]:
    """The SDK's body (pg/card/index.ts): its keys in its order, optional parts only when given."""
    body: dict[str, Any] = {
        "external_id": reference("EXT"),
        "order_id": reference("ORD"),
        "currency": "IDR",
        "payment_method": "CARD",
        "payment_channel": channel,
        "payment_mode": mode,
        "callback_url": callback_url,
        "return_url": "https://shop.example/return",
        "card_details": card_details(number, cvn=cvn),
        "payment_details": {"amount": 150000, "transaction_description": "Sepatu lari"},
        "customer_details": {
            "full_name": "Siti Rahayu",
            "phone": "081234567890",
            "email": "siti@example.id",
            "ip_address": "203.0.113.7",
        },
    }
    if callback_url is None:
        del body["callback_url"]  # JSON.stringify drops an undefined value
    if items:
        body["item_details"] = [
            {"item_id": "SKU-1", "name": "Sepatu Lari", "amount": 50000, "qty": 2},
            {"item_id": "shippingfee", "name": "Ongkos kirim", "amount": 50000, "qty": 1, "description": "JNE"},
        ]
    body["billing_address"] = {"address": "Jl. Sudirman 1", "city": "Jakarta", "postal_code": "10220", "country": "ID"}
    if tenor is not None:
        body["payment_options"] = {"tenor": tenor}
    body["store_token"] = True if store_token is None else store_token
    body.update(overrides)
    return body


def dialect_headers(
    merchant: TestMerchant,
    body: dict[str, Any],
    *,
    sub_merchant_id: str | None = None,
    response_type: str | None = None,
    version: str | None = "v3",
    hash_key: str | None = None,
    secret: str | None = None,
) -> dict[str, str]:
    """The SDK's headers (getRequestHeaders): two-part Basic, x-req-signature, x-version v3."""
    creds = merchant.credentials
    headers = {
        "Content-Type": "application/json",
        "Authorization": basic_auth(creds.merchant_id, secret or creds.secret),
        "x-req-signature": x_req_signature(hash_key or creds.hash_key, body["external_id"], body["order_id"]),
    }
    if version is not None:
        headers["x-version"] = version
    if sub_merchant_id is not None:
        headers["sub-merchant-id"] = sub_merchant_id
    if response_type is not None:
        headers["response-type"] = response_type
    return headers


async def post_dialect(
    client: httpx.AsyncClient, merchant: TestMerchant, path: str, body: dict[str, Any], **header_options: Any
) -> httpx.Response:
    return await client.post(path, content=compact(body), headers=dialect_headers(merchant, body, **header_options))


def sub_merchant_signature(transaction_id: str, x_req_sig: str, sub_merchant_id: str) -> str:
    """The provider's callback documentation: sha256(transactionid + x-req-signature + submerchantid)."""
    return hashlib.sha256(f"{transaction_id}{x_req_sig}{sub_merchant_id}".encode()).hexdigest()

"""Kasir's own card API on the wire (camelCase, Basic only: §3.4) and its payment-page callback (§3.5)."""

from __future__ import annotations

import copy
import secrets
from typing import Any

import httpx

from kasir.kit.clock import clock
from tests.support.builders import TestMerchant
from tests.support.receiver import ReceivedRequest
from tests.support.wire import auth, compact, jakarta_time, x_req_signature
from tests.support.wire.callbacks import callback_signature

CHARGE = "/card-v2/v1/charge"

# The staging test cards (README "Card charge"), typed here independently of the service's table.
APPROVED = "4811 1111 1111 1114"
APPROVED_MC = "5211 1111 1111 1117"
CHALLENGE = "4000 0000 0000 3220"
DECLINED = "4000 0000 0000 0002"
INSUFFICIENT = "4000 0000 0000 9995"
ISSUER_DOWN = "5100 0000 0000 0511"
EXPIRED_CARD = "4000 0000 0000 0069"

PAYMENT_PAGE_FIELDS = {
    "transaction_id",
    "order_id",
    "external_id",
    "currency",
    "transaction_status",
    "response_message",
    "payment_method",
    "payment_channel",
    "acq",
    "paid_date",
    "amount",
    "selected_channels",
    "is_customer_paying_fee",
    "item_details",
    "save_card",
    "card_token",
    "customer_details",
    "shipping_address",
    "billing_address",
    "callback_url",
    "success_redirect_url",
    "failed_redirect_url",
    "expired_time",
}


def reference(prefix: str = "ORD") -> str:
    """A merchant's unique reference (externalId, orderId; the dialect's external_id, order_id)."""
    return f"{prefix}-{secrets.token_hex(8)}"


def future_year(years: int = 3) -> str:
    return str(clock.local_now().year + years)


def card(number: str = APPROVED, **overrides: Any) -> dict[str, Any]:
    return {
        "cardNumber": number,
        "cardExpiredMonth": "12",
        "cardExpiredYear": future_year(),
        "cardCvn": "123",
        "cardHolderName": "siti rahayu",
        **overrides,
    }


def address(**overrides: Any) -> dict[str, Any]:
    return {
        "fullName": "Siti Rahayu",
        "phone": "081234567890",
        "address": "Jl. Sudirman 1",
        "city": "Jakarta",
        "postalCode": "10220",
        "country": "ID",
        **overrides,
    }


def charge_body(
    *,
    mode: str = "CLOSE",
    number: str | None = APPROVED,
    callback_url: str | None = None,
    return_url: str = "https://shop.example/return",
    channel: str = "CARD",
    tenor: str | None = None,
    expired_time: str | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "externalId": reference("EXT"),
        "orderId": reference("ORD"),
        "currency": "IDR",
        "source": "kasir-sdk",
        "paymentMethod": "card",
        "paymentChannel": channel,
        "paymentMode": mode,
        "paymentDetails": {
            "amount": 150000,
            "isCustomerPayingFee": False,
            "transactionDescription": "Sepatu lari",
        },
        "itemDetails": [
            {"itemId": "SKU-1", "name": "Sepatu Lari", "amount": 50000, "qty": 2},
            {"itemId": "shippingfee", "name": "Ongkos kirim", "amount": 50000, "qty": 1, "description": "JNE"},
        ],
        "customerDetails": {
            "email": "siti@example.id",
            "fullName": "Siti Rahayu",
            "phone": "081234567890",
            "ipAddress": "203.0.113.7",
        },
        "billingAddress": address(),
        "shippingAddress": address(address="Jl. Thamrin 2", city="Bandung", postalCode="40111"),
        "returnUrl": return_url,
        **overrides,
    }
    if mode == "CLOSE" and number is not None:
        body["cardDetails"] = card(number)
    if callback_url is not None:
        body["callbackUrl"] = callback_url
    if tenor is not None:
        body["paymentOptions"] = {"tenor": tenor, "useRewards": False, "campaign_code": "promo_11"}
    if expired_time is not None:
        body["paymentDetails"]["expiredTime"] = expired_time
    return body


def jakarta_in(seconds: float) -> str:
    """An `expiredTime`: `seconds` from now on the movable clock, in Asia/Jakarta."""
    return jakarta_time(seconds)


async def post_charge(
    client: httpx.AsyncClient,
    merchant: TestMerchant,
    body: Any,
    *,
    key: str | None = None,
    authorization: str | None = None,
) -> httpx.Response:
    headers = {"Content-Type": "application/json", "Authorization": authorization or auth(merchant)}
    if key is not None:
        headers["X-Idempotency-Key"] = key
    content = body if isinstance(body, str | bytes) else compact(body)
    return await client.post(CHARGE, content=content, headers=headers)


def with_change(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `body` with the dotted `path` set to `value` (`...` removes it)."""
    changed = copy.deepcopy(body)
    target: Any = changed
    parts = path.replace("]", "").replace("[", ".").split(".")
    for part in parts[:-1]:
        target = target[int(part)] if part.isdigit() else target[part]
    last = parts[-1]
    if value is ...:
        del target[last]
    elif last.isdigit():
        target[int(last)] = value
    else:
        target[last] = value
    return changed


def check_callback(request: ReceivedRequest, merchant: TestMerchant, body: dict[str, Any]) -> dict[str, Any]:
    """A payment-page callback: JSON, every field of the interface table, `svc-signature` of §3.5."""
    assert request.method == "POST"
    assert request.headers["content-type"].startswith("application/json")
    payload = dict(request.json())
    assert set(payload) == PAYMENT_PAGE_FIELDS
    signature = callback_signature(
        payload["transaction_id"], x_req_signature(merchant.credentials.hash_key, body["externalId"], body["orderId"])
    )
    assert request.headers["svc-signature"] == signature
    assert "svc-signature" not in request.query  # only wallet callbacks repeat it in the query
    assert payload["order_id"] == body["orderId"]
    assert payload["external_id"] == body["externalId"]
    assert payload["currency"] == "IDR"
    assert payload["payment_method"] == "CARD"
    assert payload["payment_channel"] == "CARD"
    assert payload["amount"] == body["paymentDetails"]["amount"]
    return payload

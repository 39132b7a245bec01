"""Requests of the provider SDK's snake_case card dialect, built as IFORTEPAY/ifp-node builds them.

The dialect signs as the wallet API does (the SDK's getRequestHeaders: two-part Basic, x-req-signature over
external_id + order_id, x-version v3): its headers and its POST are the wallet's (tests.support.wire.wallet).
"""

from __future__ import annotations

from typing import Any

from kasir.kit.clock import clock
from tests.support.wire.card import reference
from tests.support.wire.wallet import post_wallet, wallet_headers

dialect_headers = wallet_headers
post_dialect = post_wallet

DIRECT_V1 = "/card-v2/v1/charge-direct"
DIRECT_V2 = "/card-v2/v2/charge-direct"

APPROVED = "4811111111111114"
CHALLENGE = "4000000000003220"
DECLINED = "4000000000000002"
INSUFFICIENT = "4000000000009995"


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

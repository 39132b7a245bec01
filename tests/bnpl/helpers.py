"""Signed BNPL requests, built in the test from the formulas in tests/support/signing.py."""

from __future__ import annotations

import itertools
import json
import secrets
import time
from typing import Any

import httpx

from tests.support.builders import TestMerchant, snap_timestamp
from tests.support.signing import compact, snap_asymmetric, snap_symmetric, token_signature

_external = itertools.count(int(time.time() * 1000))


def external_id() -> str:
    return str(next(_external)) + str(secrets.randbelow(10**6)).zfill(6)


async def access_token(client: httpx.AsyncClient, merchant: TestMerchant) -> str:
    timestamp = snap_timestamp()
    response = await client.post(
        "/auth/merchants/v1.0/access-token/b2b",
        content=compact({"grantType": "client_credentials"}),
        headers={
            "Content-Type": "application/json",
            "X-TIMESTAMP": timestamp,
            "X-CLIENT-KEY": merchant.client_id,
            "X-SIGNATURE": token_signature(merchant.private_key, merchant.client_id, timestamp),
        },
    )
    assert response.status_code == 200, response.text
    return str(response.json()["accessToken"])


def snap_headers(
    merchant: TestMerchant,
    path: str,
    body: str,
    *,
    token: str | None = None,
    timestamp: str | None = None,
    external: str | None = None,
    channel: str = "95221",
    partner_id: str | None = None,
) -> dict[str, str]:
    timestamp = timestamp or snap_timestamp()
    if token is not None:
        signature = snap_symmetric(merchant.credentials.client_secret, "POST", path, token, body, timestamp)
    else:
        signature = snap_asymmetric(merchant.private_key, "POST", path, body, timestamp)
    headers = {
        "Content-Type": "application/json",
        "X-TIMESTAMP": timestamp,
        "X-SIGNATURE": signature,
        "X-PARTNER-ID": partner_id or merchant.id,
        "X-EXTERNAL-ID": external or external_id(),
        "CHANNEL-ID": channel,
    }
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers


async def post_signed(
    client: httpx.AsyncClient,
    merchant: TestMerchant,
    path: str,
    body: Any,
    *,
    token: str | None = None,
    **kwargs: Any,
) -> httpx.Response:
    text = body if isinstance(body, str) else compact(body)
    headers = snap_headers(merchant, path, text, token=token, **kwargs)
    return await client.post(path, content=text.encode(), headers=headers)


def item(
    amount: str = "50000.00", qty: int = 2, item_id: str = "SKU-1", category: str = "ELEC", **extra: Any
) -> dict[str, Any]:
    return {
        "itemId": item_id,
        "name": "Headphones",
        "amount": {"value": amount, "currency": "IDR"},
        "category": category,
        "qty": qty,
        **extra,
    }


def calculation_item(**kwargs: Any) -> dict[str, Any]:
    return {
        **item(**kwargs),
        "url": "https://shop.example/sku-1",
        "parentType": "SELLER",
        "parentId": "SELLER-1",
    }


def calculation_body(total: str = "100000.00", items: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"amount": {"value": total, "currency": "IDR"}, "itemDetails": items or [calculation_item()]}


def checkout_body(
    callback_url: str = "http://127.0.0.1:9/cb",
    *,
    partner_reference_no: str | None = None,
    total: str = "100000.00",
    items: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "partnerReferenceNo": partner_reference_no or f"ORDER-{secrets.token_hex(6)}",
        "paymentDetails": {"amount": {"value": total, "currency": "IDR"}},
        "itemDetails": items or [item()],
        "customerDetails": {
            "firstName": "Siti",
            "lastName": "Rahayu",
            "email": "siti@example.id",
            "phone": "081234567890",
        },
        "sellers": [
            {
                "id": "SELLER-1",
                "name": "Toko Maju",
                "url": "https://shop.example/toko-maju",
                "address": {
                    "firstName": "Budi",
                    "address": "Jl. Sudirman 1",
                    "city": "Jakarta",
                    "postalCode": "10220",
                    "phone": "0215550100",
                    "countryCode": "ID",
                },
            }
        ],
        "callbackUrl": callback_url,
        **extra,
    }


def pretty(body: Any) -> str:
    """A whitespace-laden rendering: what is signed is its minified form."""
    return json.dumps(body, indent=4, ensure_ascii=False).replace(": ", " :  ")

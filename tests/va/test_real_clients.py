"""The provider's PHP clients' VA requests, byte for byte as they send them, against a served Kasir (real HTTP on
127.0.0.1). Written from their public source; nothing is fetched at run time.

- zerosdev/mcpayment-v2-php `src/VirtualAccount.php` (create, inquiry, cancel) through `src/HttpClient.php`:
  Guzzle with `base_uri` and the `json` option (PHP's json_encode with no flags: `\\/` and `\\uXXXX`), the
  client's default headers `Authorization: Basic base64(merchant_id:secret)` and `X-Version`, and per call
  `X-Req-Signature: sha256(hash_key + external_id + order_id)`; null fields dropped (`array_filter`).
- mcpayment/mcp-php `src/Api/VA/Create.php` and `Inquiry.php` with `Mcp::setHeaders` (`Content-Type`,
  `Authorization`, `x-req-signature`, `x-version: v3`) and `json_encode($body)` of
  `examples/VirtualAccount/CreateVAExample.php`'s body (INSTALLMENT, `expired_time: ""`, `payment_options`,
  an address phone `1+23456`), its base URL and credentials replaced by the test's.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire.va import check_callback

pytestmark = pytest.mark.slow

GUZZLE_AGENT = "GuzzleHttp/7"


def php_json_encode(value: Any) -> bytes:
    """PHP's json_encode with no flags: compact, `/` escaped as `\\/`, non-ASCII as `\\uXXXX`."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True).replace("/", "\\/").encode()


def signature(merchant: builders.TestMerchant, external_id: str, order_id: str) -> str:
    return hashlib.sha256(f"{merchant.credentials.hash_key}{external_id}{order_id}".encode()).hexdigest()


def basic(merchant: builders.TestMerchant) -> str:
    credentials = f"{merchant.credentials.merchant_id}:{merchant.credentials.secret}"
    return "Basic " + base64.b64encode(credentials.encode()).decode()


def zerosdev_headers(merchant: builders.TestMerchant, payload: dict[str, Any]) -> dict[str, str]:
    """HttpClient's defaults, then send()'s: what Guzzle puts on the wire for `json` => $payload."""
    return {
        "User-Agent": GUZZLE_AGENT,
        "Authorization": basic(merchant),
        "X-Version": "v3",
        "X-Req-Signature": signature(merchant, payload["external_id"], payload["order_id"]),
        "Content-Type": "application/json",
    }


def mcp_headers(merchant: builders.TestMerchant, external_id: str, order_id: str) -> dict[str, str]:
    """Mcp::setHeaders, in its order (Guzzle adds its User-Agent)."""
    return {
        "Content-Type": "application/json",
        "Authorization": basic(merchant),
        "x-req-signature": signature(merchant, external_id, order_id),
        "x-version": "v3",
        "User-Agent": GUZZLE_AGENT,
    }


async def test_zerosdev_creates_inquires_and_cancels_a_va(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    create = {
        "external_id": "ZD" + hashlib.md5(b"zerosdev-va").hexdigest().upper()[:20],
        "order_id": "INV-20261128-001",
        "currency": "IDR",
        "payment_method": "bank_transfer",
        "payment_channel": "BRI",
        "payment_details": {
            "billing_name": "Budi Santoso",
            "payment_system": "CLOSED",
            "amount": 150000,
            "transaction_description": "Pembayaran INV-20261128-001",
        },
        "customer_details": {"email": "budi@example.id", "full_name": "Budi Santoso", "phone": "081234567890"},
        "callback_url": receiver.url("/zerosdev"),
    }
    reference = {
        "external_id": create["external_id"],
        "order_id": create["order_id"],
        "payment_method": "bank_transfer",
        "payment_channel": "BRI",
    }
    async with httpx.AsyncClient(base_url=served.base_url + "/", timeout=30) as guzzle:
        created = await guzzle.post("va", content=php_json_encode(create), headers=zerosdev_headers(merchant, create))
        assert created.status_code == 200, created.text
        answer = created.json()
        assert (answer["response_code"], answer["response_message"]) == ("00", "Success")
        va = answer["data"]
        assert va["payment_details"]["va_number"].startswith("13033")
        assert va["payment_details"]["amount"] == 150000
        # VirtualAccount::inquiry and ::cancel: external_id, order_id, transaction_id, payment_method, payment_channel.
        inquiry = {**reference, "transaction_id": va["transaction_id"]}
        inquiry = {key: inquiry[key] for key in ("external_id", "order_id", "transaction_id", "payment_method",
                                                   "payment_channel")}  # fmt: skip
        seen = await guzzle.post(
            "va/inquiry", content=php_json_encode(inquiry), headers=zerosdev_headers(merchant, inquiry)
        )
        assert seen.status_code == 200, seen.text
        assert seen.json()["data"]["transaction_status"] == "PENDING"
        cancelled = await guzzle.post(
            "va/cancel", content=php_json_encode(inquiry), headers=zerosdev_headers(merchant, inquiry)
        )
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["response_code"] == "00"
        assert cancelled.json()["data"]["transaction_status"] == "CANCELLED"
    [callback] = await receiver.wait_for(1, path="/zerosdev")
    assert check_callback(callback, merchant, va)["transaction_status"] == "CANCELLED"


async def test_mcp_php_creates_the_example_va_and_inquires_it(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    external_id = hashlib.md5(b"28Nov2026101500").hexdigest().upper()  # strtoupper(md5(date('dMYHis')))
    order_id = "LibTestOrder-042"
    body = {
        "external_id": external_id,
        "order_id": order_id,
        "payment_method": "bank_transfer",
        "payment_channel": "BCA",
        "currency": "IDR",
        "payment_details": {
            "billing_name": "Test Lib Package",
            "payment_system": "INSTALLMENT",
            "is_multi_use": True,
            "amount": 20000,
            "is_customer_paying_fee": False,
            "expired_time": "",
            "transaction_description": "This is order/transaction description VA",
        },
        "customer_details": {"email": "test.lib@testing.co", "full_name": "Lib Test Name", "phone": "0000000000"},
        "item_details": [
            {"item_id": "ID 12", "name": "item 1", "amount": 20000, "qty": 1, "description": "item description"}
        ],
        "shipping_address": {
            "full_name": "MC Payment", "phone": "1+23456", "address": "Warung Jati 8a ", "city": "Jakarta",
            "postal_code": "11111", "country": "Indonesia",
        },
        "billing_address": {
            "full_name": "MC Payment", "phone": "1+23456", "address": "Warung Jati 8a ", "city": "Jakarta",
            "postal_code": "11111", "country": "Indonesia",
        },
        "payment_options": {"referral_code": "agen 1", "promo_code": "", "source": "payment_page"},
        "additional_data": "some additional_data",
        "callback_url": receiver.url("/mcp"),
    }  # fmt: skip
    async with httpx.AsyncClient(timeout=30) as guzzle:
        created = await guzzle.post(
            served.base_url + "/va", content=php_json_encode(body), headers=mcp_headers(merchant, external_id, order_id)
        )
        assert created.status_code == 200, created.text
        va = created.json()["data"]
        assert created.json()["response_code"] == "00"
        # INSTALLMENT is taken as PARTIAL, with BCA's partial prefix; the addresses are echoed as sent.
        assert va["payment_system"] == "PARTIAL"
        assert va["payment_details"]["va_number"].startswith("40415")
        assert va["payment_details"]["remaining_amount"] == 20000
        assert va["shipping_address"]["phone"] == "1+23456"
        assert va["shipping_address"]["address"] == "Warung Jati 8a "
        assert va["item_details"][0]["item_id"] == "ID 12"
        params = {
            "external_id": external_id,
            "order_id": order_id,
            "transaction_id": va["transaction_id"],
            "payment_method": "BANK_TRANSFER",
            "payment_channel": "BCA",
        }
        seen = await guzzle.post(
            served.base_url + "/va/inquiry",
            content=php_json_encode(params),
            headers=mcp_headers(merchant, external_id, order_id),
        )
        assert seen.status_code == 200, seen.text
        assert seen.json()["data"]["transaction_id"] == va["transaction_id"]
        assert seen.json()["data"]["additional_data"] == "some additional_data"

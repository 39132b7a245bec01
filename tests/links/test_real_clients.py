"""mcpayment/mcp-php's `CreateTransaction::generateLink`, byte for byte as it sends it, against a served Kasir
(real HTTP on 127.0.0.1). Written from its public source; nothing is fetched at run time.

`src/Api/GenerateLink.php` posts `json_encode($body)` (PHP's json_encode with no flags: `\\/` and `\\uXXXX`) to
`Mcp::getApiBase() . "/payment-page/payment"` with `Mcp::setHeaders($externalId, $orderId)`'s headers in their
order (`Content-Type`, `Authorization: Basic base64(merchant_id:secret)`, `x-req-signature:
sha256(hash_key + external_id + order_id)`, `x-version: v3`; Guzzle adds its User-Agent). The body is
`examples/GenerateTransactionExample.php`'s `setupParams` with each of its three `generateLink*` channel lists
(card BCACC, the e-money DANA, the VA PERMATA with `payment_system` and `is_multi_use`), `expired_time: ""`
and `external_id` `strtoupper(md5(date('dMYHis')))`; its base URL and credentials replaced by the test's.

Villanesia (MochRafiuddin/villanesia) reads `data.payment_url`, `data.transaction_id` and `data.expired_time`
from the answer: they are there, and the payment_url answers 200.
"""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from kasir.kit.clock import parse_aware
from tests.support.builders import make_merchant
from tests.support.server import ServedKasir
from tests.va.test_real_clients import mcp_headers, php_json_encode

pytestmark = pytest.mark.slow

CARD = [{"channel": "CARD", "acq": "BCACC", "payment_system": "CLOSED", "is_multi_use": False}]
DANA = [{"channel": "DANA"}]
VA = [{"channel": "VA", "acq": "PERMATA", "payment_system": "CLOSED", "is_multi_use": False}]


def generate_link_body(
    order_id: str, external_id: str, description: str, channels: list[dict[str, Any]]
) -> dict[str, Any]:
    """setupParams' $body, in its key order."""
    return {
        "order_id": order_id,
        "external_id": external_id,
        "amount": 10000,
        "description": description,
        "is_customer_paying_fee": False,
        "customer_details": {
            "full_name": "Lib Test Name",
            "email": "test.lib@testing.co",
            "phone": "0000000000",
            "address": "Jl. Raya Pasar Minggu",
        },
        "item_details": [
            {"item_id": "ID 12", "name": "item 1", "amount": 10000, "qty": 1, "description": "item description"}
        ],
        "selected_channels": channels,
        "shipping_address": {
            "full_name": "Shipper Name", "phone": "089876543210", "address": "Jl. Warung Jati Barat 8a ",
            "city": "Jakarta", "postal_code": "11111", "country": "ID",
        },
        "billing_address": {
            "full_name": "Customer Billed Name", "phone": "081234567890", "address": "Jl. Jalan 8a ",
            "city": "Jakarta", "postal_code": "00001", "country": "ID",
        },
        "save_card": False,
        "callback_url": "https://mcpid.proxy.beeceptor.com",
        "success_redirect_url": "https://beeceptor.com/console/mcpid",
        "failed_redirect_url": "https://beeceptor.com/console/mcpid",
        "expired_time": "",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("channels", "description", "stamp"),
    [
        (CARD, "This is order/transaction description Wallet", "28Nov2026101500"),
        (DANA, "This is order/transaction description Wallet", "28Nov2026101501"),
        (VA, "This is order/transaction description VA", "28Nov2026101502"),
    ],
    ids=["card", "dana", "va"],
)
async def test_mcp_php_generate_link_gets_00_and_a_working_payment_url(
    app: FastAPI, served: ServedKasir, channels: list[dict[str, Any]], description: str, stamp: str
) -> None:
    merchant = await make_merchant(app)
    external_id = hashlib.md5(stamp.encode()).hexdigest().upper()  # strtoupper(md5(date('dMYHis')))
    order_id = "LibTestOrder-042"  # 'LibTestOrder-0' . rand(1, 99)
    body = generate_link_body(order_id, external_id, description, channels)
    async with httpx.AsyncClient(timeout=30) as guzzle:
        answer = await guzzle.post(
            served.base_url + "/payment-page/payment",
            content=php_json_encode(body),
            headers=mcp_headers(merchant, external_id, order_id),
        )
        assert answer.status_code == 200, answer.text
        response = answer.json()
        assert (response["response_code"], response["response_message"]) == ("00", "Success")
        data = response["data"]
        # What Villanesia reads.
        assert data["transaction_id"].startswith("PPL")
        assert data["payment_url"] == f"{served.base_url}/payment-page/pages/{data['transaction_id']}"
        assert data["expired_time"].endswith("+07:00")
        assert parse_aware(data["expired_time"]) > parse_aware(data["transaction_time"])
        assert data["selected_channels"] == [
            {"channel": c["channel"], "acq": c.get("acq", c["channel"])} for c in channels
        ]
        page = await guzzle.get(data["payment_url"])
        assert page.status_code == 200, page.text
        assert "Rp10.000" in page.text

"""End to end over HTTP: create → dummy payment → signed callback at a real receiver; inquiry follows."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import FastAPI

from kasir.kit.clock import parse_aware
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.wire.wallet import CHANNELS, address, check_callback, create, dummy_payment, inquire, item

MILLIS_WITH_OFFSET = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}[+-]\d{2}:\d{2}$")
PAYLOAD_FIELDS = {
    "transaction_id",
    "external_id",
    "order_id",
    "merchant_id",
    "reference_id",
    "currency",
    "payment_method",
    "payment_channel",
    "payment_system",
    "transaction_status",
    "payment_details",
    "customer_details",
    "item_details",
    "billing_address",
    "shipping_address",
    "response_code",
    "response_message",
    "additional_data",
    "wallet_details",
    "terminal_id",
    "payer_name",
}


@pytest.mark.parametrize("channel", CHANNELS)
async def test_create_pay_callback_inquiry(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver, channel: str
) -> None:
    merchant = await make_merchant(app)
    callback_url = receiver.url(f"/wallet/{channel}?shop=1")
    items = [item(40_000, 2, name="Sepatu Lari"), item(20_000, 1, item_id="shippingfee", name="Ongkir")]
    tx = await create(
        client,
        merchant,
        callback_url,
        channel=channel,
        items=items,
        billing_address=address(),
        additional_data="note 1",
    )
    assert tx["transaction_status"] == "PENDING"
    assert tx["payment_channel"] == channel
    assert tx["amount"] == 100_000
    assert tx["payment_details"]["amount"] == 100_000
    assert MILLIS_WITH_OFFSET.match(tx["expired_time"])
    assert tx["payment_url"].startswith("http://kasir.test/ewallet/pages/")
    assert ("qr_string" in tx) is (channel == "QRIS")
    # The create answer is built from the row as written; inquiry reads it back: the same answer.
    assert await inquire(client, merchant, tx) == tx

    paid = await dummy_payment(client, merchant, tx)
    assert paid.status_code == 200, paid.text
    result = paid.json()
    assert set(result) == {
        "external_id",
        "order_id",
        "transaction_status",
        "paid_time",
        "reference_id",
        "response_code",
    }
    assert result["transaction_status"] == "PAID"
    assert result["response_code"] == "00"
    assert result["external_id"] == tx["external_id"]
    assert result["order_id"] == tx["order_id"]
    assert result["reference_id"] == tx["reference_id"]
    assert MILLIS_WITH_OFFSET.match(result["paid_time"]), result["paid_time"]
    assert result["paid_time"].endswith("+07:00")

    [request] = await receiver.wait_for(1, path=f"/wallet/{channel}")
    assert request.query["shop"] == "1"  # the merchant's own query is kept
    payload = check_callback(request, merchant, tx)
    assert PAYLOAD_FIELDS <= set(payload)
    assert payload["transaction_id"] == tx["transaction_id"]
    assert payload["merchant_id"] == merchant.id
    assert payload["reference_id"] == result["reference_id"]
    assert payload["currency"] == "IDR"
    assert payload["payment_method"] == "WALLET"
    assert payload["payment_channel"] == channel
    assert payload["transaction_status"] == "PAID"
    assert payload["response_code"] == "00"
    details = payload["payment_details"]
    assert details["amount"] == 100_000
    assert details["total_amount"] == 100_000
    assert details["paid_time"] == result["paid_time"]
    assert details["transaction_description"] == "Order at Toko Maju"
    for key in ("expired_time", "transaction_time", "paid_time"):
        assert parse_aware(details[key]).utcoffset() is not None
    assert payload["customer_details"] == {
        "phone": "081234567890",
        "email": "siti@example.id",
        "full_name": "Siti Rahayu",
    }
    assert payload["item_details"][0] == {
        "item_id": "SKU-1",
        "name": "Sepatu Lari",
        "amount": 40_000,
        "qty": 2,
        "description": "",  # issue 26: a string field without a value is "", never null
    }
    assert payload["billing_address"]["city"] == "Jakarta"
    # issue 26: an address the request did not give is an object with every field, each "".
    assert payload["shipping_address"] == dict.fromkeys(
        ("phone", "address", "city", "postal_code", "country", "full_name"), ""
    )
    assert payload["additional_data"] == "note 1"
    assert payload["wallet_details"] == {"id": "081234567890", "id_type": "HP"}
    assert payload["issuer"]
    assert payload["payer_name"] == "Siti Rahayu"
    assert "refund_history" not in payload
    assert "void_history" not in payload
    if channel == "QRIS":
        assert payload["acquirer_issuer_relation"] in ("on_us", "off_us")
        assert re.fullmatch(r"\d{12}", payload["retrieval_reference_no"])
        assert payload["terminal_id"]
        assert payload["payer_number"] == "081234567890"
    else:
        for absent in ("acquirer_issuer_relation", "retrieval_reference_no", "payer_number"):
            assert absent not in payload
        assert payload["terminal_id"] == ""

    status = await inquire(client, merchant, tx)
    assert status["transaction_status"] == "PAID"
    assert status["paid_time"] == result["paid_time"]

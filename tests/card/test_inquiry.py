"""The provider SDK's card inquiry, `POST /card-v2/inquiry` (docs/decisions.md §12.1, issue 42 item 1).

The SDK's request is written here byte for byte as its `card.inquiry` (IFORTEPAY/ifp-node, branch
feature/cc-inquiry: pg/card/index.ts, pg/utils/helper.ts, pg/config/pgClient.ts) sends it through axios
1.7.9: the body `JSON.stringify({external_id, order_id, transaction_id})` in that key order, and the headers
of its getRequestHeaders (never `sub-merchant-id` on inquiry) besides the ones axios adds itself.
"""

from __future__ import annotations

import base64
import calendar
import hashlib
from datetime import datetime
from typing import Any

import httpx
from fastapi import FastAPI

from kasir.card.repository import CardOrderRow, card_repository
from kasir.kit.clock import clock
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.wire.card import CHARGE, charge_body, jakarta_in, post_charge
from tests.support.wire.dialect import (
    APPROVED,
    CHALLENGE,
    DIRECT_V1,
    DIRECT_V2,
    INSUFFICIENT,
    dialect_body,
    post_dialect,
)

INQUIRY = "/card-v2/inquiry"


def sdk_request(
    merchant: builders.TestMerchant, external_id: str, order_id: str, transaction_id: str
) -> tuple[bytes, dict]:
    """The bytes and headers of the SDK's `card.inquiry({externalId, orderId, transactionId})`."""
    creds = merchant.credentials
    body = f'{{"external_id":"{external_id}","order_id":"{order_id}","transaction_id":"{transaction_id}"}}'.encode()
    signature = hashlib.sha256(f"{creds.hash_key}{external_id}{order_id}".encode()).hexdigest()
    headers = {
        "Accept": "application/json, text/plain, */*",
        "Content-Type": "application/json",
        "Authorization": "Basic " + base64.b64encode(f"{creds.merchant_id}:{creds.secret}".encode()).decode(),
        "x-req-signature": signature,
        "x-version": "v3",
        "User-Agent": "axios/1.7.9",
        "Content-Length": str(len(body)),
        "Accept-Encoding": "gzip, compress, deflate, br",
    }
    return body, headers


async def sdk_inquiry(
    client: httpx.AsyncClient, merchant: builders.TestMerchant, external_id: str, order_id: str, transaction_id: str
) -> httpx.Response:
    body, headers = sdk_request(merchant, external_id, order_id, transaction_id)
    return await client.post(INQUIRY, content=body, headers=headers)


async def inquired(
    client: httpx.AsyncClient, merchant: builders.TestMerchant, external_id: str, order_id: str, transaction_id: str
) -> dict[str, Any]:
    response = await sdk_inquiry(client, merchant, external_id, order_id, transaction_id)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert set(answer) == {"response_code", "response_message", "data"}
    assert (answer["response_code"], answer["response_message"]) == ("00", "Success")
    data: dict[str, Any] = answer["data"]
    return data


async def order_of(app: FastAPI, transaction_id: str) -> CardOrderRow:
    async with app.state.database.unit_of_work(read_only=True) as session:
        order = await card_repository.get(session, transaction_id)
    assert order is not None
    return order


def epoch_ms(moment: datetime) -> int:
    return calendar.timegm(moment.utctimetuple()) * 1000 + moment.microsecond // 1000


DATA_KEYS = {
    "approval_code", "merchant_id", "mis_version", "transaction_id", "source", "external_id", "order_id",
    "receipt_no", "response_code", "host_response_code", "currency", "payment_method", "payment_channel",
    "transaction_status", "message", "callback_url", "return_url", "installment_tenor", "payment_mode",
    "payment_details", "item_details", "customer_details", "card_details", "payment_options",
}  # fmt: skip
CARD_KEYS = {"card_holder_name", "card_number", "card_expired_month", "card_expired_year", "token", "card_brand"}


async def test_a_paid_dialect_charge_as_the_sdk_asks_for_it(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = dialect_body(number=APPROVED, payment_options={"tenor": 0, "rule_code": "R-7", "campaign_code": "PROMO"})
    direct = await post_dialect(client, merchant, DIRECT_V1, body)
    assert direct.status_code == 200, direct.text
    charged = direct.json()["data"]
    assert charged["status"] == "SUCCESS"
    transaction_id = charged["transaction_data"]["transaction_id"]
    order = await order_of(app, transaction_id)
    assert order.paid_at is not None

    data = await inquired(client, merchant, body["external_id"], body["order_id"], transaction_id)
    assert set(data) == DATA_KEYS | {"billing_address"}  # the charge sent no shipping address
    assert data["approval_code"] == charged["transaction_data"]["approval_code"]
    assert data["receipt_no"] == charged["transaction_data"]["receipt_no"]
    assert len(data["approval_code"]) == 6
    assert data["approval_code"].isdigit()
    assert {key: data[key] for key in DATA_KEYS - {"approval_code", "receipt_no"}} == {
        "merchant_id": merchant.id,
        "mis_version": "v3",
        "transaction_id": transaction_id,
        "source": "",
        "external_id": body["external_id"],
        "order_id": body["order_id"],
        "response_code": "00",
        "host_response_code": "00",
        "currency": "IDR",
        "payment_method": "CARD",
        "payment_channel": "BCAPG",  # as the SDK named it (charged on BCACC)
        "transaction_status": "PAID",
        "message": "The transaction has been paid.",
        "callback_url": "",  # neither the charge nor the merchant named one
        "return_url": "https://shop.example/return",
        "installment_tenor": 0,
        "payment_mode": "CLOSE",
        "payment_details": {
            "amount": 150000,
            "fee_amount": 0,
            "total_amount": 150000,
            "is_customer_paying_fee": False,
            "expired_time": epoch_ms(order.expires_at),
            "transaction_description": "Sepatu lari",
            "paid_time": epoch_ms(order.paid_at),
            "total_paid_amount": 150000,
        },
        "item_details": [
            {"item_id": "SKU-1", "name": "Sepatu Lari", "amount": 50000, "qty": 2, "description": ""},
            {"item_id": "shippingfee", "name": "Ongkos kirim", "amount": 50000, "qty": 1, "description": "JNE"},
        ],
        "customer_details": {
            "full_name": "Siti Rahayu",
            "email": "siti@example.id",
            "phone": "081234567890",
            "ip_address": "203.0.113.7",
        },
        "card_details": {
            "card_holder_name": "SITI RAHAYU",
            "card_number": "481111******1114",
            "card_expired_month": "12",
            "card_expired_year": body["card_details"]["card_expired_year"],
            "token": charged["token"],
            "card_brand": "VISA",
        },
        "payment_options": {
            "campaign_code": "PROMO",
            "rule_code": "R-7",
            "tenor": 0,
            "use_rewards": False,
            "acquirer_issuer_relation": "off_us",
        },
    }
    assert data["billing_address"] == {
        "full_name": "",
        "phone": "",
        "address": "Jl. Sudirman 1",
        "city": "Jakarta",
        "postal_code": "10220",
        "country": "ID",
    }
    assert order.paid_at.year == clock.now().year  # paid_time is the order's own moment, not a constant

    # The stored card charged again by its token (no CVN): its token, the name it never kept.
    again = dialect_body(card_details={"token": charged["token"]})
    by_token = (await post_dialect(client, merchant, DIRECT_V2, again)).json()["data"]
    assert by_token["status"] == "SUCCESS"
    data = await inquired(
        client, merchant, again["external_id"], again["order_id"], by_token["transaction_data"]["transaction_id"]
    )
    assert data["card_details"] == {
        "card_holder_name": "",
        "card_number": "481111******1114",
        "card_expired_month": "12",
        "card_expired_year": body["card_details"]["card_expired_year"],
        "token": charged["token"],
        "card_brand": "VISA",
    }


async def test_a_camelcase_order_before_any_attempt_and_a_dialect_one_at_its_challenge(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    body = charge_body(mode="OPEN", tenor="3")
    response = await post_charge(client, merchant, body)
    assert response.status_code == 200, response.text
    transaction_id = response.json()["data"]["transactionId"]
    data = await inquired(client, merchant, body["externalId"], body["orderId"], transaction_id)
    assert set(data) == DATA_KEYS | {"billing_address", "shipping_address"}
    assert (data["transaction_status"], data["message"]) == ("PENDING", "The transaction is waiting for payment.")
    assert (data["approval_code"], data["receipt_no"], data["response_code"], data["host_response_code"]) == (
        "",
        "",
        "",
        "",
    )
    assert data["card_details"] == dict.fromkeys(CARD_KEYS, "")
    assert set(data["payment_details"]) == {
        "amount", "fee_amount", "total_amount", "is_customer_paying_fee", "expired_time", "transaction_description",
    }  # fmt: skip
    assert data["payment_channel"] == "CARD"
    assert data["shipping_address"]["city"] == "Bandung"
    assert (data["installment_tenor"], data["payment_mode"], data["payment_options"]["tenor"]) == (3, "INSTALLMENT", 3)
    assert data["payment_options"]["acquirer_issuer_relation"] == ""

    # The dialect's 3-D Secure charge, waiting at its challenge: 1A, the card entered, nothing paid.
    body = dialect_body(number=CHALLENGE, channel="CIMBPG", mode="INSTALLMENT", tenor=6)
    link = (await post_dialect(client, merchant, CHARGE, body, response_type="url")).json()["data"]["link"]
    transaction_id = link.split("/card/pages/")[1].split("/")[0]
    data = await inquired(client, merchant, body["external_id"], body["order_id"], transaction_id)
    assert (data["transaction_status"], data["response_code"], data["host_response_code"]) == ("PENDING", "1A", "1A")
    assert data["card_details"]["card_number"] == "400000******3220"
    assert data["card_details"]["token"] == ""
    assert (data["payment_channel"], data["installment_tenor"], data["payment_mode"]) == ("CIMBPG", 6, "INSTALLMENT")
    assert data["approval_code"] == ""


async def test_a_declined_attempt_and_an_expired_order(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = dialect_body(number=INSUFFICIENT)
    declined = (await post_dialect(client, merchant, DIRECT_V1, body)).json()["data"]
    assert (declined["status"], declined["transaction_code"]) == ("FAILED", "51")
    transaction_id = declined["transaction_data"]["transaction_id"]
    data = await inquired(client, merchant, body["external_id"], body["order_id"], transaction_id)
    assert (data["transaction_status"], data["response_code"], data["host_response_code"]) == ("PENDING", "51", "51")
    assert (data["approval_code"], data["receipt_no"]) == ("", "")
    assert data["card_details"]["card_number"] == "400000******9995"

    camel = charge_body(mode="OPEN", expired_time=jakarta_in(60))
    transaction_id = (await post_charge(client, merchant, camel)).json()["data"]["transactionId"]
    clock.advance(61)  # past its expiredTime: expired, whether or not the expiry job has run yet
    data = await inquired(client, merchant, camel["externalId"], camel["orderId"], transaction_id)
    assert (data["transaction_status"], data["message"]) == ("EXPIRED", "The transaction has expired.")
    assert "paid_time" not in data["payment_details"]


async def test_what_the_inquiry_does_not_find_or_refuses(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant, other = await make_merchant(app), await make_merchant(app)
    body = dialect_body(number=APPROVED)
    charged = (await post_dialect(client, merchant, DIRECT_V1, body)).json()["data"]
    transaction_id = charged["transaction_data"]["transaction_id"]
    not_found = {"response_code": "02", "response_message": "Data Not Found"}

    for ids in (
        (body["external_id"], body["order_id"], "CARD00000000000000000000"),  # unknown
        (body["external_id"], "ORD-other", transaction_id),  # ids that do not go together
        ("EXT-other", body["order_id"], transaction_id),
    ):
        response = await sdk_inquiry(client, merchant, *ids)
        assert (response.status_code, response.json()) == (404, not_found), ids
    # Another merchant's order, signed with that merchant's own credentials.
    response = await sdk_inquiry(client, other, body["external_id"], body["order_id"], transaction_id)
    assert (response.status_code, response.json()) == (404, not_found)
    # A wallet transaction made by the camelCase charge (paymentMethod ewallet) is no card order.
    wallet = charge_body(
        mode="OPEN", paymentMethod="ewallet", paymentChannel="DANA", callback_url="http://127.0.0.1:9/cb"
    )
    made = await post_charge(client, merchant, wallet)
    assert made.status_code == 200, made.text
    response = await sdk_inquiry(
        client, merchant, wallet["externalId"], wallet["orderId"], made.json()["data"]["transactionId"]
    )
    assert (response.status_code, response.json()) == (404, not_found)

    # A wrong signature: refused as the dialect's charges refuse it.
    raw, headers = sdk_request(merchant, body["external_id"], body["order_id"], transaction_id)
    headers["x-req-signature"] = hashlib.sha256(b"not the hash key").hexdigest()
    refused = await client.post(INQUIRY, content=raw, headers=headers)
    assert refused.status_code == 401
    assert refused.json()["response_code"] == "04"
    assert "x-req-signature" in refused.json()["response_message"]

    # A missing field: 400 01 naming it.
    for missing in ("transaction_id", "external_id", "order_id"):
        sent = {"external_id": body["external_id"], "order_id": body["order_id"], "transaction_id": transaction_id}
        del sent[missing]
        response = await post_dialect(client, merchant, INQUIRY, sent)
        assert response.status_code == 400, (missing, response.text)
        assert response.json()["response_code"] == "01"
        assert missing in response.json()["response_message"]


async def test_the_openapi_document_has_the_inquiry(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    operation = document["paths"][INQUIRY]["post"]
    schemas = document["components"]["schemas"]

    def resolved(schema: dict[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = schemas[schema["$ref"].rsplit("/", 1)[1]] if "$ref" in schema else schema
        return found

    request = resolved(operation["requestBody"]["content"]["application/json"]["schema"])
    assert set(request["required"]) == {"external_id", "order_id", "transaction_id"}
    answer = resolved(operation["responses"]["200"]["content"]["application/json"]["schema"])
    data = resolved(answer["properties"]["data"])
    assert set(data["required"]) == DATA_KEYS
    assert {"billing_address", "shipping_address"} <= set(data["properties"])
    assert set(resolved(data["properties"]["card_details"])["properties"]) == CARD_KEYS
    assert {"400", "401", "404"} <= set(operation["responses"])

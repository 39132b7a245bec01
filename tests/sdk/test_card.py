"""The SDK's card charge against the real server over HTTP: the interface's SDK mapping, the
idempotency key, the 3-D Secure page driven like a browser, verified payment-page callbacks."""

from __future__ import annotations

import asyncio
import json
import re

import httpx
import pytest
from kasir_client import (
    AsyncClient,
    ChargeResult,
    Client,
    SignatureError,
    verify_payment_page_callback,
    verify_wallet_callback,
)

from tests.sdk.helpers import sdk_credentials
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.forms import submit
from tests.support.receiver import CallbackReceiver, ReceivedRequest
from tests.support.wire import card, x_req_signature
from tests.support.wire.callbacks import callback_signature
from tests.support.wire.card import APPROVED, CHALLENGE, DECLINED
from tests.support.worker import settled_callbacks

pytestmark = pytest.mark.slow


def charge_body(callback_url: str, number: str | None = APPROVED, *, mode: str = "CLOSE") -> dict:
    """The card API's charge (tests.support.wire.card), as a merchant hands it to the SDK."""
    return card.charge_body(mode=mode, number=number, callback_url=callback_url)


def verified(request: ReceivedRequest, merchant: builders.TestMerchant, body: dict, status: str):
    """The payment-page callback's signature, from the formula and through the SDK."""
    payload = request.json()
    expected = callback_signature(
        payload["transaction_id"], x_req_signature(merchant.credentials.hash_key, body["externalId"], body["orderId"])
    )
    assert request.headers["svc-signature"] == expected
    event = verify_payment_page_callback(
        request.body,
        request.headers,
        hash_key=merchant.credentials.hash_key,
        order=(body["externalId"], body["orderId"]),
    )
    assert event.transaction_status == status
    assert event.amount == body["paymentDetails"]["amount"]
    return event


def form_of(html: str) -> dict[str, str]:
    """The hidden inputs of the page's form, and the staging OTP the page prints."""
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', html))
    otp = re.search(r'id="staging-otp">([0-9]+)<', html)
    if otp:
        fields["otp"] = otp.group(1)
    return fields


async def test_frictionless_card_is_success_with_the_link(app, served, receiver: CallbackReceiver):
    merchant = await make_merchant(app)
    body = charge_body(receiver.url("/card"))
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        result = await client.card_charge(body)
    assert result.is_success
    assert result.status_code == "00"
    assert result.http_status == 200
    assert result.payment_status == "SUCCESS"
    assert result.transaction_id
    assert result.link == f"{served.base_url}/card/pages/{result.transaction_id}"
    assert not result.replayed
    [callback] = await receiver.wait_for(1, path="/card")
    event = verified(callback, merchant, body, "SUCCESS")
    assert event.transaction_id == result.transaction_id
    assert event.acq == "BCA"


async def test_three_d_secure_page_driven_over_http(app, served, receiver: CallbackReceiver):
    merchant = await make_merchant(app)
    body = charge_body(receiver.url("/3ds"), CHALLENGE)
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        result = await client.card_charge(body)
    assert result.is_success
    assert result.payment_status == "PENDING"
    assert result.link == f"{served.base_url}/card/pages/{result.transaction_id}/3ds"

    async with httpx.AsyncClient() as browser:
        page = await browser.get(result.link)
        assert page.status_code == 200
        form = form_of(page.text)
        assert set(form) >= {"attempt", "csrf", "otp"}
        answer = await browser.post(result.link, data=form)
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("https://shop.example/return?")
    assert "status=SUCCESS" in answer.headers["location"]

    [callback] = await receiver.wait_for(1, path="/3ds")
    event = verified(callback, merchant, body, "SUCCESS")
    assert event.transaction_id == result.transaction_id


async def test_declined_card_leaves_the_link_open_and_sends_failed(app, served, receiver: CallbackReceiver):
    # The card room's outcome: the charge is created (statusCode 00, paymentStatus PENDING, the link is the
    # payment page where the customer may try another card); the decline is the FAILED callback.
    merchant = await make_merchant(app)
    body = charge_body(receiver.url("/declined"), DECLINED)
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        result = await client.card_charge(body)
    assert result.status_code == "00"
    assert result.payment_status == "PENDING"
    assert result.link == f"{served.base_url}/card/pages/{result.transaction_id}"
    [callback] = await receiver.wait_for(1, path="/declined")
    event = verified(callback, merchant, body, "FAILED")
    assert event.response_message == "Card declined by the issuer"


async def test_idempotency_key_replays_and_refuses_another_body(app, served, receiver: CallbackReceiver):
    merchant = await make_merchant(app)
    body = charge_body(receiver.url("/idem"))
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        first = await client.card_charge(body, idempotency_key="order-1-attempt")
        again = await client.card_charge(body, idempotency_key="order-1-attempt")
        assert again.replayed
        assert again.transaction_id == first.transaction_id
        assert again.is_success

        other = await client.card_charge({**body, "orderId": "ORD-other"}, idempotency_key="order-1-attempt")
        assert not other.is_success
        assert other.status_code == "422"
        assert other.link is None
        assert "IDEMPOTENCY_KEY_REUSED" in other.raw["statusMessage"]

        duplicate = await client.card_charge(body)  # a fresh key: the orderId is already used
        assert not duplicate.is_success
        assert duplicate.http_status == 409
        assert duplicate.raw["statusMessage"] == "DUPLICATE_ORDER"
        assert "orderId" in duplicate.message
    await settled_callbacks(app, merchant.id)
    assert len([r for r in receiver.requests if r.path == "/idem"]) == 1  # charged once


async def test_failures_map_to_is_success_false_with_the_message(app, served, receiver: CallbackReceiver):
    merchant = await make_merchant(app)
    credentials = sdk_credentials(merchant)
    invalid = charge_body(receiver.url("/x"))
    invalid["itemDetails"][0]["qty"] = 1000
    async with AsyncClient(served.base_url, credentials) as client:
        result = await client.card_charge(invalid)
        assert not result.is_success
        assert result.status_code == "400"
        assert "itemDetails[0].qty" in [error["field"] for error in result.errors]
        assert "itemDetails[0].qty" in result.message

        bad_card = await client.card_charge(charge_body(receiver.url("/x"), "4811 1111 1111 1115"))
        assert not bad_card.is_success
        assert bad_card.status_code == "422"
        assert "cardDetails.cardNumber" in bad_card.message
        assert "4811" not in json.dumps(bad_card.raw)  # never echoed

    wrong = type(credentials)(**{**credentials.__dict__, "secret": "not-the-secret"})

    def sync_charge() -> ChargeResult:
        with Client(served.base_url, wrong) as client:
            return client.card_charge(charge_body(receiver.url("/x")))

    refused = await asyncio.to_thread(sync_charge)
    assert not refused.is_success
    assert refused.status_code == "401"
    assert refused.errors[0]["field"] == "authorization"


async def test_real_payment_page_callback_refuses_tampering(app, served, receiver: CallbackReceiver):
    merchant = await make_merchant(app)
    hash_key = merchant.credentials.hash_key
    body = charge_body(receiver.url("/t"))
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        await client.card_charge(body)
    [request] = await receiver.wait_for(1, path="/t")
    order = (body["externalId"], body["orderId"])
    verify_payment_page_callback(request.body, request.headers, hash_key=hash_key, order=order)
    payload = request.json()

    def tampered(**changes: str) -> bytes:
        return json.dumps({**payload, **changes}).encode()

    cases = [
        (tampered(transaction_id="CARD-someone-else"), request.headers, hash_key, order),
        (tampered(order_id="ORD-other"), request.headers, hash_key, None),
        (tampered(order_id="ORD-other"), request.headers, hash_key, order),
        (request.body, request.headers, "wrong-hash-key", order),
        (request.body, {k: v for k, v in request.headers.items() if k != "svc-signature"}, hash_key, order),
    ]
    for tampered_body, headers, key, expected_order in cases:
        with pytest.raises(SignatureError):
            verify_payment_page_callback(tampered_body, headers, hash_key=key, order=expected_order)


async def test_ewallet_payment_method_answers_a_wallet_checkout_with_wallet_callbacks(
    app, served, receiver: CallbackReceiver
):
    merchant = await make_merchant(app)
    body = {**charge_body(receiver.url("/ewallet"), None), "paymentMethod": "ewallet", "paymentChannel": "DANA"}
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        result = await client.card_charge(body)
    assert result.is_success, result.message
    assert result.payment_status == "PENDING"
    assert result.link == f"{served.base_url}/ewallet/pages/{result.transaction_id}"
    async with httpx.AsyncClient() as browser:
        paid = await submit(browser, result.link, "pay-form")
    assert paid.status_code == 303
    [callback] = await receiver.wait_for(1, path="/ewallet")
    event = verify_wallet_callback(
        callback.body,
        callback.headers,
        hash_key=merchant.credentials.hash_key,
        query=callback.query,
        order=(body["externalId"], body["orderId"]),
    )
    assert event.transaction_id == result.transaction_id
    assert event.transaction_status == "PAID"
    assert callback.headers["svc-signature"] == callback_signature(
        result.transaction_id or "", x_req_signature(merchant.credentials.hash_key, body["externalId"], body["orderId"])
    )

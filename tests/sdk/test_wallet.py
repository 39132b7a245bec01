"""The SDK's wallet calls against the real server over HTTP: create, create-qr, inquiry, dummy
payment, refund, void; the callbacks the server sends verify with the SDK and with the formula."""

from __future__ import annotations

import asyncio
import json
import secrets

import httpx
import pytest
from fastapi import FastAPI
from kasir_client import (
    AsyncClient,
    AuthenticationError,
    Client,
    ConflictError,
    NotFoundError,
    SignatureError,
    ValidationError,
    WalletResult,
    verify_wallet_callback,
)
from sqlalchemy import func, select

from kasir.db import fetch_value
from kasir.wallet.models import WalletRefund, WalletTransaction
from tests.sdk.helpers import sdk_credentials
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver, ReceivedRequest
from tests.support.wire import x_req_signature
from tests.support.wire.callbacks import callback_signature
from tests.support.worker import settled_callbacks

pytestmark = pytest.mark.slow


def order_body(callback_url: str, *, channel: str = "DANA", amount: int = 100_000) -> dict:
    return {
        "external_id": f"EXT-{secrets.token_hex(6)}",
        "order_id": f"ORDER-{secrets.token_hex(6)}",
        "currency": "IDR",
        "payment_method": "wallet",
        "payment_channel": channel,
        "payment_details": {"amount": amount, "transaction_description": "Kopi Susu × 2"},
        "customer_details": {"email": "siti@example.id", "full_name": "Siti Rahayu", "phone": "081234567890"},
        "item_details": [{"item_id": "SKU-1", "name": "Kopi Susu", "amount": amount // 2, "qty": 2}],
        "wallet_details": {"id": "081234567890", "id_type": "HP"},
        "callback_url": callback_url,
    }


def ref(tx: WalletResult) -> dict:
    return {"transaction_id": tx.transaction_id, "external_id": tx.external_id, "order_id": tx.order_id}


def expected_signature(merchant: builders.TestMerchant, tx: WalletResult) -> str:
    assert tx.transaction_id
    assert tx.external_id
    assert tx.order_id
    return callback_signature(
        tx.transaction_id, x_req_signature(merchant.credentials.hash_key, tx.external_id, tx.order_id)
    )


def verified(request: ReceivedRequest, merchant: builders.TestMerchant, tx: WalletResult, status: str):
    """The callback's signature, from the formula and through the SDK (header and query)."""
    signature = expected_signature(merchant, tx)
    assert request.headers["svc-signature"] == signature
    assert request.query["svc-signature"] == signature
    event = verify_wallet_callback(
        request.body,
        request.headers,
        hash_key=merchant.credentials.hash_key,
        query=request.query,
        order=(tx.external_id or "", tx.order_id or ""),
    )
    assert event.transaction_id == tx.transaction_id
    assert event.transaction_status == status
    return event


async def test_create_pay_refund_inquiry_with_verified_callbacks(app, served, receiver: CallbackReceiver):
    merchant = await make_merchant(app)
    callback = receiver.url("/wallet?shop=1")
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        created = await client.wallet_create_payment(order_body(callback))
        assert created.response_code == "00"
        assert created.transaction_status == "PENDING"
        assert created.amount == 100_000
        assert created.payment_channel == "DANA"
        assert created.payment_url
        assert created.payment_url.startswith(f"{served.base_url}/ewallet/pages/")
        assert created.qr_string is None
        assert created.raw["paid_time"] == ""  # issue 26: the wire says "" before payment, never null
        assert created.paid_time is None  # and the SDK keeps saying None

        paid = await client.wallet_dummy_payment(
            {**ref(created), "payment_method": "wallet", "payment_channel": "DANA"}
        )
        assert paid.response_code == "00"
        assert paid.transaction_status == "PAID"
        assert paid.transaction_id == created.transaction_id  # the result itself carries none
        assert paid.paid_time
        assert paid.reference_id == created.reference_id

        [paid_callback] = await receiver.wait_for(1, path="/wallet")
        assert paid_callback.query["shop"] == "1"  # the merchant's own query is kept
        event = verified(paid_callback, merchant, created, "PAID")
        assert event.amount == 100_000
        assert event.payment_channel == "DANA"
        assert event.response_code == "00"

        refunded = await client.wallet_refund({**ref(created), "refund_amount": 30_000})
        assert refunded.transaction_status == "REFUNDED"
        assert refunded.refunded_amount == 30_000
        [refund_history] = refunded.get("refund_history")
        assert refund_history["refund_amount"] == 30_000

        _, refund_callback = await receiver.wait_for(2, path="/wallet")
        event = verified(refund_callback, merchant, created, "REFUNDED")
        assert [r["refund_amount"] for r in event.raw["refund_history"]] == [30_000]

        inquiry = await client.wallet_inquiry(ref(created))
        assert inquiry.transaction_status == "REFUNDED"
        assert inquiry.refunded_amount == 30_000

        with pytest.raises(ConflictError) as too_much:
            await client.wallet_refund({**ref(created), "refund_amount": 70_001})
        assert too_much.value.code == "03"
        assert too_much.value.status == 409


async def test_void_with_the_sync_client(app, served, receiver: CallbackReceiver):
    merchant = await make_merchant(app)
    callback = receiver.url("/wallet")

    def flow() -> tuple[WalletResult, WalletResult]:
        with Client(served.base_url, sdk_credentials(merchant)) as client:
            created = client.wallet_create_payment(order_body(callback, channel="SHOPEEPAY", amount=50_000))
            client.wallet_dummy_payment({**ref(created), "payment_method": "wallet", "payment_channel": "SHOPEEPAY"})
            return created, client.wallet_void({**ref(created), "reason": "customer cancelled"})

    created, voided = await asyncio.to_thread(flow)
    assert voided.transaction_status == "VOID"
    [void_history] = voided.get("void_history")
    assert void_history["void_amount"] == 50_000
    paid_callback, void_callback = await receiver.wait_for(2, path="/wallet")
    verified(paid_callback, merchant, created, "PAID")
    verified(void_callback, merchant, created, "VOID")


async def test_create_qr_answers_a_scannable_qr(app, served, receiver: CallbackReceiver):
    merchant = await make_merchant(app)
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        created = await client.wallet_create_qr(order_body(receiver.url("/qr"), channel="QRIS"))
        assert created.transaction_status == "PENDING"
        assert created.qr_string
        assert created.qr_string.startswith("000201")
        assert created.qr_url
        async with httpx.AsyncClient() as http:
            image = await http.get(created.qr_url)
        assert image.headers["content-type"] == "image/png"
        assert image.content.startswith(b"\x89PNG")

        paid = await client.wallet_dummy_payment(
            {**ref(created), "payment_method": "wallet", "payment_channel": "QRIS"}
        )
        assert paid.transaction_status == "PAID"
        [request] = await receiver.wait_for(1, path="/qr")
        event = verified(request, merchant, created, "PAID")
        assert event.raw["retrieval_reference_no"]


async def test_failure_reporting_channel_sends_failed_with_the_reason(app, served, receiver: CallbackReceiver):
    merchant = await make_merchant(app)
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        created = await client.wallet_create_payment(order_body(receiver.url("/ovo"), channel="OVO"))
        failed = await client.wallet_dummy_payment(
            {
                **ref(created),
                "payment_method": "wallet",
                "payment_channel": "OVO",
                "simulate_status": "FAILED",
                "failure_reason": "Saldo tidak cukup",
            }
        )
        assert failed.transaction_status == "failed"
    [request] = await receiver.wait_for(1, path="/ovo")
    event = verified(request, merchant, created, "failed")
    assert event.response_code == "03"
    assert event.response_message == "Saldo tidak cukup"


async def test_errors_map_to_exceptions_with_the_wallet_code(app, served, receiver: CallbackReceiver):
    merchant = await make_merchant(app)
    credentials = sdk_credentials(merchant)
    async with AsyncClient(served.base_url, credentials) as client:
        body = order_body(receiver.url("/e"))
        created = await client.wallet_create_payment(body)

        with pytest.raises(ConflictError) as duplicate:  # external_id already used
            await client.wallet_create_payment(body)
        assert duplicate.value.code == "03"

        with pytest.raises(ConflictError) as not_paid:  # refund of a PENDING transaction
            await client.wallet_refund({**ref(created), "refund_amount": 1_000})
        assert not_paid.value.code == "03"

        with pytest.raises(NotFoundError) as missing:
            await client.wallet_inquiry({**ref(created), "transaction_id": "WT-does-not-exist"})
        assert missing.value.code == "02"

        with pytest.raises(ValidationError) as invalid:
            await client.wallet_create_payment({**order_body(receiver.url("/e")), "currency": "USD"})
        assert invalid.value.code == "01"
        assert "currency" in invalid.value.message

    wrong = type(credentials)(**{**credentials.__dict__, "hash_key": "not-the-hash-key"})
    async with AsyncClient(served.base_url, wrong) as client:
        with pytest.raises(AuthenticationError) as refused:
            await client.wallet_inquiry(ref(created))
    assert refused.value.code == "04"
    assert refused.value.status == 401


async def test_real_wallet_callback_refuses_tampering(app, served, receiver: CallbackReceiver):
    merchant = await make_merchant(app)
    hash_key = merchant.credentials.hash_key
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        created = await client.wallet_create_payment(order_body(receiver.url("/t")))
        await client.wallet_dummy_payment({**ref(created), "payment_method": "wallet", "payment_channel": "DANA"})
    [request] = await receiver.wait_for(1, path="/t")
    order = (created.external_id or "", created.order_id or "")
    payload = request.json()
    # The real callback verifies with the header alone, with the query parameter alone, and with both.
    verify_wallet_callback(request.body, request.headers, hash_key=hash_key, order=order)
    no_header = {k: v for k, v in request.headers.items() if k != "svc-signature"}
    verify_wallet_callback(request.body, no_header, hash_key=hash_key, query=request.query, order=order)

    def tampered(**changes: str) -> bytes:
        return json.dumps({**payload, **changes}).encode()

    cases = [
        (tampered(transaction_id="WT-someone-else"), request.headers, hash_key, order),  # changed transaction id
        (tampered(order_id="ORDER-other"), request.headers, hash_key, None),  # changed body: another order
        (tampered(external_id="EXT-other"), request.headers, hash_key, None),
        (tampered(order_id="ORDER-other"), request.headers, hash_key, order),  # not the merchant's order
        (request.body, request.headers, "wrong-hash-key", order),  # wrong key
        (request.body, {**request.headers, "svc-signature": "0" * 64}, hash_key, order),
        (request.body, no_header, hash_key, None),  # no signature at all
    ]
    for body, headers, key, expected_order in cases:
        with pytest.raises(SignatureError):
            verify_wallet_callback(body, headers, hash_key=key, order=expected_order)
    with pytest.raises(SignatureError):  # the query parameter must agree with the header
        verify_wallet_callback(
            request.body, request.headers, hash_key=hash_key, query={"svc-signature": "0" * 64}, order=order
        )


async def stored(app: FastAPI, merchant_id: str, external_id: str) -> tuple[int, int]:
    """How many transactions with `external_id` the merchant has, and how many refunds of them."""
    async with app.state.database.unit_of_work(read_only=True) as session:
        transactions = await fetch_value(
            session,
            select(func.count())
            .select_from(WalletTransaction)
            .where(WalletTransaction.merchant_id == merchant_id, WalletTransaction.external_id == external_id),
        )
        refunds = await fetch_value(
            session,
            select(func.count())
            .select_from(WalletRefund)
            .join(WalletTransaction, WalletRefund.transaction_id == WalletTransaction.id)
            .where(WalletTransaction.merchant_id == merchant_id, WalletTransaction.external_id == external_id),
        )
    return int(transactions or 0), int(refunds or 0)


async def test_a_create_payment_sent_twice_with_one_key_creates_one_transaction(app, served, receiver):
    merchant = await make_merchant(app)
    body = order_body(receiver.url("/create-once"))
    key = f"create-{body['order_id']}"
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        created = await client.wallet_create_payment(body, idempotency_key=key)
        again = await client.wallet_create_payment(body, idempotency_key=key)
        assert not created.replayed
        assert again.replayed  # Idempotent-Replayed: true
        assert again.raw == created.raw

        with pytest.raises(ValidationError) as reused:  # the same key with another body
            await client.wallet_create_payment({**body, "order_id": "ORDER-other"}, idempotency_key=key)
        assert reused.value.status == 422
        assert reused.value.code == "01"
    assert await stored(app, merchant.id, body["external_id"]) == (1, 0)


async def test_a_refund_sent_twice_with_one_key_refunds_once(app, served, receiver: CallbackReceiver):
    merchant = await make_merchant(app)
    async with AsyncClient(served.base_url, sdk_credentials(merchant)) as client:
        created = await client.wallet_create_payment(order_body(receiver.url("/refund-once")))
        await client.wallet_dummy_payment({**ref(created), "payment_method": "wallet", "payment_channel": "DANA"})
        refund = {**ref(created), "refund_amount": 30_000}
        key = f"refund-{created.transaction_id}-1"
        refunded = await client.wallet_refund(refund, idempotency_key=key)
        repeated = await client.wallet_refund(refund, idempotency_key=key)
        assert not refunded.replayed
        assert repeated.replayed  # Idempotent-Replayed: true
        assert repeated.raw == refunded.raw
        assert repeated.refunded_amount == 30_000

        with pytest.raises(ValidationError) as reused:  # the same key with another body
            await client.wallet_refund({**refund, "refund_amount": 20_000}, idempotency_key=key)
        assert reused.value.status == 422
        assert reused.value.code == "01"

        inquiry = await client.wallet_inquiry(ref(created))
        assert inquiry.refunded_amount == 30_000
        assert len(inquiry.get("refund_history")) == 1
    assert await stored(app, merchant.id, created.external_id or "") == (1, 1)
    await settled_callbacks(app, merchant.id)
    statuses = [r.json()["transaction_status"] for r in receiver.requests if r.path == "/refund-once"]
    assert statuses == ["PAID", "REFUNDED"]  # one refund callback

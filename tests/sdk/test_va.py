"""The SDK's virtual-account calls (create_va, va_inquiry, cancel_va, simulate_va_payment) against the app, and
its VA callbacks verified with the SDK and with the formula computed here (docs/decisions.md §9.7): the async
client in process (the app through httpx's ASGI transport), the sync one against `kasir serve`."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from kasir_client import (
    AsyncClient,
    Client,
    ConfirmationError,
    ConflictError,
    NotFoundError,
    SignatureError,
    VaCallback,
    ValidationError,
    VaResult,
    sign_va_callback,
    verify_va_callback,
)
from kasir_client.bodies import VaCreate, VaReference

from kasir.merchants.service import merchant_service
from tests.sdk.helpers import sdk_credentials
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver, ReceivedRequest
from tests.support.wire import x_req_signature
from tests.support.wire.callbacks import callback_signature, sub_merchant_signature
from tests.support.wire.wallet import unique


def va_body(callback_url: str, *, channel: str = "BCA", system: str = "CLOSED", amount: int | None = 50_000,
            **details: Any) -> VaCreate:  # fmt: skip
    body: dict[str, Any] = {
        "external_id": unique("sdk-va"),
        "order_id": unique("sdk-va")[:25],
        "currency": "IDR",
        "payment_method": "bank_transfer",
        "payment_channel": channel,
        "payment_details": {
            "billing_name": "Toko Kasir",
            "transaction_description": "Kopi Susu x 2",
            "payment_system": system,
            **({"amount": amount} if amount is not None else {}),
            **details,
        },
        "customer_details": {"email": "siti@example.id", "full_name": "Siti Rahayu", "phone": "081234567890"},
        "callback_url": callback_url,
    }
    return body  # type: ignore[return-value]


def ref(va: VaResult) -> VaReference:
    return {"transaction_id": va.transaction_id, "external_id": va.external_id, "order_id": va.order_id}


def in_process(app: FastAPI, merchant: builders.TestMerchant) -> AsyncClient:
    return AsyncClient("http://kasir.test", sdk_credentials(merchant), transport=httpx.ASGITransport(app=app))


def signed_here(merchant: builders.TestMerchant, va: VaResult, sub_merchant_id: str | None = None) -> str:
    """§9.7, computed here: the wallet's svc-signature, or the card dialect's with a sub-merchant."""
    x_req = x_req_signature(merchant.credentials.hash_key, va.external_id, va.order_id)
    if sub_merchant_id is None:
        return callback_signature(va.transaction_id, x_req)
    return sub_merchant_signature(va.transaction_id, x_req, sub_merchant_id)


def verified(
    request: ReceivedRequest,
    merchant: builders.TestMerchant,
    va: VaResult,
    status: str,
    sub_merchant_id: str | None = None,
) -> VaCallback:
    """The callback's signature from the formula (header and query), then through the SDK."""
    expected = signed_here(merchant, va, sub_merchant_id)
    assert request.headers["svc-signature"] == expected
    assert request.query["svc-signature"] == expected
    event = verify_va_callback(
        request.body,
        request.headers,
        hash_key=merchant.credentials.hash_key,
        query=request.query,
        order=(va.external_id, va.order_id),
        sub_merchant_id=sub_merchant_id,
    )
    assert (event.transaction_id, event.transaction_status) == (va.transaction_id, status)
    return event


async def test_a_closed_va_is_created_paid_and_its_callback_verifies(app: FastAPI, receiver: CallbackReceiver) -> None:
    merchant = await make_merchant(app)
    async with in_process(app, merchant) as kasir:
        va = await kasir.create_va(va_body(receiver.url("/closed"), channel="bca"))
        assert (va.response_code, va.response_message) == ("00", "Success")
        assert (va.transaction_status, va.payment_channel, va.payment_system) == ("PENDING", "BCA", "CLOSED")
        assert va.transaction_id.startswith("VA")
        assert va.va_number.startswith("40416")
        assert len(va.va_number) == 14
        assert (va.amount, va.total_paid_amount, va.remaining_amount, va.is_multi_use) == (50_000, 0, 0, False)
        assert va.payment_history == []
        assert va.get("customer_details")["full_name"] == "Siti Rahayu"
        assert not va.replayed

        paid = await kasir.simulate_va_payment({**ref(va), "payment_method": "bank_transfer", "payment_channel": "BCA"})
        assert (paid.transaction_status, paid.amount, paid.va_number) == ("PAID", 50_000, va.va_number)
        assert paid.reference_id.startswith("REF")
        assert paid.transaction_id == va.transaction_id

        [request] = await receiver.wait_for(1, path="/closed")
        event = verified(request, merchant, va, "PAID")
        assert (event.reference_id, event.paid_time) == (paid.reference_id, paid.paid_time)
        assert (event.amount, event.va_amount, event.total_paid_amount, event.remaining_amount) == (
            50_000, 50_000, 50_000, 0,
        )  # fmt: skip
        assert (event.va_number, event.payment_system, event.payment_channel) == (va.va_number, "CLOSED", "BCA")
        assert event.sub_merchant_id is None
        assert event.callback_id == request.headers["x-kasir-callback-id"]
        assert event.attempt == 1

        confirmed = await kasir.confirm_va_payment(event, amount=50_000)  # the inquiry agrees
        assert confirmed.transaction_status == "PAID"
        with pytest.raises(ConfirmationError, match="not 40000"):  # not the amount of our order
            await kasir.confirm_va_payment(event, amount=40_000)
        forged = replace(event, reference_id="REF00000000000000000")  # a payment Kasir never took
        with pytest.raises(ConfirmationError, match="no payment"):
            await kasir.confirm_va_payment(forged)
        with pytest.raises(ConfirmationError, match="is PAID"):  # a CANCELLED callback the VA contradicts
            await kasir.confirm_va_payment(replace(event, reference_id="", transaction_status="CANCELLED"))

        seen = await kasir.va_inquiry(ref(va))
        assert seen.transaction_status == "PAID"
        assert [(p.reference_id, p.amount, p.paid_time) for p in seen.payment_history] == [
            (paid.reference_id, 50_000, paid.paid_time)
        ]
        with pytest.raises(ConflictError) as closed:  # a closed VA takes no payment
            await kasir.simulate_va_payment({**ref(va), "payment_method": "bank_transfer", "payment_channel": "BCA"})
        assert (closed.value.status, closed.value.code) == (409, "03")


async def test_partial_in_three_parts_with_a_sub_merchant(app: FastAPI, receiver: CallbackReceiver) -> None:
    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await merchant_service.add_sub_merchant(session, merchant.id, "SUB-1", "Toko Cabang")
    async with in_process(app, merchant) as kasir:
        va = await kasir.create_va(
            va_body(receiver.url("/partial"), channel="BRI", system="PARTIAL", amount=100_000), sub_merchant_id="SUB-1"
        )
        assert (va.payment_system, va.is_multi_use, va.remaining_amount) == ("PARTIAL", True, 100_000)
        pay = {**ref(va), "payment_method": "bank_transfer", "payment_channel": "BRI"}
        statuses = [
            (await kasir.simulate_va_payment({**pay, "amount": amount}, sub_merchant_id="SUB-1")).transaction_status
            for amount in (30_000, 30_000, 40_000)
        ]
        assert statuses == ["PARTIALLY_PAID", "PARTIALLY_PAID", "PAID"]
        seen = await kasir.va_inquiry(ref(va), sub_merchant_id="SUB-1")
        assert (seen.total_paid_amount, seen.remaining_amount) == (100_000, 0)
        assert [p.amount for p in seen.payment_history] == [40_000, 30_000, 30_000]  # newest first

    callbacks = await receiver.wait_for(3, path="/partial")
    events = [
        verified(request, merchant, va, status, "SUB-1")
        for request, status in zip(callbacks, ["PARTIALLY_PAID", "PARTIALLY_PAID", "PAID"], strict=True)
    ]
    assert [(e.amount, e.remaining_amount) for e in events] == [(30_000, 70_000), (30_000, 40_000), (40_000, 0)]
    assert {e.sub_merchant_id for e in events} == {"SUB-1"}
    # Without sub_merchant_id= the SDK takes the one the callback names; the signature covers it.
    first = callbacks[0]
    key = merchant.credentials.hash_key
    assert verify_va_callback(first.body, first.headers, hash_key=key).sub_merchant_id == "SUB-1"
    with pytest.raises(SignatureError, match="another sub-merchant"):
        verify_va_callback(first.body, first.headers, hash_key=key, sub_merchant_id="SUB-2")
    payload = first.json()
    for tampered in (
        {**payload, "sub_merchant_id": "SUB-2"},
        {k: v for k, v in payload.items() if k != "sub_merchant_id"},
    ):
        with pytest.raises(SignatureError, match="does not match"):
            verify_va_callback(json.dumps(tampered), first.headers, hash_key=key)


async def test_a_multi_use_open_va_paid_twice_then_cancelled(app: FastAPI, receiver: CallbackReceiver) -> None:
    merchant = await make_merchant(app)
    async with in_process(app, merchant) as kasir:
        body = va_body(receiver.url("/open"), channel="MANDIRI", system="OPEN", amount=None)
        key = f"create-{body['order_id']}"
        va = await kasir.create_va(body, idempotency_key=key)
        again = await kasir.create_va(body, idempotency_key=key)
        assert again.replayed  # Idempotent-Replayed: one VA
        assert again.raw == va.raw
        assert (va.payment_system, va.is_multi_use, va.amount) == ("OPEN", True, 0)
        assert va.va_number.startswith("89795")

        pay = {**ref(va), "payment_method": "bank_transfer", "payment_channel": "MANDIRI"}
        first = await kasir.simulate_va_payment({**pay, "amount": 25_000})
        second = await kasir.simulate_va_payment({**pay, "amount": 75_000})
        assert (first.transaction_status, second.transaction_status) == ("PAID", "PAID")  # it stays open

        cancelled = await kasir.cancel_va(ref(va))
        assert (cancelled.transaction_status, cancelled.total_paid_amount) == ("CANCELLED", 100_000)
        with pytest.raises(ConflictError) as twice:
            await kasir.cancel_va(ref(va))
        assert twice.value.code == "03"

    callbacks = await receiver.wait_for(3, path="/open")
    events = [
        verified(request, merchant, va, status)
        for request, status in zip(callbacks, ["PAID", "PAID", "CANCELLED"], strict=True)
    ]
    assert [e.reference_id for e in events] == [first.reference_id, second.reference_id, ""]
    assert [e.amount for e in events] == [25_000, 75_000, 0]
    assert events[2].paid_time == ""
    async with in_process(app, merchant) as kasir:
        assert (await kasir.confirm_va_payment(events[2])).transaction_status == "CANCELLED"
        assert (await kasir.confirm_va_payment(events[0], amount=25_000)).total_paid_amount == 100_000


async def test_refusals_are_the_wallet_exceptions_with_their_codes(app: FastAPI, receiver: CallbackReceiver) -> None:
    merchant = await make_merchant(app)
    async with in_process(app, merchant) as kasir:
        with pytest.raises(ValidationError) as channel:
            await kasir.create_va(va_body(receiver.url("/e"), channel="FINPAY"))
        assert (channel.value.status, channel.value.code) == (400, "01")
        assert "payment_channel" in channel.value.message
        va = await kasir.create_va(va_body(receiver.url("/e")))
        with pytest.raises(NotFoundError) as missing:
            await kasir.va_inquiry({**ref(va), "transaction_id": "VA00000000000000000000"})
        assert missing.value.code == "02"
        with pytest.raises(ConflictError) as duplicate:  # the external_id again
            await kasir.create_va({**va_body(receiver.url("/e")), "external_id": va.external_id})
        assert duplicate.value.code == "03"


def test_a_fake_va_callback_verifies_and_tampering_is_refused() -> None:
    payload = {
        "transaction_id": "VA0123456789ABCDEFGHIJ",
        "external_id": "EXT-1",
        "order_id": "ORDER-1",
        "reference_id": "REF0123456789ABCDEFG",
        "transaction_status": "PAID",
        "payment_details": {"va_number": "40416000000123", "amount": 50_000, "total_amount": 50_000},
    }
    x_req = x_req_signature("hash-key", "EXT-1", "ORDER-1")
    body, headers = sign_va_callback(payload, hash_key="hash-key")
    assert headers["svc-signature"] == callback_signature("VA0123456789ABCDEFGHIJ", x_req)
    event = verify_va_callback(body, headers, hash_key="hash-key", order=("EXT-1", "ORDER-1"))
    assert (event.va_number, event.amount, event.reference_id) == ("40416000000123", 50_000, "REF0123456789ABCDEFG")
    with pytest.raises(SignatureError):
        verify_va_callback(body, headers, hash_key="hash-key", order=("EXT-1", "ORDER-2"))
    with pytest.raises(SignatureError):
        verify_va_callback(body, headers, hash_key="another-key")
    with pytest.raises(SignatureError):  # the query parameter must agree with the header
        verify_va_callback(body, headers, hash_key="hash-key", query={"svc-signature": "0" * 64})

    body, headers = sign_va_callback({**payload, "sub_merchant_id": "SUB-1"}, hash_key="hash-key")
    assert headers["svc-signature"] == sub_merchant_signature("VA0123456789ABCDEFGHIJ", x_req, "SUB-1")
    assert verify_va_callback(body, headers, hash_key="hash-key", sub_merchant_id="SUB-1").sub_merchant_id == "SUB-1"


@pytest.mark.slow
async def test_the_sync_client_over_http(app: FastAPI, served: Any, receiver: CallbackReceiver) -> None:
    merchant = await make_merchant(app)
    callback = receiver.url("/sync")

    def flow() -> tuple[VaResult, VaResult]:
        with Client(served.base_url, sdk_credentials(merchant)) as kasir:
            va = kasir.create_va(va_body(callback, channel="BNI", system="CLOSED", amount=20_000, is_multi_use=True))
            for _ in range(2):
                kasir.simulate_va_payment({**ref(va), "payment_method": "bank_transfer", "payment_channel": "BNI"})
            return va, kasir.va_inquiry(ref(va))

    va, seen = await asyncio.to_thread(flow)
    assert va.va_number.startswith("7136")
    assert (seen.transaction_status, seen.total_paid_amount, len(seen.payment_history)) == ("PAID", 40_000, 2)
    callbacks = await receiver.wait_for(2, path="/sync")
    events = [verified(request, merchant, va, "PAID") for request in callbacks]
    assert len({e.reference_id for e in events}) == 2  # one PAID per payment, keyed by reference_id

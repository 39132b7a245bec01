"""The SDK's callback verification accepts the server's real callbacks and refuses tampered ones."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from kasir_client import (
    SignatureError,
    sign_bnpl_notification,
    sign_wallet_callback,
    verify_bnpl_notification,
    verify_payment_page_callback,
    verify_wallet_callback,
)

from kasir.callbacks.models import CallbackKind
from tests.callbacks.helpers import db, record
from tests.support.builders import make_merchant
from tests.support.wire import x_req_signature
from tests.support.wire.callbacks import bnpl_svc_signature, callback_signature


async def test_real_bnpl_notification_verifies_and_tampering_is_refused(app, receiver):
    merchant = await make_merchant(app)
    url = receiver.url("/bnpl")
    payload = {
        "originalPartnerReferenceNo": "P-1",
        "originalReferenceNo": "R-1",
        "latestTransactionStatus": "00",
        "transactionStatusDesc": "Success",
        "amount": {"value": "150000.00", "currency": "IDR"},
        "tenure": 3,
    }
    await record(db(app), merchant_id=merchant.id, url=url, kind=CallbackKind.BNPL, svc_signature=None, payload=payload)
    [request] = await receiver.wait_for(1)
    secret = merchant.credentials.client_secret
    event = verify_bnpl_notification(
        request.body, request.headers, client_secret=secret, callback_url=url, merchant_id=merchant.id
    )
    assert event.latest_transaction_status == "00"
    assert str(event.amount) == "150000.00"
    assert event.tenure == 3
    # The delivery headers the server sends reach the event; its fresh X-TIMESTAMP is within 300 s.
    assert event.callback_id == request.headers["x-kasir-callback-id"]
    assert event.callback_id.isdigit()
    assert event.attempt == 1
    later = datetime.now(UTC) + timedelta(seconds=301)
    with pytest.raises(SignatureError, match="tolerance"):
        verify_bnpl_notification(request.body, request.headers, client_secret=secret, callback_url=url, now=later)

    tampered = request.body.replace(b"150000.00", b"1.00")
    with pytest.raises(SignatureError):
        verify_bnpl_notification(tampered, request.headers, client_secret=secret, callback_url=url)
    with pytest.raises(SignatureError):
        verify_bnpl_notification(request.body, request.headers, client_secret="wrong", callback_url=url)
    with pytest.raises(SignatureError):
        verify_bnpl_notification(
            request.body, request.headers, client_secret=secret, callback_url=url, merchant_id="SOMEONE-ELSE"
        )

    # Issue 26: svc-signature as well (this row was recorded without one, as before the change: the
    # dispatcher computes it from the body when it claims the row), checked by the SDK with hash_key=.
    hash_key = merchant.credentials.hash_key
    expected = bnpl_svc_signature(hash_key, "R-1", "P-1")
    assert request.headers["svc-signature"] == expected
    keys = {"client_secret": secret, "callback_url": url}
    event = verify_bnpl_notification(request.body, request.headers, hash_key=hash_key, **keys)
    assert event.original_reference_no == "R-1"
    assert (
        verify_bnpl_notification(
            request.body, request.headers, hash_key=hash_key, partner_reference_no="P-1", **keys
        ).original_partner_reference_no
        == "P-1"
    )
    with pytest.raises(SignatureError, match="svc-signature does not match"):
        verify_bnpl_notification(request.body, request.headers, hash_key="wrong", **keys)
    with pytest.raises(SignatureError, match="svc-signature does not match"):
        verify_bnpl_notification(request.body, request.headers, hash_key=hash_key, partner_reference_no="P-2", **keys)
    without = {k: v for k, v in request.headers.items() if k.lower() != "svc-signature"}
    with pytest.raises(SignatureError, match="svc-signature header is missing"):
        verify_bnpl_notification(request.body, without, hash_key=hash_key, **keys)
    assert verify_bnpl_notification(request.body, without, **keys).tenure == 3  # without hash_key: as before


async def test_real_wallet_callback_verifies_and_tampering_is_refused(app, receiver):
    merchant = await make_merchant(app)
    hash_key = merchant.credentials.hash_key
    payload = {
        "transaction_id": "TX-77",
        "external_id": "E-77",
        "order_id": "O-77",
        "transaction_status": "PAID",
        "payment_details": {"amount": 15000, "total_amount": 15000},
    }
    signature = callback_signature("TX-77", x_req_signature(hash_key, "E-77", "O-77"))
    await record(
        db(app),
        merchant_id=merchant.id,
        url=receiver.url(),
        transaction_ref="TX-77",
        svc_signature=signature,
        payload=payload,
    )
    [request] = await receiver.wait_for(1)
    event = verify_wallet_callback(
        request.body, request.headers, hash_key=hash_key, query=request.query, order=("E-77", "O-77")
    )
    assert event.transaction_status == "PAID"
    assert event.amount == 15000
    assert event.callback_id == request.headers["x-kasir-callback-id"]
    assert event.callback_id.isdigit()
    assert event.attempt == 1

    with pytest.raises(SignatureError):  # another order's signature
        verify_wallet_callback(request.body, request.headers, hash_key=hash_key, order=("E-78", "O-77"))
    changed_tx = json.dumps({**payload, "transaction_id": "TX-78"}).encode()
    with pytest.raises(SignatureError):
        verify_wallet_callback(changed_tx, request.headers, hash_key=hash_key)
    with pytest.raises(SignatureError):
        verify_wallet_callback(request.body, request.headers, hash_key="wrong-key")
    with pytest.raises(SignatureError):
        verify_wallet_callback(request.body, request.headers, hash_key=hash_key, query={"svc-signature": "x"})


def test_signed_fakes_verify():
    body, headers = sign_wallet_callback(
        {"transaction_id": "T", "external_id": "E", "order_id": "O", "transaction_status": "SUCCESS", "amount": 10},
        hash_key="k",
    )
    assert verify_payment_page_callback(body, headers, hash_key="k").transaction_status == "SUCCESS"
    body, headers = sign_bnpl_notification(
        {"latestTransactionStatus": "06"}, client_secret="s", callback_url="https://m/cb", merchant_id="M"
    )
    assert (
        verify_bnpl_notification(
            body, headers, client_secret="s", callback_url="https://m/cb"
        ).latest_transaction_status
        == "06"
    )


def test_signed_fake_bnpl_notification_carries_svc_signature_with_a_hash_key():
    payload = {"originalPartnerReferenceNo": "P-9", "originalReferenceNo": "R-9", "latestTransactionStatus": "00"}
    keys = {"client_secret": "s", "callback_url": "https://m/cb"}
    body, headers = sign_bnpl_notification(payload, merchant_id="M", hash_key="k", **keys)
    # The formula, computed here apart from both the SDK and the server: sha256(R + sha256(k + P + P)).
    import hashlib

    inner = hashlib.sha256(b"kP-9P-9").hexdigest()
    assert headers["svc-signature"] == hashlib.sha256(("R-9" + inner).encode()).hexdigest()
    assert verify_bnpl_notification(body, headers, hash_key="k", **keys).latest_transaction_status == "00"
    _, unsigned = sign_bnpl_notification(payload, merchant_id="M", **keys)
    assert "svc-signature" not in unsigned

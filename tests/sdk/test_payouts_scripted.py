"""The SDK's disbursement calls against a scripted server on 127.0.0.1 (tests/sdk/scripted.py): the disbursement
token fetched once and reused, every call signed with it (docs/decisions.md §11.2's formula, computed here), the
transfer's X-Idempotency-Key kept across its tries, the answers read into typed results; and notifications
verified (§11.8). The same calls against a served Kasir: tests/sdk/test_payouts.py."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from kasir_client import (
    AsyncClient,
    AuthenticationError,
    Client,
    ConflictError,
    SignatureError,
    sign_payout_notification,
    verify_payout_notification,
)

from tests.sdk.helpers import sdk_credentials
from tests.sdk.scripted import Reply, ScriptedServer, Seen
from tests.support.builders import make_merchant
from tests.support.wire.callbacks import bnpl_svc_signature
from tests.support.wire.snap import snap_symmetric, token_signature

TOKEN = {"responseCode": "2007300", "accessToken": "DISBURSEMENT-TOKEN", "tokenType": "Bearer", "expiresIn": "900"}
MONEY = {"value": "150000.00", "currency": "IDR"}
TRANSFER = {
    "partnerReferenceNo": "PAYOUT-1",
    "amount": MONEY,
    "beneficiaryAccountName": "BUDI SANTOSO",
    "beneficiaryAccountNo": "1234567890",
    "beneficiaryBankCode": "014",
    "originatorInfos": [{"originatorCustomerNo": "1", "originatorCustomerName": "Shop", "originatorBankCode": "014"}],
}
ACCEPTED = {
    "responseCode": "2001800",
    "responseMessage": "Successful",
    "referenceNo": "DSB12345678901234567890",
    "partnerReferenceNo": "PAYOUT-1",
    "amount": MONEY,
    "beneficiaryAccountNo": "1234567890",
    "beneficiaryBankCode": "014",
    "sourceAccountNo": "8800123412341234",
    "additionalInfo": {"latestTransactionStatus": "03", "transactionStatusDesc": "Pending"},
}
STATUS = {
    "responseCode": "2003600",
    "responseMessage": "Successful",
    "originalReferenceNo": "DSB12345678901234567890",
    "originalPartnerReferenceNo": "PAYOUT-1",
    "originalExternalId": "12345",
    "serviceCode": "18",
    "amount": MONEY,
    "beneficiaryAccountNo": "1234567890",
    "beneficiaryBankCode": "014",
    "latestTransactionStatus": "06",
    "transactionStatusDesc": "Failed",
    "additionalInfo": {"beneficiaryAccountName": "AGUS WIJAYA", "reason": "Rejected by the beneficiary bank"},
}
BALANCE = {
    "responseCode": "2001100",
    "accountNo": "8800123412341234",
    "name": "Toko",
    "accountInfos": [
        {
            "balanceType": "cash",
            "amount": {"value": "850000.00", "currency": "IDR"},
            "holdAmount": {"value": "150000.00", "currency": "IDR"},
            "availableBalance": {"value": "850000.00", "currency": "IDR"},
            "ledgerBalance": {"value": "1000000.00", "currency": "IDR"},
            "status": "0001",
        }
    ],
}
HISTORY = {
    "responseCode": "2001200",
    "detailData": [
        {
            "dateTime": "2026-11-28T10:00:00+07:00",
            "amount": MONEY,
            "remark": "gaji",
            "status": "SUCCESS",
            "type": "SEND_MONEY",
            "additionalInfo": {
                "partnerReferenceNo": "PAYOUT-1",
                "referenceNo": "DSB1",
                "latestTransactionStatus": "00",
            },
        },
        {
            "dateTime": "2026-11-28T09:00:00+07:00",
            "amount": {"value": "1000000.00", "currency": "IDR"},
            "remark": "Saldo awal",
            "status": "SUCCESS",
            "type": "TOP_UP",
            "additionalInfo": {},
        },  # fmt: skip
    ],
}


def assert_signed_with_the_token(seen: Seen, client_secret: str, token: str) -> None:
    assert seen.headers["authorization"] == f"Bearer {token}"
    expected = snap_symmetric(client_secret, "POST", seen.path, token, seen.body.decode(), seen.headers["x-timestamp"])
    assert seen.headers["x-signature"] == expected
    assert seen.headers["channel-id"] == "api"
    assert seen.headers["x-external-id"].isdigit()
    assert len(seen.headers["x-external-id"]) <= 36


async def test_the_disbursement_token_is_fetched_once_and_signs_every_payout_call(app) -> None:
    merchant = await make_merchant(app)
    credentials = sdk_credentials(merchant)
    script = [Reply(200, TOKEN), Reply(200, BALANCE), Reply(200, ACCEPTED), Reply(200, STATUS), Reply(200, HISTORY)]
    async with ScriptedServer(*script) as server, AsyncClient(server.base_url, credentials) as client:
        balance = await client.balance()
        sent = await client.transfer(TRANSFER)  # type: ignore[arg-type]
        status = await client.transfer_status(partner_reference_no="PAYOUT-1")
        history = await client.history({"pageSize": 20})
    token_request, *calls = server.requests
    assert token_request.path == "/api/v1.0/access-token/b2b"  # the disbursement product's token path
    assert token_request.headers["x-signature"] == token_signature(
        merchant.private_key, merchant.client_id, token_request.headers["x-timestamp"]
    )
    assert [c.path for c in calls] == [
        "/api/v1.0/balance-inquiry",
        "/api/v1.2/transfer-interbank",
        "/api/v1.0/transfer/status",
        "/api/v1.0/transaction-history-list",
    ]
    for seen in calls:
        assert_signed_with_the_token(seen, merchant.credentials.client_secret, "DISBURSEMENT-TOKEN")
        assert seen.headers["x-partner-id"] == merchant.id
    assert "x-idempotency-key" in calls[1].headers
    assert all("x-idempotency-key" not in c.headers for c in (calls[0], calls[2], calls[3]))
    assert calls[2].json() == {"serviceCode": "18", "originalPartnerReferenceNo": "PAYOUT-1"}
    assert (balance.available, balance.hold, balance.ledger) == (Decimal(850_000), Decimal(150_000), Decimal(10**6))
    assert balance.account_no == "8800123412341234"
    assert (sent.reference_no, sent.partner_reference_no, sent.status, sent.is_final) == (
        "DSB12345678901234567890", "PAYOUT-1", "03", False,
    )  # fmt: skip
    assert sent.amount == Decimal("150000.00")
    assert sent.source_account_no == "8800123412341234"
    assert (status.status, status.status_description, status.is_final) == ("06", "Failed", True)
    assert status.reason == "Rejected by the beneficiary bank"
    assert status.reference_no == sent.reference_no
    assert [(e.type, e.status, e.amount) for e in history.entries] == [
        ("SEND_MONEY", "SUCCESS", Decimal("150000.00")), ("TOP_UP", "SUCCESS", Decimal("1000000.00")),
    ]  # fmt: skip
    assert history.entries[0].partner_reference_no == "PAYOUT-1"


async def test_a_transfer_keeps_its_key_and_external_id_across_tries_and_a_duplicate_is_final(app) -> None:
    merchant = await make_merchant(app)
    in_progress = {"responseCode": "4091800", "responseMessage": "Request In Progress"}
    unavailable = {"responseCode": "5031800", "responseMessage": "The rail did not answer; retry"}
    duplicate = {"responseCode": "4091801", "responseMessage": "Duplicate partnerReferenceNo"}
    script = [Reply(200, TOKEN), Reply(409, in_progress, retry_after="0"), Reply(503, unavailable, retry_after="0"),
              Reply(200, ACCEPTED, replayed=True), Reply(409, duplicate)]  # fmt: skip

    def run(base_url: str) -> tuple[Any, ConflictError]:
        with Client(base_url, sdk_credentials(merchant), backoff=0.001) as client:
            sent = client.transfer(TRANSFER, version="v1.0", idempotency_key="payout-1")  # type: ignore[arg-type]
            with pytest.raises(ConflictError) as refused:
                client.transfer(TRANSFER, version="v1.0")  # type: ignore[arg-type]
        return sent, refused.value

    async with ScriptedServer(*script) as server:
        sent, conflict = await asyncio.to_thread(run, server.base_url)
    assert sent.replayed
    tries = server.requests[1:4]
    assert {t.path for t in tries} == {"/api/v1.0/transfer-interbank"}
    assert {t.headers["x-idempotency-key"] for t in tries} == {"payout-1"}
    assert len({t.headers["x-external-id"] for t in tries}) == 1
    assert len({t.body for t in tries}) == 1
    assert conflict.code == "4091801"
    assert len(server.requests) == 5  # the token once; a 409 without Retry-After is not tried again


async def test_a_payment_token_is_never_sent_to_a_payout_route(app) -> None:
    merchant = await make_merchant(app)
    payment_token = {**TOKEN, "accessToken": "PAYMENT-TOKEN"}
    refused = {"responseCode": "4011101", "responseMessage": "Invalid Token (B2B)"}
    async with ScriptedServer(Reply(200, payment_token), Reply(200, TOKEN), Reply(401, refused)) as server:
        async with AsyncClient(server.base_url, sdk_credentials(merchant)) as client:
            assert await client.access_token("payment") == "PAYMENT-TOKEN"
            with pytest.raises(AuthenticationError):
                await client.balance()
    first, second, balance = server.requests
    assert first.path == "/auth/merchants/v1.0/access-token/b2b"
    assert second.path == "/api/v1.0/access-token/b2b"
    assert balance.headers["authorization"] == "Bearer DISBURSEMENT-TOKEN"


NOTIFICATION = {
    "originalPartnerReferenceNo": "PAYOUT-1",
    "originalReferenceNo": "DSB12345678901234567890",
    "originalExternalId": "12345",
    "serviceCode": "18",
    "latestTransactionStatus": "00",
    "transactionStatusDesc": "Success",
    "amount": MONEY,
    "beneficiaryAccountNo": "1234567890",
    "beneficiaryAccountName": "BUDI SANTOSO",
    "beneficiaryBankCode": "014",
    "sourceAccountNo": "8800123412341234",
    "transactionDate": "2026-11-28T10:00:00+07:00",
    "finishedTime": "2026-11-28T10:00:10+07:00",
    "additionalInfo": {},
}


def test_a_notification_verifies_against_the_formula_and_nothing_else_does() -> None:
    import base64
    import hashlib
    import hmac

    url, secret, hash_key = "https://shop.example/payouts?x=1", "client-secret", "hash-key"
    body = json.dumps(NOTIFICATION, separators=(",", ":")).encode()
    ts = datetime.now(timezone(timedelta(hours=7))).isoformat(timespec="seconds")
    # §3.6: HMAC-SHA512(client_secret, callbackUrl:v1:sha256hex(minify(body)):X-TIMESTAMP); §11.8's svc-signature.
    message = f"{url}:v1:{hashlib.sha256(body).hexdigest()}:{ts}"
    signature = base64.b64encode(hmac.new(secret.encode(), message.encode(), hashlib.sha512).digest()).decode()
    svc = bnpl_svc_signature(hash_key, "DSB12345678901234567890", "PAYOUT-1")
    headers = {"X-TIMESTAMP": ts, "X-SIGNATURE": signature, "X-PARTNER-ID": "MCH1", "X-VERSION": "v1",
               "svc-signature": svc, "X-Kasir-Callback-Id": "77", "X-Kasir-Attempt": "2"}  # fmt: skip
    event = verify_payout_notification(
        body, headers, client_secret=secret, callback_url=url, merchant_id="MCH1", hash_key=hash_key,
        partner_reference_no="PAYOUT-1",
    )  # fmt: skip
    assert (event.latest_transaction_status, event.amount, event.original_external_id) == (
        "00",
        Decimal(150_000),
        "12345",
    )
    assert (event.callback_id, event.attempt, event.reason) == ("77", 2, None)
    for wrong in (
        {"callback_url": url + "&y=2"},
        {"client_secret": "other"},
        {"merchant_id": "MCH2"},
        {"hash_key": "other"},
        {"partner_reference_no": "PAYOUT-2"},
    ):
        kwargs = {"client_secret": secret, "callback_url": url, "merchant_id": "MCH1", "hash_key": hash_key,
                  "partner_reference_no": "PAYOUT-1", **wrong}  # fmt: skip
        with pytest.raises(SignatureError):
            verify_payout_notification(body, headers, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(SignatureError):
        verify_payout_notification(body.replace(b'"00"', b'"06"'), headers, client_secret=secret, callback_url=url)
    signed_body, signed = sign_payout_notification(
        NOTIFICATION, client_secret=secret, callback_url=url, merchant_id="MCH1", hash_key=hash_key
    )
    # The fake is signed as Kasir signs (the formula, computed here), not only as the SDK's own check reads it.
    stamp = signed["X-TIMESTAMP"]
    message = f"{url}:v1:{hashlib.sha256(signed_body).hexdigest()}:{stamp}"
    expected = base64.b64encode(hmac.new(secret.encode(), message.encode(), hashlib.sha512).digest()).decode()
    assert (signed["X-SIGNATURE"], signed["svc-signature"]) == (expected, svc)
    assert verify_payout_notification(signed_body, signed, client_secret=secret, callback_url=url, hash_key=hash_key)

"""Disbursement on the wire (docs/decisions.md §11): the six routes, their bodies, and requests signed per §11.2.

The signature is computed here from the decision's formula (`tests.support.wire.snap.snap_symmetric`: HMAC-SHA512
with the client secret over METHOD:PATH:accessToken:lowerhex(SHA-256(minify(body))):X-TIMESTAMP), never by Kasir.
"""

from __future__ import annotations

import secrets
from typing import Any

import httpx

from tests.support.builders import TestMerchant
from tests.support.wire import compact
from tests.support.wire.snap import DISBURSEMENT_TOKEN_PATH, access_token, external_id, snap_symmetric, snap_timestamp

BALANCE = "/api/v1.0/balance-inquiry"
ACCOUNT_INQUIRY = "/api/v1.0/account-inquiry-external"
TRANSFER = "/api/v1.2/transfer-interbank"
TRANSFER_V10 = "/api/v1.0/transfer-interbank"
TRANSFER_V11 = "/api/v1.1/transfer-interbank"
TRANSFER_STATUS = "/api/v1.0/transfer/status"
HISTORY_LIST = "/api/v1.0/transaction-history-list"
HISTORY_DETAIL = "/api/v1.0/transaction-history-detail"
ROUTES = (BALANCE, ACCOUNT_INQUIRY, TRANSFER, TRANSFER_V10, TRANSFER_V11, TRANSFER_STATUS, HISTORY_LIST, HISTORY_DETAIL)


async def disbursement_token(client: httpx.AsyncClient, merchant: TestMerchant) -> str:
    return await access_token(client, merchant, DISBURSEMENT_TOKEN_PATH)


def payout_headers(
    merchant: TestMerchant,
    path: str,
    body: str,
    token: str,
    *,
    timestamp: str | None = None,
    external: str | None = None,
    partner_id: str | None = None,
    idempotency_key: str | None = None,
    client_secret: str | None = None,
) -> dict[str, str]:
    timestamp = timestamp or snap_timestamp()
    secret = client_secret or merchant.credentials.client_secret
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
        "X-TIMESTAMP": timestamp,
        "X-SIGNATURE": snap_symmetric(secret, "POST", path, token, body, timestamp),
        "X-PARTNER-ID": partner_id or merchant.id,
        "X-EXTERNAL-ID": external or external_id(),
        "CHANNEL-ID": "api",
        "ORIGIN": "www.merchant.example",
    }
    if idempotency_key is not None:
        headers["X-Idempotency-Key"] = idempotency_key
    return headers


async def post_payout(
    client: httpx.AsyncClient, merchant: TestMerchant, path: str, body: Any, token: str, **kwargs: Any
) -> httpx.Response:
    text = body if isinstance(body, str) else compact(body)
    return await client.post(path, content=text.encode(), headers=payout_headers(merchant, path, text, token, **kwargs))


def transfer_body(
    account_no: str = "1234567890",
    *,
    amount: str = "50000.00",
    bank_code: str = "014",
    partner_reference_no: str | None = None,
    callback_url: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    additional: dict[str, Any] = {"remark": "Gaji November"}
    if callback_url is not None:
        additional["callbackUrl"] = callback_url
    return {
        "partnerReferenceNo": partner_reference_no or f"PAY-{secrets.token_hex(6)}",
        "amount": {"value": amount, "currency": "IDR"},
        "beneficiaryAccountName": "Budi Santoso",
        "beneficiaryAccountNo": account_no,
        "beneficiaryBankCode": bank_code,
        "currency": "IDR",
        "feeType": "OUR",
        "transactionDate": "2026-11-28T10:00:00+07:00",
        "originatorInfos": [
            {"originatorCustomerNo": "9988776655", "originatorCustomerName": "Toko Maju", "originatorBankCode": "014"}
        ],
        "additionalInfo": additional,
        **extra,
    }


def inquiry_body(account_no: str = "1234567890", bank_code: str = "014", **extra: Any) -> dict[str, Any]:
    return {
        "beneficiaryBankCode": bank_code,
        "beneficiaryAccountNo": account_no,
        "partnerReferenceNo": "AIQ-1",
        **extra,
    }


def status_body(
    *, partner_reference_no: str | None = None, reference_no: str | None = None, **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"serviceCode": "18", **extra}
    if partner_reference_no is not None:
        body["originalPartnerReferenceNo"] = partner_reference_no
    if reference_no is not None:
        body["originalReferenceNo"] = reference_no
    return body

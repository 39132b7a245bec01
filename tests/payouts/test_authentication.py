"""The disbursement routes' authentication (docs/decisions.md §11.2): a disbursement token and §3.2's symmetric
signature only, computed here from the formula; X-PARTNER-ID the merchant's id or client id; X-EXTERNAL-ID in
BNPL's namespace; errors in the SNAP envelope with the route's service code."""

from __future__ import annotations

import base64
import hashlib
import hmac

import httpx
import pytest
from fastapi import FastAPI

from tests.support.builders import make_merchant
from tests.support.wire import compact
from tests.support.wire.payouts import (
    ACCOUNT_INQUIRY,
    BALANCE,
    HISTORY_DETAIL,
    HISTORY_LIST,
    TRANSFER,
    TRANSFER_STATUS,
    TRANSFER_V10,
    TRANSFER_V11,
    disbursement_token,
    payout_headers,
    post_payout,
)
from tests.support.wire.snap import (
    CALCULATION,
    access_token,
    calculation_body,
    external_id,
    post_signed,
    snap_timestamp,
)

SERVICE = {
    BALANCE: "11",
    ACCOUNT_INQUIRY: "16",
    TRANSFER: "18",
    TRANSFER_V10: "18",
    TRANSFER_V11: "18",
    TRANSFER_STATUS: "36",
    HISTORY_LIST: "12",
    HISTORY_DETAIL: "13",
}


def by_hand(client_secret: str, path: str, token: str, body: str, timestamp: str) -> str:
    """§11.2, written out: Base64(HMAC-SHA512(client_secret, "POST:" + PATH + ":" + token + ":" +
    lowerhex(SHA-256(minify(body))) + ":" + X-TIMESTAMP)); `body` is already minified."""
    digest = hashlib.sha256(body.encode()).hexdigest()
    message = f"POST:{path}:{token}:{digest}:{timestamp}".encode()
    return base64.b64encode(hmac.new(client_secret.encode(), message, hashlib.sha512).digest()).decode()


async def test_a_balance_inquiry_signed_by_hand_is_answered(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    token = await disbursement_token(client, merchant)
    body = '{"partnerReferenceNo":"BAL-1","balanceTypes":["CASH"]}'
    timestamp = snap_timestamp()
    headers = {
        "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
        "X-TIMESTAMP": timestamp,
        "X-SIGNATURE": by_hand(merchant.credentials.client_secret, BALANCE, token, body, timestamp),
        "X-PARTNER-ID": merchant.id,
        "X-EXTERNAL-ID": external_id(),
        "CHANNEL-ID": "api",
    }
    answer = await client.post(BALANCE, content=body, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["responseCode"] == "2001100"


@pytest.mark.parametrize("path", list(SERVICE))
async def test_a_payment_token_on_every_payout_route_is_an_invalid_token(
    app: FastAPI, client: httpx.AsyncClient, path: str
) -> None:
    merchant = await make_merchant(app)
    payment_token = await access_token(client, merchant)
    answer = await post_payout(client, merchant, path, {}, payment_token)
    assert answer.status_code == 401, answer.text
    assert answer.json() == {"responseCode": f"401{SERVICE[path]}01", "responseMessage": "Invalid Token (B2B)"}


async def test_a_disbursement_token_on_a_bnpl_route_is_an_invalid_token(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    token = await disbursement_token(client, merchant)
    answer = await post_signed(client, merchant, CALCULATION, calculation_body(), token=token)
    assert answer.status_code == 401, answer.text
    assert answer.json()["responseCode"] == "4019001"


async def test_without_a_token_the_asymmetric_signature_is_not_accepted(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    # a BNPL request's asymmetric form (no Authorization), correctly signed with the merchant's key
    answer = await post_signed(client, merchant, BALANCE, {"partnerReferenceNo": "B"})
    assert answer.status_code == 401, answer.text
    assert answer.json()["responseCode"] == "4011101"


async def test_a_wrong_signature_is_unauthorized(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    token = await disbursement_token(client, merchant)
    answer = await post_payout(client, merchant, BALANCE, {}, token, client_secret="not-the-secret")
    assert answer.status_code == 401, answer.text
    assert answer.json()["responseCode"] == "4011100"


async def test_the_partner_id_is_the_merchant_id_or_its_client_id_and_no_other(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant, other = await make_merchant(app), await make_merchant(app)
    token = await disbursement_token(client, merchant)
    by_client_id = await post_payout(client, merchant, BALANCE, {}, token, partner_id=merchant.client_id)
    assert by_client_id.status_code == 200, by_client_id.text
    assert by_client_id.json()["responseCode"] == "2001100"
    for partner in (other.id, other.client_id):
        refused = await post_payout(client, merchant, BALANCE, {}, token, partner_id=partner)
        assert refused.status_code == 401, refused.text
        assert refused.json()["responseCode"] == "4011100"


async def test_missing_headers_name_the_header(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    token = await disbursement_token(client, merchant)
    for header in ("X-TIMESTAMP", "X-SIGNATURE", "X-PARTNER-ID", "X-EXTERNAL-ID", "CHANNEL-ID"):
        headers = payout_headers(merchant, BALANCE, "{}", token)
        del headers[header]
        answer = await client.post(BALANCE, content=b"{}", headers=headers)
        assert answer.status_code == 400, (header, answer.text)
        assert answer.json() == {"responseCode": "4001102", "responseMessage": f"Invalid Mandatory Field {header}"}
    headers = payout_headers(merchant, BALANCE, "{}", token)
    del headers["Authorization"]
    answer = await client.post(BALANCE, content=b"{}", headers=headers)
    assert answer.json() == {"responseCode": "4011101", "responseMessage": "Invalid Token (B2B)"}


async def test_the_external_id_is_one_namespace_with_bnpl(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    payment_token = await access_token(client, merchant)
    token = await disbursement_token(client, merchant)
    used = external_id()
    bnpl = await post_signed(client, merchant, CALCULATION, calculation_body(), token=payment_token, external=used)
    assert bnpl.status_code == 200, bnpl.text
    again = await post_payout(client, merchant, BALANCE, {}, token, external=used)
    assert again.status_code == 409, again.text
    assert again.json() == {"responseCode": "4091100", "responseMessage": "Conflict"}
    fresh = await post_payout(client, merchant, BALANCE, compact({}), token)
    assert fresh.status_code == 200


async def test_a_wrong_method_on_a_payout_path_is_said_in_snap(client: httpx.AsyncClient) -> None:
    answer = await client.get(TRANSFER)
    assert answer.status_code == 405
    assert answer.json() == {"responseCode": "4051800", "responseMessage": "Method Not Allowed"}

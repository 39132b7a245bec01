"""A transfer's notification (docs/decisions.md §11.8): when it sent additionalInfo.callbackUrl, each move into 00,
06 or 04 sends one, signed with §3.6's headers and BNPL's svc-signature, checked here from the formulas."""

from __future__ import annotations

import base64
import hashlib
import hmac

import httpx
from fastapi import FastAPI

from kasir.audit.service import Actor
from kasir.kit.clock import clock, parse_aware
from kasir.payouts.jobs import check_unsettled_transfers
from kasir.payouts.service import payout_service
from kasir.processors.protocols import Event, Notification
from kasir.processors.service import apply
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver, ReceivedRequest
from tests.support.wire.payouts import TRANSFER, disbursement_token, post_payout, transfer_body
from tests.support.wire.snap import minify_json
from tests.support.worker import settled_callbacks


def verify(request: ReceivedRequest, merchant: builders.TestMerchant, callback_url: str) -> dict[str, object]:
    """What a merchant's receiver checks, written from §11.8 and §3.6."""
    timestamp = request.headers["x-timestamp"]
    parse_aware(timestamp)
    assert request.headers["x-partner-id"] == merchant.id
    assert request.headers["x-version"] == "v1"
    digest = hashlib.sha256(minify_json(request.body.decode()).encode()).hexdigest()
    message = f"{callback_url}:v1:{digest}:{timestamp}".encode()
    secret = merchant.credentials.client_secret.encode()
    assert (
        request.headers["x-signature"] == base64.b64encode(hmac.new(secret, message, hashlib.sha512).digest()).decode()
    )
    payload = dict(request.json())
    reference, partner = str(payload["originalReferenceNo"]), str(payload["originalPartnerReferenceNo"])
    inner = hashlib.sha256(f"{merchant.credentials.hash_key}{partner}{partner}".encode()).hexdigest()
    assert request.headers["svc-signature"] == hashlib.sha256(f"{reference}{inner}".encode()).hexdigest()
    return payload


async def test_each_final_move_sends_one_signed_notification(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await payout_service.top_up(session, merchant.id, 1_000_000, "Saldo awal", Actor.cli())
    token = await disbursement_token(client, merchant)
    url = receiver.url("/payout/notify")
    at_once = transfer_body("1234567890", amount="10000.00", callback_url=url)
    later = transfer_body("1234560002", amount="20000.00", callback_url=url)
    rejected = transfer_body("1234560003", amount="30000.00", callback_url=url)
    silent = transfer_body("1234567891", amount="40000.00")  # no callbackUrl: no notification
    references = {}
    for body in (at_once, later, rejected, silent):
        answer = await post_payout(client, merchant, TRANSFER, body, token, external=None)
        assert answer.status_code == 200, answer.text
        references[body["partnerReferenceNo"]] = answer.json()["referenceNo"]
    clock.advance(10)
    await check_unsettled_transfers(app.state.database)
    # the beneficiary bank returns the first one (the rail's notification: here the simulator's, in staging)
    async with app.state.database.unit_of_work() as session:
        returned = Notification("payout", references[at_once["partnerReferenceNo"]], Event.RETURNED, message="Closed")
        assert await apply(session, returned, by="simulator") == "04"
    received = await receiver.wait_for(4, path="/payout/notify")
    await settled_callbacks(app, merchant.id)
    assert len(receiver.requests) == 4
    payloads = [verify(request, merchant, url) for request in received]
    seen = sorted((p["originalPartnerReferenceNo"], p["latestTransactionStatus"]) for p in payloads)
    assert seen == sorted(
        [
            (at_once["partnerReferenceNo"], "00"),
            (at_once["partnerReferenceNo"], "04"),
            (later["partnerReferenceNo"], "00"),
            (rejected["partnerReferenceNo"], "06"),
        ]
    )
    failed = next(p for p in payloads if p["latestTransactionStatus"] == "06")
    assert failed == {
        "originalPartnerReferenceNo": rejected["partnerReferenceNo"],
        "originalReferenceNo": references[rejected["partnerReferenceNo"]],
        "originalExternalId": failed["originalExternalId"],
        "serviceCode": "18",
        "latestTransactionStatus": "06",
        "transactionStatusDesc": "Failed",
        "amount": {"value": "30000.00", "currency": "IDR"},
        "beneficiaryAccountNo": "1234560003",
        "beneficiaryAccountName": "Budi Santoso",
        "beneficiaryBankCode": "014",
        "sourceAccountNo": failed["sourceAccountNo"],
        "transactionDate": "2026-11-28T10:00:00+07:00",
        "finishedTime": failed["finishedTime"],
        "additionalInfo": {"reason": "Rejected by the beneficiary bank"},
    }
    assert str(failed["finishedTime"]).endswith("+07:00")
    back = next(p for p in payloads if p["latestTransactionStatus"] == "04")
    assert back["additionalInfo"] == {"reason": "Closed"}

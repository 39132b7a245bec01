"""Disbursement over real HTTP (issue 46, "shows that it is done"): a `kasir serve` on loopback, a merchant's calls
signed here from §11.2's formula (tests.support.wire.payouts), and a real receiver for the notifications.

- The disbursement token opens every payout route and a payment token none of them (`401xx01`); the other way
  round, a disbursement token is refused on BNPL.
- Every outcome of the staging simulator (§11.9, by the account's last four digits) reaches its final state, as the
  status inquiry says, and each final move's notification verifies (§11.8, checked as a merchant would).
- The balance adds up afterwards: the ledger paid what succeeded, nothing held, nothing debited for what failed.

The server runs with a short payout delay so the worker's delayed moves come soon; the test waits for the
notifications, not for time. It runs on both databases (`KASIR_TEST_DB`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from kasir.audit.service import Actor
from kasir.payouts.service import payout_service
from tests.payouts.test_notifications import verify
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire.payouts import (
    ACCOUNT_INQUIRY,
    BALANCE,
    HISTORY_DETAIL,
    ROUTES,
    TRANSFER,
    TRANSFER_STATUS,
    disbursement_token,
    inquiry_body,
    post_payout,
    status_body,
    transfer_body,
)
from tests.support.wire.snap import CALCULATION, access_token, calculation_body, post_signed

pytestmark = pytest.mark.slow

FUNDS = 1_000_000

# The account's last four digits → the transfer's answer (HTTP, responseCode, state) and its final state (§11.9).
OUTCOMES = {
    "1234567890": (200, "2001800", "00", "00"),
    "1234560002": (200, "2001800", "03", "00"),
    "1234560003": (200, "2001800", "03", "06"),
    "1234560004": (404, "4041811", None, None),
    "1234560005": (403, "4031818", None, None),
}


@pytest.fixture
async def payouts_server(settings_env: dict[str, str], migrated: None) -> AsyncIterator[ServedKasir]:
    server = ServedKasir({**settings_env, "KASIR_SIMULATOR_PAYOUT_DELAY_SECONDS": "1"})
    await asyncio.to_thread(server.start)
    try:
        yield server
    finally:
        await asyncio.to_thread(server.stop)


async def test_tokens_outcomes_and_notifications_over_http(app: FastAPI, payouts_server: ServedKasir) -> None:
    merchant = await make_merchant(app)  # sealed with the served process's secret key (the app's settings)
    async with app.state.database.unit_of_work() as session:
        await payout_service.top_up(session, merchant.id, FUNDS, "Saldo awal", Actor.cli())

    async with CallbackReceiver() as receiver, httpx.AsyncClient(base_url=payouts_server.base_url) as http:
        token = await disbursement_token(http, merchant)
        payment_token = await access_token(http, merchant)

        for path in ROUTES:
            refused = await post_payout(http, merchant, path, {}, payment_token)
            assert refused.status_code == 401, (path, refused.text)
            assert refused.json()["responseCode"][:3] + refused.json()["responseCode"][5:] == "40101", path
        on_bnpl = await post_signed(http, merchant, CALCULATION, calculation_body(), token=token)
        assert (on_bnpl.status_code, on_bnpl.json()["responseCode"]) == (401, "4019001")
        balance = await post_payout(http, merchant, BALANCE, {"balanceTypes": ["cash"]}, token)
        assert (balance.status_code, balance.json()["responseCode"]) == (200, "2001100")
        inquiry = await post_payout(http, merchant, ACCOUNT_INQUIRY, inquiry_body(), token)
        assert (inquiry.json()["responseCode"], inquiry.json()["beneficiaryAccountName"]) == ("2001600", "BUDI SANTOSO")

        url = receiver.url("/payouts/notify")
        accepted: dict[str, tuple[str, int]] = {}  # partnerReferenceNo → final state, amount
        for number, (account, (http_status, code, answered, final)) in enumerate(OUTCOMES.items(), start=1):
            amount = 10_000 * number
            body = transfer_body(account, amount=f"{amount}.00", callback_url=url)
            answer = await post_payout(
                http, merchant, TRANSFER, body, token, idempotency_key=f"k-{body['partnerReferenceNo']}"
            )
            assert (answer.status_code, answer.json()["responseCode"]) == (http_status, code), (account, answer.text)
            if final is None:
                continue
            assert answer.json()["additionalInfo"]["latestTransactionStatus"] == answered, account
            accepted[body["partnerReferenceNo"]] = (final, amount)

        # One notification per transfer, each on its move into its final state (the delayed ones by the worker).
        received = await receiver.wait_for(len(accepted), path="/payouts/notify")
        payloads = [verify(request, merchant, url) for request in received]
        finals = {str(p["originalPartnerReferenceNo"]): str(p["latestTransactionStatus"]) for p in payloads}
        assert finals == {partner: final for partner, (final, _amount) in accepted.items()}
        rejected = next(p for p in payloads if p["latestTransactionStatus"] == "06")
        assert rejected["additionalInfo"] == {"reason": "Rejected by the beneficiary bank"}

        for partner, (final, _amount) in accepted.items():
            inquiry = await post_payout(
                http, merchant, TRANSFER_STATUS, status_body(partner_reference_no=partner), token
            )
            assert (inquiry.json()["responseCode"], inquiry.json()["latestTransactionStatus"]) == ("2003600", final)
            detail = await post_payout(http, merchant, HISTORY_DETAIL, {"originalPartnerReferenceNo": partner}, token)
            assert detail.json()["responseCode"] == "2001300"

        paid = sum(amount for final, amount in accepted.values() if final == "00")
        after = (await post_payout(http, merchant, BALANCE, {}, token)).json()["accountInfos"][0]
        assert after["ledgerBalance"]["value"] == f"{FUNDS - paid}.00"
        assert after["holdAmount"]["value"] == "0.00"
        assert after["availableBalance"]["value"] == f"{FUNDS - paid}.00"

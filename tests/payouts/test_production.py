"""Payouts in production (docs/decisions.md §11.9): processor kind `payout`, never simulated; without one the
account inquiry and the transfer answer 403xx01 while balance, status and history still answer; a rail's signed
notification to POST /processors/{name}/notify moves the transfer, with its balance effect."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from kasir.audit.service import Actor
from kasir.config import Settings, get_settings
from kasir.payouts.service import payout_service
from kasir.processors.protocols import (
    AccountInfo,
    AccountStatus,
    Event,
    ForgedNotification,
    Notification,
    PayoutAnswer,
    PayoutOrder,
    PayoutState,
)
from kasir.processors.registry import ConfigurationError, check_configuration, install
from kasir.processors.service import NotYourPayment, apply
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.wire.payouts import (
    ACCOUNT_INQUIRY,
    BALANCE,
    HISTORY_LIST,
    TRANSFER,
    TRANSFER_STATUS,
    disbursement_token,
    inquiry_body,
    post_payout,
    status_body,
    transfer_body,
)

SECRET = "rail-secret"


class BankRail:
    """A bank's payout API as a connector would wrap it: it takes every transfer and answers pending; the result
    comes in its signed notification."""

    timeout_seconds = 5.0

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def account_inquiry(self, bank_code: str, account_no: str) -> AccountInfo:
        return AccountInfo(AccountStatus.ACTIVE, "RINA WATI")

    async def transfer(self, order: PayoutOrder) -> PayoutAnswer:
        self.sent.append(order.reference)
        return PayoutAnswer(PayoutState.PENDING, f"BANK-{order.reference}")

    async def status(self, order: PayoutOrder) -> PayoutAnswer:
        return PayoutAnswer(PayoutState.PENDING, f"BANK-{order.reference}")


class RailProcessor:
    name = "testrail"
    simulates = False
    card = wallet = bnpl = va = None

    def __init__(self) -> None:
        self.payout = BankRail()

    def router(self) -> None:
        return None

    async def notifications(self, headers: Mapping[str, str], body: bytes) -> Sequence[Notification]:
        expected = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, headers.get("x-rail-signature", "")):
            raise ForgedNotification()
        data = json.loads(body)
        return [Notification("payout", data["reference"], Event(data["event"]), message=data.get("reason"))]


RAIL = RailProcessor()


def _factory(settings: Settings) -> Any:
    return RAIL


@pytest.fixture
def production(monkeypatch: pytest.MonkeyPatch) -> None:
    install("testrail", _factory)
    monkeypatch.setattr(get_settings(), "env", "production")
    monkeypatch.setattr(get_settings(), "processors", "payout=testrail")


async def funded(app: FastAPI) -> builders.TestMerchant:
    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await payout_service.top_up(session, merchant.id, 1_000_000, "Saldo awal", Actor.cli())
    return merchant


async def notify(client: httpx.AsyncClient, payload: dict[str, Any], *, forged: bool = False) -> httpx.Response:
    body = json.dumps(payload).encode()
    signature = hmac.new(b"wrong" if forged else SECRET.encode(), body, hashlib.sha256).hexdigest()
    return await client.post("/processors/testrail/notify", content=body, headers={"X-Rail-Signature": signature})


async def test_without_a_payout_processor_inquiry_and_transfer_are_not_allowed(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    monkeypatch.setattr(get_settings(), "env", "production")
    monkeypatch.setattr(get_settings(), "processors", "")
    inquiry = await post_payout(client, merchant, ACCOUNT_INQUIRY, inquiry_body(), token)
    assert inquiry.status_code == 403, inquiry.text
    assert inquiry.json()["responseCode"] == "4031601"
    transfer = await post_payout(client, merchant, TRANSFER, transfer_body(), token)
    assert transfer.status_code == 403, transfer.text
    assert transfer.json()["responseCode"] == "4031801"
    assert (await post_payout(client, merchant, BALANCE, {}, token)).json()["responseCode"] == "2001100"
    history = await post_payout(client, merchant, HISTORY_LIST, {}, token)
    assert [e["type"] for e in history.json()["detailData"]] == ["TOP_UP"]
    status = await post_payout(client, merchant, TRANSFER_STATUS, status_body(reference_no="DSBNONE"), token)
    assert status.json()["responseCode"] == "4043601"


def test_production_refuses_to_start_with_the_simulator_as_payout_rail() -> None:
    with pytest.raises(ConfigurationError, match="simulator for payout"):
        check_configuration(Settings(secret_key="k", env="production", processors="payout=simulator"))


@pytest.mark.usefixtures("production")
async def test_a_rails_notification_moves_the_transfer(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    inquiry = await post_payout(client, merchant, ACCOUNT_INQUIRY, inquiry_body(), token)
    assert inquiry.json()["beneficiaryAccountName"] == "RINA WATI"
    accepted = await post_payout(client, merchant, TRANSFER, transfer_body(amount="40000.00"), token)
    assert accepted.status_code == 200, accepted.text
    reference = accepted.json()["referenceNo"]
    assert accepted.json()["additionalInfo"]["latestTransactionStatus"] == "03"
    assert RAIL.payout.sent.count(reference) == 1
    forged = await notify(client, {"reference": reference, "event": "sent"}, forged=True)
    assert forged.status_code == 401
    sent = await notify(client, {"reference": reference, "event": "sent"})
    assert sent.status_code == 200, sent.text
    assert sent.json()["applied"] == [{"product": "payout", "reference": reference, "status": "00"}]
    again = await notify(client, {"reference": reference, "event": "sent"})  # a repeat changes nothing
    assert again.json()["applied"][0]["status"] == "00"
    backwards = await notify(client, {"reference": reference, "event": "failed", "reason": "x"})
    assert backwards.status_code == 409, backwards.text
    async with app.state.database.unit_of_work(read_only=True) as session:
        assert (await payout_service.balance(session, merchant.id)).ledger == 960_000
    returned = await notify(client, {"reference": reference, "event": "returned", "reason": "Account closed"})
    assert returned.json()["applied"][0]["status"] == "04"
    status = (await post_payout(client, merchant, TRANSFER_STATUS, status_body(reference_no=reference), token)).json()
    assert (status["latestTransactionStatus"], status["transactionStatusDesc"]) == ("04", "Refunded")
    assert status["additionalInfo"]["reason"] == "Account closed"
    assert status["referenceNumber"] == f"BANK-{reference}"
    async with app.state.database.unit_of_work(read_only=True) as session:
        view = await payout_service.balance(session, merchant.id)
    assert (view.ledger, view.hold) == (1_000_000, 0)
    history = (await post_payout(client, merchant, HISTORY_LIST, {}, token)).json()["detailData"]
    assert [(e["type"], e["status"]) for e in history][:2] == [("REFUND", "SUCCESS"), ("SEND_MONEY", "SUCCESS")]


async def test_a_payout_rail_per_bank(app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    install("testrail", _factory)
    monkeypatch.setattr(get_settings(), "env", "production")
    monkeypatch.setattr(get_settings(), "processors", "payout.014=testrail")
    merchant = await funded(app)
    token = await disbursement_token(client, merchant)
    bca = await post_payout(client, merchant, TRANSFER, transfer_body(bank_code="0140001"), token)
    assert bca.status_code == 200, bca.text
    mandiri = await post_payout(client, merchant, TRANSFER, transfer_body(bank_code="008"), token)
    assert mandiri.json()["responseCode"] == "4031801"
    # its notifications move only the transfers of the banks it serves
    async with app.state.database.unit_of_work() as session:
        with pytest.raises(NotYourPayment):
            await apply(session, Notification("payout", bca.json()["referenceNo"], Event.SENT), by="other")

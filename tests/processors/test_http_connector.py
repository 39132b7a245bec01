"""The reference connector (examples/processor-http) proves the seam in production.

`kasir serve` runs with KASIR_ENV=production, its own database (SQLite, or PostgreSQL with
KASIR_TEST_DB=postgres) and KASIR_PROCESSORS=card=http,wallet=http,bnpl=http,va=http; the connector
is installed as pip would leave it (its sources and a dist-info naming its entry point) and
talks to a fake acquirer, issuer and lender on 127.0.0.1 (fake_money_mover.py) over the
signed protocol of PROTOCOL.md. Callbacks reach the test's receiver on 127.0.0.1 through the
operator allow-list KASIR_CALLBACK_ALLOWED_NETWORKS; production's SSRF rules stay on.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from kasir.card.models import CardAttempt
from kasir.config import Settings
from kasir.db import Database, fetch, upgrade_schema
from tests.conftest import TEST_ADMIN_TOKEN, TEST_SECRET_KEY
from tests.processors.connector import CONNECTOR, install_connector
from tests.processors.fake_money_mover import APPROVED, CHALLENGED, DECLINED, FakeMoneyMover, signed_headers
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.forms import page_forms, post_form
from tests.support.postgres import PostgresCluster
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire.callbacks import check_notification
from tests.support.wire.card import charge_body, post_charge
from tests.support.wire.card import check_callback as check_card_callback
from tests.support.wire.snap import CHECKOUT, STATUS, checkout_body, post_signed
from tests.support.wire.wallet import CREATE, create_body, dummy_payment, inquire, post_wallet, refund
from tests.support.wire.wallet import check_callback as check_wallet_callback
from tests.support.worker import callbacks_settled_in

pytestmark = pytest.mark.slow

SECRET = "fake-money-mover-shared-secret"
NOTIFY = "/processors/http/notify"


@dataclass
class Production:
    server: ServedKasir
    database: Database

    @property
    def url(self) -> str:
        return self.server.base_url

    async def merchant(self) -> builders.TestMerchant:
        return await make_merchant(SimpleNamespace(state=SimpleNamespace(database=self.database)))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeMoneyMover]:
    mover = FakeMoneyMover(SECRET)
    mover.start()
    try:
        yield mover
    finally:
        mover.stop()


@pytest.fixture(scope="module")
async def production(
    tmp_path_factory: pytest.TempPathFactory, postgres: PostgresCluster | None, fake: FakeMoneyMover, app: FastAPI
) -> AsyncIterator[Production]:
    """`app`: the test process's settings (its KASIR_SECRET_KEY seals the merchants made here)."""
    directory = tmp_path_factory.mktemp("production")
    if postgres is not None:
        url = postgres.create_database("kasir_production")
    else:
        url = f"sqlite+aiosqlite:///{directory / 'kasir.db'}"
    database = Database(Settings(env="production", data_dir=directory, database_url=url, secret_key=TEST_SECRET_KEY))
    await upgrade_schema(database)
    env = {
        "KASIR_ENV": "production",
        "KASIR_DATA_DIR": str(directory),
        "KASIR_DATABASE_URL": url,
        "KASIR_SECRET_KEY": TEST_SECRET_KEY,
        "KASIR_ADMIN_TOKEN": TEST_ADMIN_TOKEN,
        "KASIR_CALLBACK_POLL_SECONDS": "0.1",
        "KASIR_CALLBACK_TIMEOUT_SECONDS": "2",
        "KASIR_DEBUG_WRITE_SEAT_SECONDS": "2",
        "KASIR_CALLBACK_ALLOWED_NETWORKS": "127.0.0.0/8",
        "KASIR_PROCESSORS": "card=http,wallet=http,bnpl=http,va=http,payout=http",
        # A transfer whose answer the rail lost is asked about (`status`) after twice this: seconds, not ten.
        "KASIR_PROCESSOR_HTTP_TIMEOUT_SECONDS": "2",
        "KASIR_PROCESSOR_HTTP_URL": fake.base_url,
        "KASIR_PROCESSOR_HTTP_SECRET": SECRET,
        "PYTHONPATH": install_connector(directory / "site"),
    }
    server = ServedKasir(env)
    await asyncio.to_thread(server.start)
    fake.kasir_url = server.base_url
    try:
        yield Production(server, database)
    finally:
        await asyncio.to_thread(server.stop)
        await database.dispose()


async def test_production_serves_the_connectors_products(production: Production) -> None:
    assert "Kasir production" in production.server.log()
    assert "products live: card=http, wallet=http, bnpl=http, va=http, payout=http" in production.server.log()
    async with httpx.AsyncClient(base_url=production.url) as http:
        ready = (await http.get("/readyz")).json()
    assert ready["products"] == {"card": "http", "wallet": "http", "bnpl": "http", "va": "http", "payout": "http"}


async def test_close_charges_approved_declined_and_challenged(
    production: Production, fake: FakeMoneyMover, receiver: CallbackReceiver
) -> None:
    merchant = await production.merchant()
    async with httpx.AsyncClient(base_url=production.url) as http:
        approved = charge_body(number=APPROVED, callback_url=receiver.url("/card/approved"))
        answer = await post_charge(http, merchant, approved)
        assert answer.status_code == 200, answer.text
        assert answer.json()["data"]["paymentStatus"] == "SUCCESS"

        declined = charge_body(number=DECLINED, callback_url=receiver.url("/card/declined"))
        answer = await post_charge(http, merchant, declined)
        assert answer.json()["data"]["paymentStatus"] == "PENDING"

        challenged = charge_body(number=CHALLENGED, callback_url=receiver.url("/card/challenged"))
        answer = await post_charge(http, merchant, challenged)
        data = answer.json()["data"]
        assert data["paymentStatus"] == "PENDING"
        assert data["link"] == f"{fake.base_url}/challenge/{data['transactionId']}/1"  # the acquirer's page
        assert (await http.get(data["link"])).status_code == 200
        back = await http.post(data["link"], data={"answer": "pass"})  # the customer passes the challenge
        assert back.status_code == 303
        assert back.headers["location"] == f"{production.url}/card/pages/{data['transactionId']}/return?attempt=1"
        returned = await http.get(back.headers["location"])  # back at Kasir: on to the merchant
        assert returned.status_code == 303
        assert "status=SUCCESS" in returned.headers["location"]

    [ok] = await receiver.wait_for(1, path="/card/approved")
    assert check_card_callback(ok, merchant, approved)["transaction_status"] == "SUCCESS"
    [no] = await receiver.wait_for(1, path="/card/declined")
    payload = check_card_callback(no, merchant, declined)
    assert (payload["transaction_status"], payload["response_message"]) == ("FAILED", "Do not honour (fake acquirer)")
    [passed] = await receiver.wait_for(1, path="/card/challenged")
    assert check_card_callback(passed, merchant, challenged)["transaction_status"] == "SUCCESS"
    # Notified and returned: one callback, sent once (settled, so never again).
    settled = await callbacks_settled_in(production.database, merchant.id)
    [(status, attempts)] = [(c.status, c.attempts_made) for c in settled if c.url == receiver.url("/card/challenged")]
    assert (status, attempts) == ("delivered", 1)
    assert len([r for r in receiver.requests if r.path == "/card/challenged"]) == 1
    assert fake.notified[-1][0] == 200

    # The acquirer got the card for its one call; Kasir kept the masked number only.
    charges = [call.body for call in fake.calls if call.path == "/v1/card/charges"]
    assert {c["card"]["number"] for c in charges} >= {APPROVED, DECLINED, CHALLENGED}
    async with production.database.unit_of_work(read_only=True) as session:
        masked = {row.masked_card for row in await fetch(session, select(CardAttempt.masked_card))}
    assert "424242******4242" in masked
    assert not any(number in masked for number in (APPROVED, DECLINED, CHALLENGED))
    assert fake.refused == 0


async def test_open_charge_through_the_hosted_page(
    production: Production, fake: FakeMoneyMover, receiver: CallbackReceiver
) -> None:
    merchant = await production.merchant()
    async with httpx.AsyncClient(base_url=production.url) as http:
        body = charge_body(mode="OPEN", number=None, callback_url=receiver.url("/card/open"))
        answer = await post_charge(http, merchant, body)
        link = answer.json()["data"]["link"]
        assert link.startswith(f"{production.url}/card/pages/")
        page = await http.get(link)
        assert page.status_code == 200
        assert "test cards" not in page.text.lower()  # the simulator's table, never in production
        assert "one-time password" not in page.text.lower()
        assert "simulator" not in page.text.lower()  # no staging banner either
        forms = await page_forms(http, link)
        year = str(time.gmtime().tm_year + 3)
        card = {"cardNumber": APPROVED, "cardExpiredMonth": "12", "cardExpiredYear": year, "cardCvn": "123"}
        paid = await post_form(http, forms["pay-form"], **card, cardHolderName="Siti Rahayu", tenor="0")
        assert paid.status_code == 303, paid.text
        assert paid.headers["location"].startswith(body["returnUrl"])
        assert "status=SUCCESS" in paid.headers["location"]
    [callback] = await receiver.wait_for(1, path="/card/open")
    assert check_card_callback(callback, merchant, body)["transaction_status"] == "SUCCESS"


async def test_wallet_paid_by_the_issuers_notification_then_refunded(
    production: Production, fake: FakeMoneyMover, receiver: CallbackReceiver
) -> None:
    merchant = await production.merchant()
    async with httpx.AsyncClient(base_url=production.url) as http:
        answer = await post_wallet(http, merchant, CREATE, create_body(receiver.url("/wallet"), channel="DANA"))
        assert answer.status_code == 200, answer.text
        tx = answer.json()
        assert (await dummy_payment(http, merchant, tx)).status_code == 404  # production never simulates
        checkout = await http.get(tx["payment_url"])
        assert checkout.status_code == 303
        assert checkout.headers["location"] == f"{fake.base_url}/checkout/{tx['transaction_id']}"
        assert (await http.post(checkout.headers["location"])).status_code == 303  # the customer pays the issuer
        [paid] = await receiver.wait_for(1, path="/wallet")
        payload = check_wallet_callback(paid, merchant, tx)
        assert (payload["transaction_status"], payload["issuer"]) == ("PAID", "DANA")

        refunded = await refund(http, merchant, tx, 40_000)
        assert refunded.status_code == 200, refunded.text
        assert refunded.json()["transaction_status"] == "REFUNDED"
        assert fake.refunds[f"{tx['transaction_id']}-R1"] == 40_000
        callbacks = await receiver.wait_for(2, path="/wallet")
        assert check_wallet_callback(callbacks[1], merchant, tx)["transaction_status"] == "REFUNDED"
        assert (await inquire(http, merchant, tx))["refunded_amount"] == 40_000
        # The issuer's paid notification, retried late (after the refund): applied before, changes nothing.
        assert await fake.notify({"product": "wallet", "reference": tx["transaction_id"], "event": "paid"}) == 200
        assert (await inquire(http, merchant, tx))["transaction_status"] == "REFUNDED"


async def test_bnpl_approved_by_the_lenders_notification(
    production: Production, fake: FakeMoneyMover, receiver: CallbackReceiver
) -> None:
    merchant = await production.merchant()
    callback_url = receiver.url("/bnpl")
    async with httpx.AsyncClient(base_url=production.url) as http:
        answer = await post_signed(http, merchant, CHECKOUT, checkout_body(callback_url))
        assert answer.status_code == 200, answer.text
        data = answer.json()
        approval = await http.get(data["qrContent"])
        assert approval.status_code == 303
        assert approval.headers["location"] == f"{fake.base_url}/approve/{data['referenceNo']}"
        assert [p["tenure"] for p in fake.applications[data["referenceNo"]]["plans"]] == [3, 6, 12]
        assert (await http.post(approval.headers["location"], data={"tenure": "6"})).status_code == 200
        [notification] = await receiver.wait_for(1, path="/bnpl")
        payload = check_notification(notification, merchant, callback_url)
        assert (payload["latestTransactionStatus"], payload["tenure"]) == ("00", 6)
        status = await post_signed(http, merchant, STATUS, {"originalReferenceNo": data["referenceNo"]})
        assert status.json()["latestTransactionStatus"] == "00"


async def test_a_forged_notification_is_refused_and_a_repeated_one_changes_nothing(
    production: Production, fake: FakeMoneyMover, receiver: CallbackReceiver
) -> None:
    merchant = await production.merchant()
    async with httpx.AsyncClient(base_url=production.url) as http:
        tx = (await post_wallet(http, merchant, CREATE, create_body(receiver.url("/forged")))).json()
        await http.get(tx["payment_url"])  # the issuer knows the payment
        paid = {"product": "wallet", "reference": tx["transaction_id"], "event": "paid"}
        body = json.dumps({"notifications": [paid]}).encode()
        stale = str(int(time.time()) - 3600)
        forgeries: list[dict[str, Any]] = [
            {"Content-Type": "application/json"},  # unsigned
            signed_headers("another-secret", NOTIFY, body),  # signed by someone else
            signed_headers(SECRET, "/processors/http/other", body),  # for another path
            signed_headers(SECRET, NOTIFY, body, timestamp=stale),  # replayed an hour later
        ]
        for headers in forgeries:
            answer = await http.post(NOTIFY, content=body, headers=headers)
            assert answer.status_code == 401, (headers, answer.text)
        tampered = signed_headers(SECRET, NOTIFY, body)
        answer = await http.post(NOTIFY, content=body.replace(b"paid", b"PAID"), headers=tampered)
        assert answer.status_code == 401
        assert (await inquire(http, merchant, tx))["transaction_status"] == "PENDING"
        assert (await http.post("/processors/simulator/notify", content=body)).status_code == 404

        for _ in range(2):  # the issuer's real notification, sent twice (a retry): applied once
            answer = await http.post(NOTIFY, content=body, headers=signed_headers(SECRET, NOTIFY, body))
            assert answer.status_code == 200, answer.text
            assert answer.json()["applied"] == [{"product": "wallet", "reference": tx["transaction_id"],
                                                 "status": "PAID"}]  # fmt: skip
        assert (await inquire(http, merchant, tx))["transaction_status"] == "PAID"
    # Applied once: one callback, sent once (settled, so never again).
    [callback] = await callbacks_settled_in(production.database, merchant.id)
    assert (callback.status, callback.attempts_made) == ("delivered", 1)
    assert len([r for r in receiver.requests if r.path == "/forged"]) == 1


async def test_a_va_is_numbered_by_the_bank_and_paid_through_its_notification(
    production: Production, fake: FakeMoneyMover, receiver: CallbackReceiver
) -> None:
    """docs/decisions.md §9.8: the issuer numbers the VA; its signed notification of a payment is applied as a
    dummy payment is, once per bank reference; the staging dummy payment is not served; a cancel tells the bank."""
    from tests.support.wire import va as va_wire

    merchant = await production.merchant()
    async with httpx.AsyncClient(base_url=production.url) as http:
        body = va_wire.create_body(receiver.url("/va"), system="PARTIAL", amount=30_000, va_number="4242")
        answer = await va_wire.post(http, merchant, va_wire.CREATE, body)
        assert answer.status_code == 200, answer.text
        va = answer.json()["data"]
        assert va["payment_details"]["va_number"] == "8808" + "0000004242"  # the bank's number
        assert fake.accounts[(va["transaction_id"], 0)]["payment_system"] == "PARTIAL"
        assert (await va_wire.pay(http, merchant, va, 10_000)).status_code == 404  # production never simulates
        paid = {"product": "va", "reference": va["transaction_id"], "event": "paid", "amount": 10_000,
                "bank_reference": "BCA-TRX-1"}  # fmt: skip
        for _ in range(2):  # sent again (a retry): applied once
            assert await fake.notify(paid) == 200
        [callback] = await receiver.wait_for(1, path="/va")
        payload = va_wire.check_callback(callback, merchant, va)
        assert (payload["transaction_status"], payload["payment_details"]["remaining_amount"]) == (
            "PARTIALLY_PAID",
            20_000,
        )
        seen = await va_wire.inquire(http, merchant, va)
        assert seen["payment_details"]["total_paid_amount"] == 10_000
        assert len(seen["payment_history"]) == 1
        cancelled = await va_wire.cancel(http, merchant, va)
        assert cancelled.status_code == 200, cancelled.text
        # The bank retries its notification after the VA closed: answered, and nothing changes.
        assert await fake.notify(paid) == 200
        assert (await va_wire.inquire(http, merchant, va))["payment_details"]["total_paid_amount"] == 10_000
    assert va["transaction_id"] in fake.cancelled_accounts


async def test_no_answer_is_processor_unavailable_and_a_refusal_is_processor_refused(fake: FakeMoneyMover) -> None:
    """The connector's errors as the protocols define them: a money mover that does not answer (a closed
    port) is ProcessorUnavailable (503: nothing recorded, retry), a 4xx is ProcessorRefused (409)."""
    import sys

    sys.path.insert(0, str(CONNECTOR / "src"))
    try:
        from kasir_processor_http import HttpProcessor
    finally:
        sys.path.remove(str(CONNECTOR / "src"))
    from kasir.processors.protocols import ProcessorRefused, ProcessorUnavailable
    from tests.support.postgres import free_port

    closed = HttpProcessor(f"http://127.0.0.1:{free_port()}", SECRET, timeout=2)
    with pytest.raises(ProcessorUnavailable) as unavailable:
        await closed.wallet.void("WLTNOSUCH")
    assert (unavailable.value.http_status, unavailable.value.headers) == (503, {"Retry-After": "5"})
    with pytest.raises(ProcessorUnavailable):
        await closed.card.status("CARDNOSUCH", 1)
    wrong_secret = HttpProcessor(fake.base_url, "not-the-secret", timeout=2)
    with pytest.raises(ProcessorRefused):  # the fake refuses the unsigned call: 401
        await wrong_secret.wallet.void("WLTNOSUCH")
    assert fake.refused >= 1


async def test_the_connectors_payout_rail_speaks_the_protocol(fake: FakeMoneyMover) -> None:
    """examples/processor-http's payout rail (issue 46 item 5) against the fake money mover, which checks every
    call's signature: account inquiry's three answers, a transfer made once whatever the repeats, its status
    (`unknown` for a reference never sent), and the rail's signed payout notification as Kasir's Notification."""
    import sys
    from datetime import UTC, datetime

    sys.path.insert(0, str(CONNECTOR / "src"))
    try:
        from kasir_processor_http import HttpProcessor
    finally:
        sys.path.remove(str(CONNECTOR / "src"))
    from kasir.processors.protocols import (
        AccountStatus,
        Event,
        PayoutOrder,
        PayoutState,
        ProcessorRefused,
        ProcessorUnavailable,
    )

    rail = HttpProcessor(fake.base_url, SECRET, timeout=2).payout
    assert rail is not None
    active = await rail.account_inquiry("014", "1234560001")
    assert (active.status, active.name) == (AccountStatus.ACTIVE, "DEWI LESTARI")
    assert (await rail.account_inquiry("014", "1234560004")).status is AccountStatus.INVALID
    assert (await rail.account_inquiry("OVO", "081234560005")).status is AccountStatus.INACTIVE

    def order(reference: str, account_no: str) -> PayoutOrder:
        return PayoutOrder(reference, f"P-{reference}", 150_000, "IDR", "014", account_no, "DEWI LESTARI", "OUR",
                           "gaji", datetime.now(UTC))  # fmt: skip

    sent = order("DSB00000000000000000001", "1234560001")
    assert (await rail.status(sent)).state is PayoutState.UNKNOWN
    first, again = await rail.transfer(sent), await rail.transfer(sent)
    assert first == again
    assert (first.state, first.rail_reference) == (PayoutState.SENT, f"RAIL-{sent.reference}")
    assert list(fake.payouts).count(sent.reference) == 1
    assert fake.payouts[sent.reference]["amount"] == 150_000
    later = order("DSB00000000000000000002", "1234560002")
    assert (await rail.transfer(later)).state is PayoutState.PENDING
    lost = order("DSB00000000000000000009", "1234560009")
    with pytest.raises(ProcessorUnavailable):  # made, but its answer lost: Kasir must ask, not send
        await rail.transfer(lost)
    assert (await rail.status(lost)).state is PayoutState.SENT
    with pytest.raises(ProcessorRefused):
        await HttpProcessor(fake.base_url, "not-the-secret", timeout=2).payout.transfer(sent)  # type: ignore[union-attr]

    processor = HttpProcessor(fake.base_url, SECRET, timeout=2)
    failed = {"product": "payout", "reference": later.reference, "event": "failed", "bank_reference": "RAIL-2",
              "message": "Rejected by the beneficiary bank"}  # fmt: skip
    body = json.dumps({"notifications": [failed]}).encode()
    [notification] = await processor.notifications(
        {k.lower(): v for k, v in signed_headers(SECRET, NOTIFY, body).items()}, body
    )
    assert (notification.product, notification.reference, notification.event) == ("payout", later.reference,
                                                                                  Event.FAILED)  # fmt: skip
    assert (notification.bank_reference, notification.message) == ("RAIL-2", "Rejected by the beneficiary bank")


async def test_transfers_through_the_connectors_payout_rail_in_production(
    production: Production, fake: FakeMoneyMover, receiver: CallbackReceiver
) -> None:
    """Issue 46 item 5: KASIR_ENV=production, payout=http. An account the rail does not know is refused before
    anything is held; a transfer sent at once is 00; a pending one ends by the rail's signed notification, with the
    merchant's own notification; one whose answer the rail lost stays 01 until the worker asks `status`, and is
    never sent twice."""
    from kasir.audit.service import Actor
    from kasir.payouts.service import payout_service
    from tests.support.wire.callbacks import bnpl_svc_signature, notify_signature
    from tests.support.wire.payouts import (
        ACCOUNT_INQUIRY,
        BALANCE,
        TRANSFER_STATUS,
        disbursement_token,
        inquiry_body,
        post_payout,
        status_body,
        transfer_body,
    )
    from tests.support.wire.payouts import TRANSFER as PAYOUT

    merchant = await production.merchant()
    async with production.database.unit_of_work() as session:
        await payout_service.top_up(session, merchant.id, 1_000_000, "Saldo awal", Actor.cli())
    async with httpx.AsyncClient(base_url=production.url) as http:
        token = await disbursement_token(http, merchant)
        account = await post_payout(http, merchant, ACCOUNT_INQUIRY, inquiry_body("1234560001"), token)
        assert account.json()["beneficiaryAccountName"] == "DEWI LESTARI", account.text  # the rail's, not a simulator's
        refused = await post_payout(http, merchant, PAYOUT, transfer_body("1234560004"), token)
        assert refused.json()["responseCode"] == "4041811", refused.text

        sent = await post_payout(http, merchant, PAYOUT, transfer_body("1234560001", amount="100000.00"), token)
        assert sent.json()["additionalInfo"]["latestTransactionStatus"] == "00", sent.text
        reference = sent.json()["referenceNo"]
        assert fake.payouts[reference]["amount"] == 100_000

        callback_url = receiver.url("/payout-pending")
        body = transfer_body("1234560002", amount="50000.00", callback_url=callback_url)
        pending = await post_payout(http, merchant, PAYOUT, body, token)
        assert pending.json()["additionalInfo"]["latestTransactionStatus"] == "03", pending.text
        pending_reference = pending.json()["referenceNo"]
        assert await fake.settle_payout(pending_reference, "failed", "Rejected by the beneficiary bank") == 200
        [notification] = await receiver.wait_for(1, path="/payout-pending")
        payload = notification.json()
        assert (payload["latestTransactionStatus"], payload["additionalInfo"]) == (
            "06", {"reason": "Rejected by the beneficiary bank"},
        )  # fmt: skip
        # §11.8, computed here: the notification's HMAC over callbackUrl, and svc-signature as BNPL's.
        raw = notification.body
        headers = notification.headers
        assert headers["x-signature"] == notify_signature(
            merchant.credentials.client_secret, callback_url, raw, headers["x-timestamp"]
        )
        assert headers["svc-signature"] == bnpl_svc_signature(
            merchant.credentials.hash_key, pending_reference, body["partnerReferenceNo"]
        )

        lost = await post_payout(http, merchant, PAYOUT, transfer_body("1234560009", amount="20000.00"), token)
        assert lost.json()["additionalInfo"]["latestTransactionStatus"] == "01", lost.text
        lost_reference = lost.json()["referenceNo"]
        deadline = time.monotonic() + 60  # the worker asks after twice the rail's 2 s timeout
        while True:
            status = await post_payout(http, merchant, TRANSFER_STATUS,
                                       status_body(reference_no=lost_reference), token)  # fmt: skip
            if status.json()["latestTransactionStatus"] == "00" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        assert status.json()["latestTransactionStatus"] == "00", status.text
        assert fake.payout_calls.count(lost_reference) == 1  # learnt by `status`, never sent again
        balance = (await post_payout(http, merchant, BALANCE, {}, token)).json()["accountInfos"][0]
        assert (balance["ledgerBalance"]["value"], balance["holdAmount"]["value"]) == ("880000.00", "0.00")

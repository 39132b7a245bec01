"""End to end: checkout -> approval page -> signed notification; expiry; status inquiry."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from kasir.bnpl.jobs import expire_due_bnpl_transactions
from kasir.config import get_settings
from kasir.db import Database
from kasir.kit.clock import clock, parse_aware
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.forms import page_forms, post_form, submit
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire.callbacks import check_notification
from tests.support.wire.snap import CHECKOUT, STATUS, access_token, checkout_body, external_id, item, post_signed
from tests.support.worker import settled_callbacks


async def checkout(
    client: httpx.AsyncClient, merchant: builders.TestMerchant, callback_url: str, **kw: Any
) -> dict[str, Any]:
    response = await post_signed(client, merchant, CHECKOUT, checkout_body(callback_url, **kw))
    assert response.status_code == 200, response.text
    return dict(response.json())


async def inquire(client: httpx.AsyncClient, merchant: builders.TestMerchant, body: dict[str, Any]) -> httpx.Response:
    return await post_signed(client, merchant, STATUS, body)


def page_path(data: dict[str, Any]) -> str:
    return str(data["qrContent"]).removeprefix(get_settings().public_url)


async def test_checkout_approve_on_page_notifies_and_inquiry_follows(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    callback_url = receiver.url("/bnpl/notify")
    items = [item("40000.00", 2, name="Sepatu Lari"), item("20000.00", 1, item_id="shippingfee", category="FEES")]
    data = await checkout(client, merchant, callback_url, items=items)
    reference_no, partner_ref = data["referenceNo"], data["partnerReferenceNo"]

    status = await inquire(client, merchant, {"originalReferenceNo": reference_no})
    assert status.status_code == 200, status.text
    assert status.json()["responseCode"] == "2009300"
    assert status.json()["latestTransactionStatus"] == "01"

    page = await client.get(page_path(data))
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert merchant.credentials.name in html
    assert "Sepatu Lari" in html
    assert "Rp100.000" in html
    assert "Rp18.947 a month" in html  # the 6-month monthly installment of the default table
    action = re.search(r'action="([^"]+/approve)"', html)
    assert action is not None
    assert re.findall(r'name="tenure" value="(\d+)"', html) == ["3", "6", "12"]

    forms = await page_forms(client, page_path(data))
    approved = await post_form(client, forms["approve-form"], tenure=6)
    assert approved.status_code == 303
    after = await client.get(approved.headers["location"])
    assert 'data-code="00"' in after.text
    assert "approve-form" not in after.text

    [notification] = await receiver.wait_for(1, path="/bnpl/notify")
    payload = check_notification(notification, merchant, callback_url)
    assert payload["originalPartnerReferenceNo"] == partner_ref
    assert payload["originalReferenceNo"] == reference_no
    assert payload["latestTransactionStatus"] == "00"
    assert payload["transactionStatusDesc"] == "Success"
    assert payload["amount"] == {"value": "100000.00", "currency": "IDR"}
    assert payload["tenure"] == 6
    parse_aware(payload["paidTime"])
    assert payload["additionalInfo"]["installment"]["monthlyInstallment"] == {"value": "18947.00", "currency": "IDR"}

    status = await inquire(client, merchant, {"originalPartnerReferenceNo": partner_ref})
    body = status.json()
    assert body["latestTransactionStatus"] == "00"
    assert body["referenceNo"] == reference_no
    assert body["originalReferenceNo"] == reference_no
    assert body["tenure"] == 6
    assert body["paidTime"] == payload["paidTime"]

    # a second decision is refused and sends nothing
    again = await post_form(client, forms["approve-form"], tenure=3)
    assert again.status_code == 409
    rejected = await post_form(client, forms["reject-form"])
    assert rejected.status_code == 409
    assert len(receiver.requests) == 1


async def test_reject_on_page_notifies_06(app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver) -> None:
    merchant = await make_merchant(app)
    callback_url = receiver.url("/bnpl/reject")
    data = await checkout(client, merchant, callback_url)
    rejected = await submit(client, page_path(data), "reject-form")
    assert rejected.status_code == 303
    [notification] = await receiver.wait_for(1, path="/bnpl/reject")
    payload = check_notification(notification, merchant, callback_url)
    assert payload["latestTransactionStatus"] == "06"
    assert payload["tenure"] == 0  # issue 26: a number, never null; 0 while no tenure is chosen
    assert "paidTime" not in payload
    status = await inquire(client, merchant, {"originalReferenceNo": data["referenceNo"]})
    assert status.json()["latestTransactionStatus"] == "06"


async def test_expiry_moves_01_to_05_and_notifies(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    callback_url = receiver.url("/bnpl/expired")
    data = await checkout(client, merchant, callback_url)
    kept = await checkout(client, merchant, callback_url)

    clock.advance(24 * 3600 - 5)
    await expire_due_bnpl_transactions(app.state.database)
    status = await inquire(client, merchant, {"originalReferenceNo": data["referenceNo"]})
    assert status.json()["latestTransactionStatus"] == "01"  # not yet due

    late_forms = await page_forms(client, page_path(data))
    await submit(client, page_path(kept), "approve-form", tenure=3)
    clock.advance(10)
    await expire_due_bnpl_transactions(app.state.database)  # the embedded worker may have been first: same result
    status = await inquire(client, merchant, {"originalReferenceNo": data["referenceNo"]})
    assert status.json()["latestTransactionStatus"] == "05"
    assert status.json()["transactionStatusDesc"] == "Expired"
    assert (await inquire(client, merchant, {"originalReferenceNo": kept["referenceNo"]})).json()[
        "latestTransactionStatus"
    ] == "00"

    requests = await receiver.wait_for(2, path="/bnpl/expired")
    by_ref = {r.json()["originalReferenceNo"]: r for r in requests}
    payload = check_notification(by_ref[data["referenceNo"]], merchant, callback_url)
    assert payload["latestTransactionStatus"] == "05"
    assert payload["transactionStatusDesc"] == "Expired"
    assert await expire_due_bnpl_transactions(app.state.database) == 0

    late = await post_form(client, late_forms["approve-form"], tenure=3)
    assert late.status_code == 409
    assert len(receiver.requests) == 2


async def test_approval_after_validity_is_refused(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    data = await checkout(client, merchant, "http://127.0.0.1:9/cb")
    forms = await page_forms(client, page_path(data))
    clock.advance(24 * 3600 + 1)
    late = await post_form(client, forms["approve-form"], tenure=3)
    assert late.status_code == 409
    assert "expired" in late.text


async def test_unknown_tenure_is_refused(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    data = await checkout(client, merchant, "http://127.0.0.1:9/cb")
    response = await submit(client, page_path(data), "approve-form", tenure=5)
    assert response.status_code == 400
    status = await inquire(client, merchant, {"originalReferenceNo": data["referenceNo"]})
    assert status.json()["latestTransactionStatus"] == "01"


async def test_inquiry_failures(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    other = await make_merchant(app)
    data = await checkout(client, merchant, "http://127.0.0.1:9/cb")
    missing = await inquire(client, merchant, {})
    assert missing.status_code == 400
    assert missing.json() == {
        "responseCode": "4009302",
        "responseMessage": "Invalid Mandatory Field originalReferenceNo",
    }
    for body in (
        {"originalReferenceNo": "BNPLNOSUCH"},
        {"originalPartnerReferenceNo": "NO-SUCH-ORDER"},
        {"originalReferenceNo": data["referenceNo"], "originalPartnerReferenceNo": "OTHER"},
    ):
        response = await inquire(client, merchant, body)
        assert response.status_code == 404
        assert response.json() == {"responseCode": "4049301", "responseMessage": "Transaction Not Found"}
    foreign = await inquire(client, other, {"originalReferenceNo": data["referenceNo"]})
    assert foreign.json()["responseCode"] == "4049301"
    token = await access_token(client, merchant)
    both = await post_signed(
        client,
        merchant,
        "/v1.1/bnpl/status",
        {"originalReferenceNo": data["referenceNo"], "originalPartnerReferenceNo": data["partnerReferenceNo"]},
        token=token,
    )
    assert both.status_code == 200, both.text
    for field in ("qrContent", "qrUrl", "createdAt", "validityPeriod", "paymentDetails", "paymentChannel"):
        assert both.json()[field] == data[field]


async def test_pages_are_staging_only(app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    merchant = await make_merchant(app)
    data = await checkout(client, merchant, "http://127.0.0.1:9/cb")
    monkeypatch.setattr(get_settings(), "env", "production")
    assert (await client.get(page_path(data))).status_code == 404
    assert (await client.post(f"{page_path(data)}/approve", data={"tenure": "3"})).status_code == 404
    image = await client.get(str(data["qrUrl"]).removeprefix("http://kasir.test"))
    assert image.status_code == 200


async def test_over_a_real_socket(app: FastAPI, served: ServedKasir, receiver: CallbackReceiver) -> None:
    """Checkout, page, approve and notification across `kasir serve` in a subprocess."""
    merchant = await make_merchant(app)
    callback_url = receiver.url("/bnpl/served")
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        data = await checkout(http, merchant, callback_url)
        assert data["qrContent"].startswith(served.base_url)
        page = await http.get(data["qrContent"])
        assert page.status_code == 200
        approved = await submit(http, data["qrContent"], "approve-form", tenure=12)
        assert approved.status_code == 303
        image = await http.get(data["qrUrl"])
        assert image.content.startswith(b"\x89PNG")
    [notification] = await receiver.wait_for(1, path="/bnpl/served")
    payload = check_notification(notification, merchant, callback_url)
    assert payload["latestTransactionStatus"] == "00"
    assert payload["tenure"] == 12


async def test_concurrent_decisions_only_one_wins(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    callback_url = receiver.url("/bnpl/race")
    data = await checkout(client, merchant, callback_url)
    forms = await page_forms(client, page_path(data))
    responses = await asyncio.gather(
        post_form(client, forms["approve-form"], tenure=3),
        post_form(client, forms["reject-form"]),
        post_form(client, forms["approve-form"], tenure=6),
    )
    assert sorted(r.status_code for r in responses) == [303, 409, 409]
    [notification] = await receiver.wait_for(1, path="/bnpl/race")
    await settled_callbacks(app, merchant.id)
    assert len(receiver.requests) == 1
    status = await inquire(client, merchant, {"originalReferenceNo": data["referenceNo"]})
    assert status.json()["latestTransactionStatus"] == notification.json()["latestTransactionStatus"]


async def test_concurrent_requests_with_one_external_id(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    shared = external_id()
    responses = await asyncio.gather(
        *(post_signed(client, merchant, CHECKOUT, checkout_body(), external=shared) for _ in range(3))
    )
    assert sorted(r.status_code for r in responses) == [200, 409, 409]


async def test_a_checkout_is_committed_before_its_answer(app: FastAPI, served: ServedKasir) -> None:
    """Read-after-write across a real socket: the page and inquiry see the transaction at once."""
    merchant = await make_merchant(app)
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        for _ in range(5):
            data = await checkout(http, merchant, "http://127.0.0.1:9/cb")
            assert (await http.get(data["qrContent"])).status_code == 200
            status = await inquire(http, merchant, {"originalReferenceNo": data["referenceNo"]})
            assert status.json()["latestTransactionStatus"] == "01"


async def test_old_external_ids_are_forgotten(app: FastAPI) -> None:
    from sqlalchemy import func, select

    from kasir.db import fetch_value
    from kasir.snap.jobs import forget_past_external_ids
    from kasir.snap.models import SnapExternalId
    from kasir.snap.repository import snap_repository

    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        old = clock.local_now().date() - timedelta(days=3)
        assert await snap_repository.claim_external_id(session, merchant.id, old, "1", clock.now())
    clock.advance(86400)  # a new day: the purge runs again
    # The purge runs once a day per Database object. The app's may have purged on that day already (it is
    # the session's, and the clock is reset per test), which would keep this row whatever the purge does:
    # a Database of its own, on the same database, purges on its first run.
    database = Database(get_settings())
    try:
        await forget_past_external_ids(database)
    finally:
        await database.dispose()
    async with app.state.database.unit_of_work(read_only=True) as session:
        count = await fetch_value(
            session, select(func.count()).select_from(SnapExternalId).where(SnapExternalId.merchant_id == merchant.id)
        )
    assert count == 0


async def test_a_cross_site_post_changes_nothing(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    """Another site's form (no token, another transaction's or form's, a made-up one) is refused: 403."""
    merchant = await make_merchant(app)
    data = await checkout(client, merchant, receiver.url("/bnpl/forged"))
    other = await checkout(client, merchant, "http://127.0.0.1:9/cb")
    ours, theirs = await page_forms(client, page_path(data)), await page_forms(client, page_path(other))
    for action, extra in (("approve", {"tenure": "3"}), ("reject", {})):
        wrong_form = "reject-form" if action == "approve" else "approve-form"
        for token in (None, "", "f" * 64, theirs[f"{action}-form"].fields["csrf"], ours[wrong_form].fields["csrf"]):
            form = {**extra, **({} if token is None else {"csrf": token})}
            refused = await client.post(f"{page_path(data)}/{action}", data=form)
            assert refused.status_code == 403, (action, token)
    status = await inquire(client, merchant, {"originalReferenceNo": data["referenceNo"]})
    assert status.json()["latestTransactionStatus"] == "01"
    assert (await post_form(client, ours["approve-form"], tenure=3)).status_code == 303
    await receiver.wait_for(1, path="/bnpl/forged")

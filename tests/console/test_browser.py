"""An operator and a merchant user in Chromium (Playwright, Debian's /usr/bin/chromium) on the console of `kasir serve`.

Run alone with `pytest tests/console -m browser`. Screenshots of every page go to test-artifacts/console-*.png.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.console.helpers import PASSWORD, make_user
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire import basic_auth, x_req_signature
from tests.support.wire.callbacks import callback_signature
from tests.support.wire.card import charge_body, post_charge
from tests.support.wire.wallet import INQUIRY, create, dummy_payment

pytestmark = [pytest.mark.browser, pytest.mark.slow]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}
# The documentation's screenshots (docs/console/, linked from docs/operator/console.md).
DOCS_WIDE = {"width": 1440, "height": 900}
DOCS_PHONE = {"width": 390, "height": 844}


async def new_page(chromium: Any, viewport: dict[str, int] = DESKTOP) -> Any:
    context = await chromium.new_context(viewport=viewport, accept_downloads=True)
    page = await context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.errors = errors  # CSP violations are console errors: none may happen
    return page


async def sign_in(page: Any, base: str, email: str, password: str = PASSWORD) -> None:
    await page.goto(f"{base}/console/sign-in")
    await page.fill("#email", email)
    await page.fill("#password", password)
    async with page.expect_navigation():
        await page.click("#sign-in")


def signed(hash_key: str, body: dict[str, str]) -> dict[str, str]:
    """Wallet headers for a merchant known only by the values the console showed."""
    signature = x_req_signature(hash_key, body["external_id"], body["order_id"])
    return {"Content-Type": "application/json", "x-version": "v3", "x-req-signature": signature}


async def shot(page: Any, artifacts: Path, name: str) -> None:
    await page.screenshot(path=str(artifacts / f"console-{name}.png"), full_page=True)


async def test_operator_walks_through_the_console(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any, artifacts: Path
) -> None:
    base = served.base_url
    merchant = await make_merchant(app, callback_url=receiver.url("/current"))
    other = await make_merchant(app, callback_url=receiver.url("/other"))
    async with httpx.AsyncClient(base_url=base) as api:
        paid = await create(
            api,
            merchant,
            receiver.url("/first"),
            channel="DANA",
            amount=150_000,
            items=[{"item_id": "KOPI-1", "name": "Kopi <b>Susu</b>", "amount": 75_000, "qty": 2}],
        )
        assert (await dummy_payment(api, merchant, paid)).status_code == 200
        pending = await create(
            api,
            merchant,
            receiver.url("/first"),
            channel="OVO",
            amount=50_000,
            items=[{"item_id": "X", "name": "Teh", "amount": 25_000, "qty": 2}],
        )
        charge = charge_body(mode="CLOSE", callback_url=receiver.url("/card"), return_url=receiver.url("/shop"))
        assert (await post_charge(api, merchant, charge)).status_code == 200
        theirs = await create(api, other, receiver.url("/other"))
    await receiver.wait_for(1, path="/first")
    operator = await make_user(app)
    locked = await make_user(app)
    merchant_user = await make_user(app, role="merchant", merchant_id=merchant.id)

    page = await new_page(chromium)
    # Sign-in: bad, then good.
    await sign_in(page, base, operator, "not the password")
    assert "Email or password is wrong." in await page.inner_text("#sign-in-error")
    await shot(page, artifacts, "sign-in-refused")
    await sign_in(page, base, operator)
    assert page.url == f"{base}/console/overview"
    assert int(await page.inner_text("#stat-count")) >= 3
    assert await page.locator("#chart-status rect").count() >= 3
    assert await page.locator("#chart-latency rect").count() >= 1
    await shot(page, artifacts, "overview")

    # Payments: filter, then search by the merchant's order id.
    await page.click("text=Payments")
    await page.select_option("#status", "paid")
    async with page.expect_navigation():
        await page.click("#apply")
    table = await page.inner_text("#payments-table")
    assert paid["transaction_id"] in table
    assert pending["transaction_id"] not in table
    assert "Rp 150.000" in table
    await shot(page, artifacts, "payments")
    await page.goto(f"{base}/console/payments")
    await page.fill("#q", paid["order_id"])
    async with page.expect_navigation():
        await page.press("#q", "Enter")
    assert page.url.endswith(f"/console/payments/{paid['transaction_id']}")

    # Payment detail: timeline, the callback and its attempt, escaped item names.
    timeline = await page.inner_text("#timeline")
    assert "Created" in timeline
    assert "Paid" in timeline
    assert "+07:00" in timeline
    assert "Kopi <b>Susu</b>" in await page.inner_text("#items")  # shown as text, not markup
    callbacks = await page.inner_text("#callbacks-h + *")
    assert "PAID" in callbacks
    await page.wait_for_selector(".attempts", timeout=15_000)
    await shot(page, artifacts, "payment")

    # Replay to the original URL and to the merchant's current one.
    original_id = (await page.get_attribute("article.callback", "id")).split("-")[1]
    async with page.expect_navigation():
        await page.click(f"#replay-original-{original_id}")
    assert "queued for delivery again" in await page.inner_text("main")
    async with page.expect_navigation():
        await page.click(f"#replay-current-{original_id}")
    [_first, again] = await receiver.wait_for(2, path="/first")
    [current] = await receiver.wait_for(1, path="/current")
    assert json.loads(again.body) == json.loads(current.body)

    # Refund part of it, through its confirmation.
    await page.fill("#refund-amount", "50000")
    async with page.expect_navigation():
        await page.click("#refund")
    async with page.expect_navigation():
        await page.click("#confirm-refund")
    assert "Refund recorded" in await page.inner_text("main")
    assert await page.inner_text("#payment-status") == "REFUNDED"
    await shot(page, artifacts, "payment-refunded")

    # Staging: the customer of the OVO payment pays, simulated.
    await page.goto(f"{base}/console/payments/{pending['transaction_id']}")
    async with page.expect_navigation():
        await page.click("#simulate-pay")
    assert await page.inner_text("#payment-status") == "PAID"

    # CSV export of the filtered list.
    await page.goto(f"{base}/console/payments?merchant={merchant.id}")
    async with page.expect_download() as download_info:
        await page.click("#export-csv")
    download = await download_info.value
    rows = list(csv.DictReader(io.StringIO(Path(await download.path()).read_text())))
    assert {row["id"] for row in rows} >= {paid["transaction_id"], pending["transaction_id"]}
    assert theirs["transaction_id"] not in {row["id"] for row in rows}

    # Callbacks queue.
    await page.goto(f"{base}/console/callbacks?state=delivered")
    assert paid["transaction_id"] in await page.inner_text("#callbacks-table")
    await shot(page, artifacts, "callbacks")

    # Merchants: create one with a generated key pair; credentials shown once.
    await page.goto(f"{base}/console/merchants")
    await shot(page, artifacts, "merchants")
    await page.click("#new-merchant")
    await page.fill("#m-name", "Toko <Maju> Jaya")
    await page.fill("#m-callback", receiver.url("/maju"))
    async with page.expect_navigation():
        await page.click("#create-merchant")
    new_id = await page.inner_text("#cred-merchant-id")
    old_secret = await page.inner_text("#cred-secret")
    new_hash_key = await page.inner_text("#cred-hash-key")
    assert "BEGIN PRIVATE KEY" in await page.input_value("#private-pem")
    await shot(page, artifacts, "merchant-created")

    # Rotate its Basic secret with a grace period: both work, and the old one stops at the end.
    await page.goto(f"{base}/console/merchants/{new_id}")
    await page.select_option("#rotate-kind", "secret")
    await page.fill("#grace-hours", "1")
    async with page.expect_navigation():
        await page.click("#rotate")
    new_secret = (await page.inner_text("#new-value")).strip()
    assert "still accepted until" in await page.inner_text("#grace-until")
    await shot(page, artifacts, "rotated")
    async with httpx.AsyncClient(base_url=base) as api:
        for secret in (old_secret, new_secret):
            body = {"transaction_id": "x", "external_id": "x", "order_id": "x"}
            response = await api.post(
                INQUIRY,
                content=json.dumps(body),
                headers={**signed(new_hash_key, body), "Authorization": basic_auth(new_id, secret)},
            )
            assert response.status_code == 404, secret  # authenticated; no such transaction
    # Rotate again with no grace: the previous value stops at once.
    await page.goto(f"{base}/console/merchants/{new_id}")
    await page.select_option("#rotate-kind", "secret")
    await page.fill("#grace-hours", "0")
    async with page.expect_navigation():
        await page.click("#rotate")
    newest = (await page.inner_text("#new-value")).strip()
    async with httpx.AsyncClient(base_url=base) as api:
        body = {"transaction_id": "x", "external_id": "x", "order_id": "x"}
        for stopped in (new_secret, old_secret):  # a rotation without grace ends every old value at once
            refused = await api.post(
                INQUIRY,
                content=json.dumps(body),
                headers={**signed(new_hash_key, body), "Authorization": basic_auth(new_id, stopped)},
            )
            assert refused.status_code == 401
        accepted = await api.post(
            INQUIRY,
            content=json.dumps(body),
            headers={**signed(new_hash_key, body), "Authorization": basic_auth(new_id, newest)},
        )
        assert accepted.status_code == 404

    # Disable it (confirmed); its credentials answer 401.
    await page.goto(f"{base}/console/merchants/{new_id}")
    page.once("dialog", lambda dialog: dialog.accept())
    async with page.expect_navigation():
        await page.click("#disable")
    async with page.expect_navigation():
        await page.click("#confirm")
    assert "disabled since" in await page.inner_text("#merchant-state")
    await shot(page, artifacts, "merchant")
    async with httpx.AsyncClient(base_url=base) as api:
        body = {"transaction_id": "x", "external_id": "x", "order_id": "x"}
        response = await api.post(
            INQUIRY,
            content=json.dumps(body),
            headers={**signed(new_hash_key, body), "Authorization": basic_auth(new_id, newest)},
        )
        assert response.status_code == 401

    # Audit log: every change above, by whom and from where.
    await page.goto(f"{base}/console/audit")
    log = await page.inner_text("#audit-table")
    for action in (
        "merchant.create",
        "merchant.rotate.secret",
        "merchant.disable",
        "payment.refund",
        "callback.replay",
    ):
        assert action in log
    assert f"console:{operator}" in log
    await shot(page, artifacts, "audit")

    # Sign out.
    await page.click("text=Sign out")
    await page.wait_for_url(f"{base}/console/sign-in?signed_out=1")
    await page.goto(f"{base}/console/overview")
    assert "/console/sign-in" in page.url
    assert [e for e in page.errors if "Content Security Policy" in e or "Refused" in e] == []
    await page.context.close()

    # A phone: the same pages at 375 px.
    phone = await new_page(chromium, PHONE)
    await sign_in(phone, base, operator)
    await shot(phone, artifacts, "phone-overview")
    await phone.goto(f"{base}/console/payments")
    await shot(phone, artifacts, "phone-payments")
    await phone.screenshot(path=str(artifacts / "console-phone-payments-screen.png"))  # what a phone shows first
    await phone.goto(f"{base}/console/payments/{paid['transaction_id']}")
    await shot(phone, artifacts, "phone-payment")
    width = await phone.evaluate("document.documentElement.scrollWidth")
    assert width <= 375, width  # nothing wider than the screen
    await phone.context.close()

    # A merchant user: its own payments, and 404 for another merchant's.
    page = await new_page(chromium)
    await sign_in(page, base, merchant_user)
    await page.goto(f"{base}/console/payments")
    assert paid["transaction_id"] in await page.inner_text("#payments-table")
    assert theirs["transaction_id"] not in await page.inner_text("main")
    response = await page.goto(f"{base}/console/payments/{theirs['transaction_id']}")
    assert response.status == 404
    assert "Not found" in await page.inner_text("h1")
    await shot(page, artifacts, "not-found")
    await page.context.close()

    # Locked after five failures, even with the right password.
    page = await new_page(chromium)
    for _ in range(5):
        await sign_in(page, base, locked, "wrong password 123")
    await sign_in(page, base, locked)
    assert "locked until" in await page.inner_text("#sign-in-error")
    await shot(page, artifacts, "sign-in-locked")
    await page.context.close()


async def no_sideways_scrolling(page: Any) -> None:
    width = await page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], width


async def test_operator_creates_and_disables_a_user(
    app: FastAPI, served: ServedKasir, chromium: Any, artifacts: Path
) -> None:
    base = served.base_url
    merchant = await make_merchant(app)
    operator = await make_user(app)
    await make_user(app, role="merchant_admin", merchant_id=merchant.id)
    page = await new_page(chromium, DOCS_WIDE)
    await sign_in(page, base, operator)
    await page.click("text=Users")
    assert page.url == f"{base}/console/users"
    email = f"kasir-{merchant.id.lower()}@example.id"
    await page.fill("#u-email", email)
    await page.select_option("#u-role", "merchant")
    await page.select_option("#u-merchant", merchant.id)
    async with page.expect_navigation():
        await page.click("#create-user")
    assert await page.inner_text("#user-email") == email
    password = (await page.inner_text("#new-password")).strip()
    assert len(password) >= 12
    await shot(page, artifacts, "user-created")
    async with page.expect_navigation():
        await page.click("#back-to-users")
    row = page.locator("#users-table tr", has_text=email)
    assert "active" in await row.inner_text()
    await page.screenshot(path=str(artifacts / "console-users.png"))
    page.once("dialog", lambda dialog: dialog.accept())  # "Disable?": danger buttons ask once more
    async with page.expect_navigation():
        await row.locator("button", has_text="Disable").click()
    assert "User disabled" in await page.inner_text("main")
    assert "disabled" in await page.locator("#users-table tr", has_text=email).inner_text()
    # The new user's password is refused now that it is disabled.
    other = await new_page(chromium)
    await sign_in(other, base, email, password)
    assert "Email or password is wrong." in await other.inner_text("#sign-in-error")
    await other.context.close()
    assert [e for e in page.errors if "Content Security Policy" in e or "Refused" in e] == []
    await page.context.close()

    phone = await new_page(chromium, DOCS_PHONE)
    await sign_in(phone, base, operator)
    await phone.goto(f"{base}/console/users")
    await no_sideways_scrolling(phone)
    await phone.screenshot(path=str(artifacts / "console-phone-users.png"))
    await phone.context.close()


async def test_partial_refund_through_its_confirmation(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any, artifacts: Path
) -> None:
    base = served.base_url
    merchant = await make_merchant(app, callback_url=receiver.url("/cb"))
    async with httpx.AsyncClient(base_url=base) as api:
        paid = await create(
            api,
            merchant,
            receiver.url("/cb"),
            channel="DANA",
            amount=150_000,
            items=[{"item_id": "KOPI-1", "name": "Kopi Susu", "amount": 75_000, "qty": 2}],
        )
        assert (await dummy_payment(api, merchant, paid)).status_code == 200
    operator = await make_user(app)
    for viewport, name in ((DOCS_PHONE, "phone-refund-confirm"), (DOCS_WIDE, "refund-confirm")):
        page = await new_page(chromium, viewport)
        await sign_in(page, base, operator)
        await page.goto(f"{base}/console/payments/{paid['transaction_id']}")
        assert await page.input_value("#refund-amount") == ""  # asked for, never pre-filled
        assert "Rp 150.000" in await page.inner_text("#refundable")
        await page.fill("#refund-amount", "40000")
        await page.fill("#refund-reason", "One cup returned")
        async with page.expect_navigation():
            await page.click("#refund")
        assert await page.inner_text("#review-amount") == "Rp 40.000"
        assert await page.inner_text("#review-remaining") == "Rp 110.000"
        if viewport is DOCS_PHONE:
            await no_sideways_scrolling(page)
        await page.screenshot(path=str(artifacts / f"console-{name}.png"))
        if viewport is DOCS_PHONE:  # the phone looks, then cancels: nothing moved
            async with page.expect_navigation():
                await page.click("#cancel")
            assert await page.inner_text("#payment-status") == "PAID"
            await page.context.close()
            continue
        async with page.expect_navigation():
            await page.click("#confirm-refund")
        assert "Refund recorded" in await page.inner_text("main")
        assert await page.inner_text("#payment-status") == "REFUNDED"
        assert await page.inner_text("#refunded-total") == "Rp 40.000"
        assert "One cup returned" in await page.inner_text("#refunds")
        assert "Rp 110.000" in await page.inner_text("#refundable")
        await shot(page, artifacts, "payment-partly-refunded")
        assert [e for e in page.errors if "Content Security Policy" in e or "Refused" in e] == []
        await page.context.close()
    # The merchant hears of the one confirmed refund (after the PAID callback), and only of it.
    [_paid_callback, refunded] = await receiver.wait_for(2, path="/cb")
    body = json.loads(refunded.body)
    assert body["transaction_status"] == "REFUNDED"
    assert [h["refund_amount"] for h in body["refund_history"]] == [40_000]


async def test_merchant_admin_sets_its_callback_url_rotates_its_hash_key_and_sends_a_test_callback(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any, artifacts: Path
) -> None:
    base = served.base_url
    merchant = await make_merchant(app)
    admin = await make_user(app, role="merchant_admin", merchant_id=merchant.id)
    page = await new_page(chromium, DOCS_WIDE)
    await sign_in(page, base, admin)
    async with page.expect_navigation():
        await page.click("text=My merchant")
    assert page.url == f"{base}/console/my-merchant"
    assert await page.inner_text("#my-merchant-id") == merchant.id
    assert await page.inner_text("#my-client-id") == merchant.client_id

    # The callback URL, refused with its reason, then saved.
    await page.fill("#callback-url", "ftp://shop.example/cb")
    await page.evaluate("document.getElementById('callback-url').type = 'text'")  # past the browser's own check
    async with page.expect_navigation():
        await page.click("#save-callback-url")
    assert await page.inner_text("#my-error") == "Callback URL: must be an absolute http(s) URL"
    await page.fill("#callback-url", receiver.url("/self"))
    async with page.expect_navigation():
        await page.click("#save-callback-url")
    assert await page.inner_text("#my-callback-url") == receiver.url("/self")

    # A new hash key with a day's grace: shown once; callbacks stay signed with the old one until confirmed.
    await page.select_option("#rotate-kind", "hash_key")
    await page.fill("#grace-hours", "24")
    async with page.expect_navigation():
        await page.click("#rotate")
    new_hash_key = (await page.inner_text("#new-value")).strip()
    assert new_hash_key != merchant.credentials.hash_key
    assert "Callbacks stay signed with the old value" in await page.inner_text("#signing-note")
    async with page.expect_navigation():
        await page.click("#back")

    async def sent_and_signed_with(kind: str, hash_key: str, count: int) -> None:
        await page.select_option("#test-kind", kind)
        async with page.expect_navigation():
            await page.click("#send-test")
        assert (await page.inner_text("#test-status")).startswith("HTTP 200")
        assert (await page.inner_text("#test-latency")).endswith(" ms")
        request = (await receiver.wait_for(count, path="/self"))[-1]
        assert request.headers["x-kasir-callback-id"] == await page.inner_text("#test-callback-id")
        body = json.loads(request.body)
        assert body["external_id"].startswith("TEST-")
        signature = x_req_signature(hash_key, body["external_id"], body["order_id"])
        assert request.headers["svc-signature"] == callback_signature(body["transaction_id"], signature)

    await sent_and_signed_with("wallet", merchant.credentials.hash_key, 1)
    assert await page.locator("#confirm-hash_key").count() == 1
    await no_sideways_scrolling(page)
    await page.screenshot(path=str(artifacts / "console-my-merchant.png"), full_page=True)

    # The merchant verifies with the new key: it confirms the switch, and the next test is signed with it.
    async with page.expect_navigation():
        await page.click("#confirm-hash_key")
    assert "Switch confirmed" in await page.inner_text("main")
    await sent_and_signed_with("card", new_hash_key, 2)
    assert [e for e in page.errors if "Content Security Policy" in e or "Refused" in e] == []
    await page.context.close()

    phone = await new_page(chromium, DOCS_PHONE)
    await sign_in(phone, base, admin)
    await phone.goto(f"{base}/console/my-merchant")
    await no_sideways_scrolling(phone)
    await phone.screenshot(path=str(artifacts / "console-my-merchant-phone.png"), full_page=True)
    await phone.context.close()

"""Virtual accounts on the console in Chromium (Playwright, Debian's /usr/bin/chromium) at a phone's 390 px and at
1,440 px (issue 44 item 5): the list filtered to VAs and a VA's detail page fit the screen, and an operator pays a
PARTIAL VA in part and cancels another through the pages' own forms. Screenshots: test-artifacts/console-va-*.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from kasir.db import run
from kasir.merchants.models import Merchant
from tests.console.helpers import PASSWORD, make_user
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.shots import DESKTOP, PHONE, new_page, shoot
from tests.support.wire.va import cancel, check_callback, create, pay
from tests.support.wire.wallet import create as create_wallet
from tests.support.wire.wallet import dummy_payment

pytestmark = [pytest.mark.browser, pytest.mark.slow]


async def sign_in(page: Any, base: str, email: str) -> None:
    await page.goto(f"{base}/console/sign-in")
    await page.fill("#email", email)
    await page.fill("#password", PASSWORD)
    async with page.expect_navigation():
        await page.click("#sign-in")


async def test_vas_on_the_console_at_390_and_1440_px(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any, artifacts: Path
) -> None:
    base = served.base_url
    merchant = await make_merchant(app, callback_url=receiver.url("/toko"))
    # A name a person would give it, for the shots (names are unique: test_browser_lists has Toko Maju Jaya).
    async with app.state.database.unit_of_work() as session:
        await run(session, update(Merchant).where(Merchant.id == merchant.id).values(name="Toko Kelontong Berkah"))
    async with httpx.AsyncClient(base_url=base) as api:
        wallet = await create_wallet(api, merchant, receiver.url("/toko"), channel="DANA")
        assert (await dummy_payment(api, merchant, wallet)).status_code == 200
        closed = await create(api, merchant, receiver.url("/va"), channel="BCA", amount=50_000)
        assert (await pay(api, merchant, closed)).status_code == 200
        partial = await create(
            api, merchant, receiver.url("/partial"), channel="BCA-MCP", system="PARTIAL", amount=300_000
        )
        assert (await pay(api, merchant, partial, 100_000)).status_code == 200
        open_va = await create(api, merchant, receiver.url("/va"), channel="BRI", system="OPEN", amount=None)
        stopped = await create(api, merchant, receiver.url("/va"), channel="MANDIRI", amount=125_000)
        assert (await cancel(api, merchant, stopped)).status_code == 200
    [first] = await receiver.wait_for(1, path="/partial")
    check_callback(first, merchant, partial)
    operator = await make_user(app)
    va_ids = [va["transaction_id"] for va in (closed, partial, open_va, stopped)]

    for size, viewport in (("390", PHONE), ("1440", DESKTOP)):
        page = await new_page(chromium, viewport)
        await sign_in(page, base, operator)
        await page.goto(f"{base}/console/payments?merchant={merchant.id}&product=va")
        table = await page.inner_text("#payments-table")
        assert all(va_id in table for va_id in va_ids)
        assert wallet["transaction_id"] not in table
        assert partial["payment_details"]["va_number"] in table
        await shoot(page, artifacts, f"console-va-list-{size}")
        await page.goto(f"{base}/console/payments/{partial['transaction_id']}")
        assert "Rp 100.000" in await page.inner_text("#va-payments")
        await page.wait_for_selector(".attempts", timeout=15_000)  # its callback, delivered
        await shoot(page, artifacts, f"console-va-detail-{size}")
        await page.context.close()

    page = await new_page(chromium, DESKTOP)
    await sign_in(page, base, operator)
    # A second part of the PARTIAL VA, through the page's form; its callback reaches the merchant.
    await page.goto(f"{base}/console/payments/{partial['transaction_id']}")
    await page.fill("#va-pay-amount", "150000")
    async with page.expect_navigation():
        await page.click("#simulate-pay")
    assert "Simulated" in await page.inner_text("main")
    assert await page.inner_text("#payment-status") == "PARTIALLY_PAID"
    assert "Rp 150.000" in await page.inner_text("#va-payments")
    [_, second] = await receiver.wait_for(2, path="/partial")
    assert check_callback(second, merchant, partial)["payment_details"]["total_paid_amount"] == 250_000
    # Cancel the OPEN VA, through its confirmation.
    await page.goto(f"{base}/console/payments/{open_va['transaction_id']}")
    async with page.expect_navigation():
        await page.click("#cancel-va")
    await shoot(page, artifacts, "console-va-confirm-cancel-1440")
    async with page.expect_navigation():
        await page.click("#confirm-cancel")
    assert "Virtual account cancelled" in await page.inner_text("main")
    assert await page.inner_text("#payment-status") == "CANCELLED"
    # Its callback, beside the CLOSED VA's payment's and the MANDIRI VA's cancel's (made over the API).
    arrived = await receiver.wait_for(3, path="/va")
    [told] = [r for r in arrived if r.json()["transaction_id"] == open_va["transaction_id"]]
    assert check_callback(told, merchant, open_va)["transaction_status"] == "CANCELLED"
    await page.context.close()

"""Every console page in Chromium (Playwright, Debian's /usr/bin/chromium) at a phone's 390 px and at 1,440 px:
nothing scrolls the page sideways on the phone (a table may scroll inside its own box), and dates in lists
stay on one line at 1,440 px (issue 41 item 7). The documentation's overview and payments screenshots come
from here (test-artifacts/docs-*.png, copied to docs/console/)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from kasir.db import run
from kasir.kit.clock import clock
from kasir.merchants.models import Merchant
from kasir.wallet.models import WalletTransaction
from tests.console.helpers import PASSWORD, make_user
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire.card import charge_body, post_charge
from tests.support.wire.snap import CHECKOUT, checkout_body, post_signed
from tests.support.wire.wallet import create, dummy_payment

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WIDE = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}

# Every date of a list's row is one line: the text of each `.when` cell lays out in one box.
ONE_LINE_DATES = """() => [...document.querySelectorAll('table.list td.when, table.list .when')].map((cell) => {
  const range = document.createRange();
  range.selectNodeContents(cell);
  return [cell.textContent.trim(), new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size];
})"""


async def new_page(chromium: Any, viewport: dict[str, int]) -> Any:
    phone = viewport["width"] < 600
    context = await chromium.new_context(viewport=viewport, device_scale_factor=1, is_mobile=phone, has_touch=phone)
    return await context.new_page()


async def sign_in(page: Any, base: str, email: str) -> None:
    await page.goto(f"{base}/console/sign-in")
    await page.fill("#email", email)
    await page.fill("#password", PASSWORD)
    async with page.expect_navigation():
        await page.click("#sign-in")


async def payment(api: httpx.AsyncClient, merchant: Any, url: str, channel: str, amount: int, pay: bool) -> str:
    items = [{"item_id": "KOPI-1", "name": "Kopi Susu", "amount": amount, "qty": 1}]
    tx = await create(api, merchant, url, channel=channel, amount=amount, items=items)
    if pay:
        assert (await dummy_payment(api, merchant, tx)).status_code == 200
    return str(tx["transaction_id"])


async def test_every_console_page_fits_a_phone_and_dates_stay_on_one_line(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any, artifacts: Path
) -> None:
    base = served.base_url
    toko = await make_merchant(app, callback_url=receiver.url("/toko"))
    kedai = await make_merchant(app, callback_url=receiver.url("/kedai"))
    async with app.state.database.unit_of_work() as session:  # names a person would give them, for the shots
        for merchant, name in ((toko, "Toko Maju Jaya"), (kedai, "Kedai Kopi Nusantara")):
            await run(session, update(Merchant).where(Merchant.id == merchant.id).values(name=name))
    wallet_ids: list[str] = []
    async with httpx.AsyncClient(base_url=base) as api:
        for n, (merchant, channel) in enumerate(((toko, "DANA"), (kedai, "OVO"), (toko, "QRIS"), (toko, "DANA")) * 3):
            wallet_ids.append(
                await payment(api, merchant, receiver.url("/toko"), channel, 25_000 * (n % 5 + 1), pay=n % 4 != 1)
            )
        bnpl = await post_signed(api, toko, CHECKOUT, checkout_body(receiver.url("/bnpl")))
        assert bnpl.status_code == 200, bnpl.text
        bnpl_id = bnpl.json()["referenceNo"]
        charge = charge_body(mode="CLOSE", callback_url=receiver.url("/card"), return_url=receiver.url("/shop"))
        assert (await post_charge(api, toko, charge)).status_code == 200
    # A trend worth drawing: some of the payments made on earlier days.
    async with app.state.database.unit_of_work() as session:
        for n, payment_id in enumerate(wallet_ids[:8]):
            await run(
                session,
                update(WalletTransaction)
                .where(WalletTransaction.id == payment_id)
                .values(created_at=clock.now() - timedelta(days=n % 6 + 1, hours=n)),
            )
    operator = await make_user(app)
    merchant_admin = await make_user(app, role="merchant_admin", merchant_id=toko.id)
    operator_pages = [
        "/console/overview",
        "/console/overview?period=30d&days=30",
        "/console/payments",
        "/console/payments?product=wallet&status=paid",
        f"/console/payments/{wallet_ids[-1]}",
        f"/console/payments/{bnpl_id}",
        "/console/callbacks?state=pending",
        "/console/callbacks?state=retrying",
        "/console/callbacks?state=given_up",
        "/console/callbacks?state=delivered",
        "/console/merchants",
        "/console/merchants/new",
        f"/console/merchants/{toko.id}",
        "/console/audit",
        "/console/users",
    ]
    merchant_pages = [
        "/console/overview",
        "/console/overview?days=30",
        "/console/payments",
        f"/console/payments/{wallet_ids[-1]}",
        f"/console/payments/{bnpl_id}",
        "/console/callbacks?state=delivered",
        "/console/callbacks?state=given_up",
        "/console/users",
        "/console/my-merchant",
    ]
    too_wide: list[tuple[str, str, int]] = []
    for who, pages in ((operator, operator_pages), (merchant_admin, merchant_pages)):
        phone = await new_page(chromium, PHONE)
        await sign_in(phone, base, who)
        for path in pages:
            response = await phone.goto(f"{base}{path}")
            assert response.status == 200, path
            width = await phone.evaluate("document.documentElement.scrollWidth")
            if width > PHONE["width"]:
                too_wide.append((who, path, width))
        # The menu wraps in a row of its own under the brand: a column beside it took a quarter of the screen.
        header = await phone.evaluate("document.querySelector('header.top').getBoundingClientRect().height")
        assert header <= 140, header
        if who == operator:
            await phone.goto(f"{base}/console/overview")
            await phone.screenshot(path=str(artifacts / "docs-console-overview-phone.png"))
        await phone.context.close()
    assert too_wide == []

    wide = await new_page(chromium, WIDE)
    await sign_in(wide, base, operator)
    await wide.screenshot(path=str(artifacts / "docs-console-overview.png"))
    await wide.goto(f"{base}/console/overview?period=30d&days=30")
    await wide.screenshot(path=str(artifacts / "console-overview-30-days.png"), full_page=True)
    wrapped = []
    for path in ("/console/payments", "/console/callbacks?state=delivered", "/console/audit", "/console/merchants"):
        await wide.goto(f"{base}{path}")
        lines = await wide.evaluate(ONE_LINE_DATES)
        assert lines, path
        wrapped += [(path, text) for text, count in lines if count != 1]
    assert wrapped == []
    await wide.goto(f"{base}/console/payments")
    assert await wide.evaluate("document.documentElement.scrollWidth") <= WIDE["width"]
    await wide.screenshot(path=str(artifacts / "docs-console-payments.png"))
    await wide.context.close()

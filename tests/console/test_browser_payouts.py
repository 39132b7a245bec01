"""Payouts on the console in Chromium (Playwright, Debian's /usr/bin/chromium) at a phone's 390 px and at 1,440 px
(issue 46 item 6): the transfers' list, a transfer's page with its notification, a merchant's balance; an operator
tops up through the merchant page's form and its second look. Screenshots: test-artifacts/console-payouts-*.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from kasir.audit.service import Actor
from kasir.db import run
from kasir.merchants.models import Merchant
from kasir.payouts.service import payout_service
from tests.console.helpers import make_user
from tests.console.test_browser_va import sign_in
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.shots import DESKTOP, PHONE, new_page, shoot
from tests.support.wire.payouts import TRANSFER, disbursement_token, post_payout, transfer_body

pytestmark = [pytest.mark.browser, pytest.mark.slow]


async def test_payouts_on_the_console_at_390_and_1440_px(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any, artifacts: Path
) -> None:
    base = served.base_url
    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await run(session, update(Merchant).where(Merchant.id == merchant.id).values(name="Toko Payout Sejahtera"))
    async with app.state.database.unit_of_work() as session:
        await payout_service.top_up(session, merchant.id, 5_000_000, "Saldo awal November", Actor.cli())
    references = []
    async with httpx.AsyncClient(base_url=base) as api:
        token = await disbursement_token(api, merchant)
        for account_no, amount in (
            ("1234567890", "250000.00"),
            ("1234560002", "75000.00"),
            ("1234560003", "120000.00"),
        ):
            body = transfer_body(account_no, amount=amount, callback_url=receiver.url("/payouts"))
            answer = await post_payout(api, merchant, TRANSFER, body, token)
            assert answer.status_code == 200, answer.text
            references.append(answer.json()["referenceNo"])
    await receiver.wait_for(1, path="/payouts")  # the first transfer's 00 notification, delivered
    operator = await make_user(app)
    merchant_user = await make_user(app, role="merchant", merchant_id=merchant.id)

    for size, viewport in (("390", PHONE), ("1440", DESKTOP)):
        page = await new_page(chromium, viewport)
        await sign_in(page, base, operator)
        await page.goto(f"{base}/console/payouts?merchant={merchant.id}")
        table = await page.inner_text("#payouts-table")
        assert all(reference in table for reference in references)
        await shoot(page, artifacts, f"console-payouts-list-{size}")
        await page.goto(f"{base}/console/payouts/{references[0]}")
        assert (await page.inner_text("#payout-status")).startswith("00")
        await page.wait_for_selector(".attempts", timeout=15_000)  # its notification, delivered
        await shoot(page, artifacts, f"console-payouts-detail-{size}")
        await page.goto(f"{base}/console/merchants/{merchant.id}")
        await page.wait_for_selector("#top-up-form")
        await shoot(page, artifacts, f"console-payouts-merchant-{size}")
        await page.context.close()

    page = await new_page(chromium, DESKTOP)
    await sign_in(page, base, operator)
    await page.goto(f"{base}/console/merchants/{merchant.id}")
    await page.fill("#top-up-amount", "1000000")
    await page.fill("#top-up-note", "Tambahan Desember")
    async with page.expect_navigation():
        await page.click("#top-up")
    assert await page.inner_text("#review-amount") == "Rp 1.000.000"
    await shoot(page, artifacts, "console-payouts-top-up-review-1440")
    async with page.expect_navigation():
        await page.click("#confirm-top-up")
    assert "Tambahan Desember" in await page.inner_text("#top-ups")
    await page.context.close()

    page = await new_page(chromium, PHONE)
    await sign_in(page, base, merchant_user)
    await page.goto(f"{base}/console/payouts")
    assert "#top-up-form" not in await page.content()
    await shoot(page, artifacts, "console-payouts-merchant-user-390")
    await page.context.close()

"""Payment links on the console in Chromium (Playwright, Debian's /usr/bin/chromium) at a phone's 390 px and at
1,440 px (issue 45 item 5): the list filtered to links and a paid link's detail page, with its attempts by method
and its callbacks, fit the screen; an operator replays the link's SUCCESS callback through the page's form and the
merchant gets the same event again. Screenshots: test-artifacts/console-link-*.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import update

from kasir.db import run
from kasir.merchants.models import Merchant
from tests.console.helpers import make_user
from tests.console.test_browser_va import sign_in
from tests.support.builders import make_merchant
from tests.support.forms import page_forms, post_form
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.shots import DESKTOP, PHONE, new_page, shoot
from tests.support.wire.links import check_callback, create

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHANNELS = [
    {"channel": "CARD", "acq": "BCACC"},
    {"channel": "DANA"},
    {"channel": "QRIS"},
    {"channel": "VA", "acq": "BCA"},
]


async def chosen(http: httpx.AsyncClient, link: dict[str, Any], channel: str, **fields: str) -> str:
    """The customer presses the method's button on the link's page; the method's page (a path)."""
    forms = await page_forms(http, link["payment_url"])
    [form] = [f for f in forms.values() if f.fields.get("channel") == channel]
    answer = await post_form(http, form, **fields)
    assert answer.status_code == 303, answer.text
    return str(answer.headers["location"])


async def test_links_on_the_console_at_390_and_1440_px(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any, artifacts: Path
) -> None:
    base = served.base_url
    merchant = await make_merchant(app, callback_url=receiver.url("/toko"))
    async with app.state.database.unit_of_work() as session:
        await run(session, update(Merchant).where(Merchant.id == merchant.id).values(name="Toko Batik Sekar Jagad"))
    items = [{"item_id": "SKU-9", "name": "Kemeja Batik Lengan Panjang", "amount": 185_000, "qty": 1}]
    async with httpx.AsyncClient(base_url=base) as http:
        paid = await create(
            http, merchant, receiver.url("/link"), channels=CHANNELS, amount=185_000, item_details=items,
            description="Pesanan #1042", success_redirect_url="https://toko.example/terima-kasih",
        )  # fmt: skip
        waiting = await create(http, merchant, receiver.url("/waiting"), channels=CHANNELS, amount=80_000)
        # The customer looks at the BCA VA, then pays by DANA.
        assert (await chosen(http, paid, "VA")).endswith("/va")
        checkout = await chosen(http, paid, "DANA", wallet_id="081298765432")
        assert (await post_form(http, (await page_forms(http, checkout))["pay-form"])).status_code == 303
    [success] = await receiver.wait_for(1, path="/link")
    payload = check_callback(success, merchant, paid)
    assert (payload["transaction_status"], payload["payment_channel"]) == ("SUCCESS", "DANA")
    operator = await make_user(app)

    for size, viewport in (("390", PHONE), ("1440", DESKTOP)):
        page = await new_page(chromium, viewport)
        await sign_in(page, base, operator)
        await page.goto(f"{base}/console/payments?merchant={merchant.id}&product=link")
        table = await page.inner_text("#payments-table")
        assert paid["transaction_id"] in table
        assert waiting["transaction_id"] in table
        assert "DANA" in table  # the paid one's channel: how it was paid
        await shoot(page, artifacts, f"console-link-list-{size}")
        await page.goto(f"{base}/console/payments/{paid['transaction_id']}")
        attempts = await page.inner_text("#link-attempts")
        assert "VA" in attempts
        assert "CLOSED" in attempts
        assert "DANA" in attempts
        assert "PAID" in attempts
        assert await page.get_attribute("#link-page a", "href") == paid["payment_url"]
        await page.wait_for_selector(".attempts", timeout=15_000)  # its callback, delivered
        await shoot(page, artifacts, f"console-link-detail-{size}")
        await page.context.close()

    # The operator replays the SUCCESS callback from the page: the merchant gets the same event again.
    page = await new_page(chromium, DESKTOP)
    await sign_in(page, base, operator)
    await page.goto(f"{base}/console/payments/{paid['transaction_id']}")
    callback_id = success.headers["x-kasir-callback-id"]
    async with page.expect_navigation():
        await page.click(f"#replay-original-{callback_id}")
    again = (await receiver.wait_for(2, path="/link"))[1]
    assert again.headers["x-kasir-callback-id"] == callback_id
    assert check_callback(again, merchant, paid)["transaction_status"] == "SUCCESS"
    await page.context.close()

"""A customer in Chromium (Playwright) on the staging checkout page served by `kasir serve`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.support.browser import phone_page
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.shots import SIZES, new_page, shoot
from tests.support.wire.wallet import check_callback, create, inquire, item

pytestmark = [pytest.mark.browser, pytest.mark.slow]


async def test_pay_in_the_browser(app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any) -> None:
    merchant = await make_merchant(app)
    items = [item(40_000, 2, name="Sepatu Lari"), item(20_000, 1, item_id="shippingfee", name="Ongkir")]
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        tx = await create(
            http, merchant, receiver.url("/browser/pay"), channel="SHOPEEPAY", items=items,
            return_url=receiver.url("/shop/return"),
        )  # fmt: skip
        page = await phone_page(chromium)
        await page.goto(tx["payment_url"])
        assert await page.inner_text("#merchant") == merchant.credentials.name
        assert await page.inner_text("#channel") == "SHOPEEPAY"
        assert await page.inner_text("#total") == "Rp100.000"
        assert "Sepatu Lari" in await page.inner_text("#items")
        async with page.expect_navigation():
            await page.click("#pay")
        assert await page.get_attribute("#status", "data-status") == "PAID"
        assert await page.locator("#pay").count() == 0
        assert await page.get_attribute("#return", "href") == receiver.url("/shop/return")
        assert (await inquire(http, merchant, tx))["transaction_status"] == "PAID"
    [callback] = await receiver.wait_for(1, path="/browser/pay")
    assert check_callback(callback, merchant, tx)["transaction_status"] == "PAID"
    await page.context.close()


async def test_qris_code_and_ovo_failure_in_the_browser(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any
) -> None:
    merchant = await make_merchant(app)
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        qris = await create(http, merchant, receiver.url("/browser/qris"), channel="QRIS")
        ovo = await create(http, merchant, receiver.url("/browser/ovo"), channel="OVO")
    page = await phone_page(chromium)
    await page.goto(qris["payment_url"])
    width = await page.eval_on_selector("#qr", "img => img.complete ? img.naturalWidth : 0")
    assert width > 100  # the PNG loaded and is a real image

    await page.goto(ovo["payment_url"])
    async with page.expect_navigation():
        await page.click("#fail")
    assert await page.get_attribute("#status", "data-status") == "failed"
    [callback] = await receiver.wait_for(1, path="/browser/ovo")
    payload = check_callback(callback, merchant, ovo)
    assert payload["transaction_status"] == "failed"
    assert payload["response_code"] == "03"
    assert payload["response_message"] == "Declined on the checkout page"
    await page.context.close()


@pytest.mark.parametrize("size", SIZES)
async def test_checkout_pages_fit_the_screen(
    app: FastAPI, served: ServedKasir, chromium: Any, artifacts: Path, size: str
) -> None:
    """The QRIS page (its code, Pay), the OVO page (Pay and Decline), the DANA page (Pay only) and the page after
    paying with its way back to the shop, at 1440x900 and 390x844: no sideways scroll; pages-wallet-*.png."""
    merchant = await make_merchant(app)
    items = [
        item(185_000, 1, item_id="SKU-9", name="Kemeja Batik Lengan Panjang Motif Parang"),
        item(40_000, 2, name="Sepatu Lari"),
        item(20_000, 1, item_id="shippingfee", name="Ongkir"),
    ]
    shop = "https://shop.example/orders/42"
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        ovo = await create(http, merchant, channel="OVO", amount=285_000, items=items, return_url=shop)
        dana = await create(http, merchant, channel="DANA", amount=285_000, items=items, return_url=shop)
        qris = await create(http, merchant, channel="QRIS", amount=285_000, items=items)
    page = await new_page(chromium, SIZES[size])
    await page.goto(qris["payment_url"])
    assert await page.locator("#fail").count() == 0
    assert await page.eval_on_selector("#qr", "img => img.complete ? img.naturalWidth : 0") > 100
    await shoot(page, artifacts, f"pages-wallet-qris-{size}")

    await page.goto(ovo["payment_url"])
    assert await page.inner_text("#pay") == "Pay Rp285.000"
    assert await page.inner_text("#fail") == "Decline in OVO"
    await shoot(page, artifacts, f"pages-wallet-ovo-{size}")

    await page.goto(dana["payment_url"])
    assert await page.locator("#fail").count() == 0
    async with page.expect_navigation():
        await page.click("#pay")
    assert await page.get_attribute("#status", "data-status") == "PAID"
    assert await page.inner_text("#status") == "Paid. Thank you!"
    assert await page.get_attribute("#return", "href") == shop
    await shoot(page, artifacts, f"pages-wallet-paid-{size}")
    await page.context.close()

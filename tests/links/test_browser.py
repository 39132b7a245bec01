"""The link's checkout and VA pages in Chromium (Playwright, Debian's chromium) served by `kasir serve`, at
1440x900 and 390x844: nothing scrolls sideways; screenshots pages-link-*.png in test-artifacts/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.support.builders import make_merchant
from tests.support.server import ServedKasir
from tests.support.shots import SIZES, new_page, shoot
from tests.support.wire.links import create

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHANNELS = [
    {"channel": "CARD", "acq": "BCACC"},
    {"channel": "DANA"},
    {"channel": "OVO"},
    {"channel": "QRIS"},
    {"channel": "VA", "acq": "BCA"},
    {"channel": "VA", "acq": "MANDIRI"},
]
ITEMS = [
    {"item_id": "SKU-9", "name": "Kemeja Batik Lengan Panjang Motif Parang", "amount": 185_000, "qty": 1},
    {"item_id": "SKU-1", "name": "Sepatu Lari", "amount": 40_000, "qty": 2},
]


@pytest.mark.parametrize("size", SIZES)
async def test_link_pages_fit_the_screen(
    app: FastAPI, served: ServedKasir, chromium: Any, artifacts: Path, size: str
) -> None:
    merchant = await make_merchant(app)
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        link = await create(
            http, merchant, channels=CHANNELS, amount=265_000, item_details=ITEMS,
            description="Pesanan #1042: batik dan sepatu",
        )  # fmt: skip
    page = await new_page(chromium, SIZES[size])
    await page.goto(link["payment_url"])
    assert await page.inner_text("#amount") == "Rp265.000"
    buttons = await page.locator("#methods button").all_inner_texts()
    assert buttons == [
        "Credit or debit card", "Pay with DANA", "Pay with OVO", "QRIS",
        "BCA virtual account", "Mandiri virtual account",
    ]  # fmt: skip
    await shoot(page, artifacts, f"pages-link-checkout-{size}")
    async with page.expect_navigation():
        await page.click("button[data-acq='MANDIRI']")
    assert "Mandiri" in await page.inner_text("#bank")
    await shoot(page, artifacts, f"pages-link-va-{size}")
    async with page.expect_navigation():
        await page.click("#pay")
    assert await page.get_attribute("#status", "data-status") == "SUCCESS"
    await shoot(page, artifacts, f"pages-link-paid-{size}")
    await page.context.close()

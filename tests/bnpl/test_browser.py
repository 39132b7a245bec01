"""A customer in Chromium (Playwright) on the staging BNPL approval page served by `kasir serve`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.support.builders import make_merchant
from tests.support.server import ServedKasir
from tests.support.shots import SIZES, new_page, shoot
from tests.support.wire.snap import CHECKOUT, checkout_body, item, post_signed

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.mark.parametrize("size", SIZES)
async def test_approval_page_fits_the_screen(
    app: FastAPI, served: ServedKasir, chromium: Any, artifacts: Path, size: str
) -> None:
    """The plans (one chosen), then the approved page with the way back to the shop, at 1440x900 and 390x844:
    no sideways scroll (the old table was 442 px wide on a 390 px screen); screenshots pages-bnpl-*.png."""
    merchant = await make_merchant(app)
    items = [
        item("185000.00", 1, item_id="SKU-9", name="Kemeja Batik Lengan Panjang Motif Parang"),
        item("40000.00", 2, name="Sepatu Lari"),
        item("20000.00", 1, item_id="shippingfee", category="FEES", name="Ongkir"),
    ]
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        response = await post_signed(http, merchant, CHECKOUT, checkout_body(total="285000.00", items=items))
        assert response.status_code == 200, response.text
    page = await new_page(chromium, SIZES[size])
    await page.goto(response.json()["qrContent"])
    assert await page.inner_text("#total") == "Rp285.000"
    await page.click("label[for=tenure-6]")
    assert await page.is_checked("#tenure-6")
    await shoot(page, artifacts, f"pages-bnpl-plans-{size}")

    async with page.expect_navigation():
        await page.click("#approve")
    assert await page.get_attribute("#status", "data-code") == "00"
    assert await page.inner_text("#status") == "Approved: you pay in 6 monthly installments of Rp53.998."
    assert merchant.credentials.name in await page.inner_text("#close")
    await shoot(page, artifacts, f"pages-bnpl-approved-{size}")
    await page.context.close()

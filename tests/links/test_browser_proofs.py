"""A customer in Chromium (Playwright, Debian's /usr/bin/chromium) pays payment links on the pages `kasir serve`
serves (issue 45: the browser proofs): by card through 3-D Secure, by DANA, by QRIS and by VA, and fails a card
three times until the link expires. A real receiver gets each payment-page callback; its svc-signature is computed
here from §3.5 (tests.support.wire.links.check_callback) and its payment_method / payment_channel / acq are §10.5's.
The checkout and VA pages' shots are tests/links/test_browser.py's; this one adds a card page of a link after a
decline, the reason shown and the attempts left (pages-link-card-declined-390.png).

Run alone with `pytest tests/links -m browser`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.shots import SIZES, new_page, shoot
from tests.support.wire.card import CHALLENGE, DECLINED, future_year
from tests.support.wire.links import check_callback, create, read

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CHANNELS = [
    {"channel": "CARD", "acq": "BCACC"},
    {"channel": "DANA"},
    {"channel": "QRIS"},
    {"channel": "VA", "acq": "BCA"},
]
ITEMS = [
    {"item_id": "SKU-9", "name": "Kemeja Batik Lengan Panjang Motif Parang", "amount": 185_000, "qty": 1},
    {"item_id": "SKU-2", "name": "Sepatu Lari", "amount": 40_000, "qty": 2},
]


async def open_link(
    served: ServedKasir, merchant: builders.TestMerchant, receiver: CallbackReceiver, path: str
) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        return await create(
            http,
            merchant,
            receiver.url(path),
            channels=CHANNELS,
            amount=265_000,
            item_details=ITEMS,
            success_redirect_url=receiver.url("/shop/thanks"),
            failed_redirect_url=receiver.url("/shop/sorry"),
        )


async def choose(page: Any, channel: str) -> None:
    """Press the method's button on the link's page."""
    async with page.expect_navigation():
        await page.click(f'button[data-channel="{channel}"]')


async def back_at_the_shop(page: Any, receiver: CallbackReceiver, path: str, link: dict[str, Any]) -> None:
    """§10.4: the customer lands on the merchant's URL with transaction_id added to its query."""
    assert page.url == receiver.url(path) + f"?transaction_id={link['transaction_id']}", page.url


async def the_callbacks(
    served: ServedKasir,
    merchant: builders.TestMerchant,
    receiver: CallbackReceiver,
    link: dict[str, Any],
    path: str,
    expected: list[tuple[str, str, str, str]],
) -> list[dict[str, Any]]:
    """The link's callbacks at `path`: each signature computed here, each (status, method, channel, acq) §10.5's;
    and the link read back in the last one's state."""
    callbacks = [check_callback(r, merchant, link) for r in await receiver.wait_for(len(expected), path=path)]
    said = [(c["transaction_status"], c["payment_method"], c["payment_channel"], c["acq"]) for c in callbacks]
    assert said == expected
    for callback in callbacks:
        assert (callback["amount"], callback["mis_version"], callback["fee"]) == (265_000, 3, 0)
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        now = (await read(http, merchant, link["transaction_id"])).json()["data"]
    final = expected[-1][0]
    assert now["transaction_status"] == ("PENDING" if final == "FAILED" else final)
    return callbacks


async def fill_card(page: Any, number: str) -> None:
    await page.fill("#card-number", number.replace(" ", ""))
    await page.fill("#exp-month", "09")
    await page.fill("#exp-year", future_year()[2:])
    await page.fill("#cvn", "123")
    await page.fill("#holder-name", "siti rahayu")
    async with page.expect_navigation():
        await page.click("#pay")


@pytest.mark.parametrize("size", SIZES)
async def test_a_link_paid_by_card_through_3d_secure(
    app: FastAPI,
    served: ServedKasir,
    receiver: CallbackReceiver,
    chromium: Any,
    artifacts: Path,
    size: str,
) -> None:
    merchant = await make_merchant(app)
    path = f"/browser/link/card/{size}"
    link = await open_link(served, merchant, receiver, path)
    page = await new_page(chromium, SIZES[size])
    await page.goto(link["payment_url"])
    assert await page.inner_text("#merchant") == merchant.credentials.name
    assert await page.inner_text("#amount") == "Rp265.000"
    assert "Kemeja Batik" in await page.inner_text("#items")
    buttons = await page.eval_on_selector_all("#methods button", "all => all.map(b => b.dataset.channel)")
    assert buttons == ["CARD", "DANA", "QRIS", "VA"]  # in the request's order

    await choose(page, "CARD")
    assert "/card/pages/" in page.url
    await fill_card(page, CHALLENGE)
    assert page.url.endswith("/3ds")
    shown = (await page.inner_text("#staging-otp")).strip()
    assert re.fullmatch(r"\d{6}", shown)
    await page.fill("#otp", shown)
    async with page.expect_navigation():
        await page.click("#verify")
    await back_at_the_shop(page, receiver, "/shop/thanks", link)
    [success] = await the_callbacks(served, merchant, receiver, link, path, [("SUCCESS", "CARD", "CARD", "BCA")])
    assert success["paid_date"].endswith("Z")
    await page.context.close()


@pytest.mark.parametrize(("channel", "acq"), [("DANA", "DANA"), ("QRIS", "QRIS")])
async def test_a_link_paid_by_a_wallet(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any, channel: str, acq: str
) -> None:
    merchant = await make_merchant(app)
    path = f"/browser/link/{channel}"
    link = await open_link(served, merchant, receiver, path)
    page = await new_page(chromium, SIZES["390"])
    await page.goto(link["payment_url"])
    if channel == "DANA":  # the wallet's account, prefilled with the customer's phone
        assert await page.input_value("form:has(button[data-channel=DANA]) input[name=wallet_id]") == "081234567890"
    await choose(page, channel)
    assert "/ewallet/pages/" in page.url
    assert await page.inner_text("#channel") == channel
    if channel == "QRIS":
        width = await page.eval_on_selector("#qr", "img => img.complete ? img.naturalWidth : 0")
        assert width > 100  # the code to scan loaded
    # Paid, the customer is sent on by itself (§10.4): the wallet's page to the link's, the link's to the merchant.
    async with page.expect_navigation():
        await page.click("#pay")
    await back_at_the_shop(page, receiver, "/shop/thanks", link)
    await the_callbacks(served, merchant, receiver, link, path, [("SUCCESS", "WALLET", channel, acq)])
    await page.context.close()


@pytest.mark.parametrize("size", SIZES)
async def test_a_link_paid_by_va(
    app: FastAPI,
    served: ServedKasir,
    receiver: CallbackReceiver,
    chromium: Any,
    artifacts: Path,
    size: str,
) -> None:
    merchant = await make_merchant(app)
    path = f"/browser/link/va/{size}"
    link = await open_link(served, merchant, receiver, path)
    page = await new_page(chromium, SIZES[size])
    await page.goto(link["payment_url"])
    await choose(page, "VA")
    assert page.url == link["payment_url"] + "/va"
    assert await page.inner_text("#amount") == "Rp265.000"
    number = re.sub(r"\D", "", await page.inner_text("#va-number"))
    assert number.startswith("40416")
    assert len(number) == 14
    # Back, and the same bank again: the same number.
    await page.click("#other")
    await choose(page, "VA")
    assert re.sub(r"\D", "", await page.inner_text("#va-number")) == number
    async with page.expect_navigation():
        await page.click("#pay")
    await back_at_the_shop(page, receiver, "/shop/thanks", link)
    await the_callbacks(served, merchant, receiver, link, path, [("SUCCESS", "VIRTUAL_ACCOUNT", "VA", "BCA")])
    await page.context.close()


async def test_a_card_failed_three_times_expires_the_link(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any, artifacts: Path
) -> None:
    merchant = await make_merchant(app)
    path = "/browser/link/fails"
    link = await open_link(served, merchant, receiver, path)
    page = await new_page(chromium, SIZES["390"])
    await page.goto(link["payment_url"])
    await choose(page, "CARD")
    for attempt in (1, 2):
        await fill_card(page, DECLINED)
        assert "Card declined by the issuer" in await page.inner_text("#message")  # kept on Kasir's page
        assert "/card/pages/" in page.url, attempt
    await shoot(page, artifacts, "pages-link-card-declined-390")
    await fill_card(page, DECLINED)
    await back_at_the_shop(page, receiver, "/shop/sorry", link)
    failed = ("FAILED", "CARD", "CARD", "BCA")
    callbacks = await the_callbacks(
        served, merchant, receiver, link, path, [failed, failed, failed, ("EXPIRED", "CARD", "CARD", "BCA")]
    )
    assert [c["response_message"] for c in callbacks] == [
        "Card declined by the issuer",
        "Card declined by the issuer",
        "Card declined by the issuer",
        "Too many failed attempts",
    ]
    assert all(c["paid_date"] == "" for c in callbacks)
    # The link is over: its page sends the customer to the failed URL too.
    await page.goto(link["payment_url"])
    await back_at_the_shop(page, receiver, "/shop/sorry", link)
    await page.context.close()

"""A customer in Chromium (Playwright, Debian's /usr/bin/chromium) pays on the pages served by `kasir serve`.

Run alone with `pytest tests/card -m browser`. Each test checks the callbacks a real receiver got.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.support import builders
from tests.support.browser import phone_page
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.shots import SIZES, new_page, shoot
from tests.support.wire.card import (
    APPROVED,
    APPROVED_MC,
    CHALLENGE,
    DECLINED,
    EXPIRED_CARD,
    INSUFFICIENT,
    ISSUER_DOWN,
    charge_body,
    check_callback,
    future_year,
    post_charge,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


async def open_order(
    served: ServedKasir, merchant: builders.TestMerchant, receiver: CallbackReceiver, path: str, **kwargs: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    body = charge_body(mode="OPEN", callback_url=receiver.url(path), return_url=receiver.url("/shop/return"), **kwargs)
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        response = await post_charge(http, merchant, body)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["link"].startswith(served.base_url)
    return body, data


async def fill_card(page: Any, number: str, *, cvn: str = "123", name: str = "siti rahayu") -> None:
    await page.fill("#card-number", number.replace(" ", ""))
    await page.fill("#exp-month", "09")
    await page.fill("#exp-year", future_year()[2:])
    await page.fill("#cvn", cvn)
    await page.fill("#holder-name", name)


async def submit(page: Any) -> None:
    async with page.expect_navigation():
        await page.click("#pay")


async def enter_otp(page: Any, otp: str | None = None) -> None:
    shown = (await page.inner_text("#staging-otp")).strip()
    assert re.fullmatch(r"\d{6}", shown)
    await page.fill("#otp", otp or shown)
    async with page.expect_navigation():
        await page.click("#verify")


def returned_to_shop(page: Any, receiver: CallbackReceiver, status: str) -> None:
    assert page.url.startswith(receiver.url("/shop/return") + "?")
    assert f"status={status}" in page.url


async def test_each_test_card_on_the_page(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any
) -> None:
    merchant = await make_merchant(app)
    page = await phone_page(chromium)
    expected = {
        APPROVED: ("SUCCESS", "Approved"),
        APPROVED_MC: ("SUCCESS", "Approved"),
        CHALLENGE: ("SUCCESS", "Approved"),
        DECLINED: ("FAILED", "Card declined by the issuer"),
        INSUFFICIENT: ("FAILED", "Insufficient funds"),
        ISSUER_DOWN: ("FAILED", "Issuer not responding"),
        EXPIRED_CARD: ("FAILED", "Expired card"),
    }
    for index, (number, (status, message)) in enumerate(expected.items()):
        path = f"/browser/card/{index}"
        body, data = await open_order(served, merchant, receiver, path)
        await page.goto(data["link"])
        await fill_card(page, number)
        await submit(page)
        if number == CHALLENGE:
            assert page.url == data["link"] + "/3ds"
            assert "400000******3220" in await page.inner_text("body")
            await enter_otp(page)
        if status == "SUCCESS":
            returned_to_shop(page, receiver, "SUCCESS")
        else:
            assert page.url == data["link"] + "/pay"
            assert message in await page.inner_text("#message")
        [callback] = await receiver.wait_for(1, path=path)
        payload = check_callback(callback, merchant, body)
        assert (payload["transaction_status"], payload["response_message"]) == (status, message), number
    await page.context.close()


async def test_declined_then_paid_keeps_values_and_pays_once(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any, artifacts: Path
) -> None:
    merchant = await make_merchant(app)
    body, data = await open_order(served, merchant, receiver, "/browser/retry", tenor="3")
    page = await phone_page(chromium)
    await page.goto(data["link"])
    assert await page.inner_text("#merchant") == merchant.credentials.name
    assert await page.inner_text("#amount") == "Rp150.000"
    assert "Sepatu Lari" in await page.inner_text("#items")
    assert await page.inner_text("#installment") == "3 × Rp50.000 per month (0% interest)"
    await page.check("#tenor-12")
    assert await page.inner_text("#installment") == "12 × Rp12.500 per month (0% interest)"
    await page.screenshot(path=str(artifacts / "card-payment-page.png"), full_page=True)

    await fill_card(page, INSUFFICIENT, name="budi santoso")
    await submit(page)
    assert "Insufficient funds" in await page.inner_text("#message")
    assert await page.input_value("#holder-name") == "BUDI SANTOSO"
    assert await page.input_value("#exp-month") == "09"
    assert await page.input_value("#card-number") == ""
    assert await page.input_value("#cvn") == ""
    assert await page.is_checked("#tenor-12")
    await page.screenshot(path=str(artifacts / "card-payment-page-declined.png"), full_page=True)

    await page.fill("#card-number", APPROVED.replace(" ", ""))
    await page.fill("#cvn", "321")
    await page.check("#save-card")
    # The button disables itself on submit: a double click sends one request.
    posts: list[str] = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    async with page.expect_navigation():
        await page.dblclick("#pay")
    returned_to_shop(page, receiver, "SUCCESS")
    assert len(posts) == 1

    failed, paid = await receiver.wait_for(2, path="/browser/retry")
    assert check_callback(failed, merchant, body)["transaction_status"] == "FAILED"
    payload = check_callback(paid, merchant, body)
    assert payload["transaction_status"] == "SUCCESS"
    assert payload["save_card"] is True
    assert payload["card_token"]
    await page.goto(data["link"])
    assert await page.get_attribute("#status", "data-status") == "SUCCESS"
    await page.context.close()


async def test_three_declines_close_the_page(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any
) -> None:
    merchant = await make_merchant(app)
    body, data = await open_order(served, merchant, receiver, "/browser/three")
    page = await phone_page(chromium)
    await page.goto(data["link"])
    for number in (DECLINED, EXPIRED_CARD):
        await fill_card(page, number)
        await submit(page)
        assert "Payment failed" in await page.inner_text("#message")
    await fill_card(page, ISSUER_DOWN)
    await submit(page)
    returned_to_shop(page, receiver, "EXPIRED")
    callbacks = await receiver.wait_for(4, path="/browser/three")
    statuses = [check_callback(c, merchant, body)["transaction_status"] for c in callbacks]
    assert statuses == ["FAILED", "FAILED", "FAILED", "EXPIRED"]
    await page.goto(data["link"])
    assert await page.get_attribute("#status", "data-status") == "EXPIRED"
    assert await page.query_selector("#pay-form") is None
    await page.context.close()


@pytest.mark.parametrize("size", SIZES)
async def test_otp_wrong_then_right(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any, artifacts: Path, size: str
) -> None:
    """Issue 42 item 13: a wrong code is typed again on the same challenge (tries left said), and the right one
    then pays the same attempt: one SUCCESS callback, no FAILED."""
    merchant = await make_merchant(app)
    path = f"/browser/otp/{size}"
    body, data = await open_order(served, merchant, receiver, path)
    page = await new_page(chromium, SIZES[size])
    await page.goto(data["link"])
    await fill_card(page, CHALLENGE)
    await submit(page)
    assert page.url == data["link"] + "/3ds"
    await shoot(page, artifacts, f"pages-card-otp-{size}")
    shown = (await page.inner_text("#staging-otp")).strip()
    await enter_otp(page, "000000" if shown != "000000" else "111111")
    assert page.url == data["link"] + "/3ds"
    assert "(2 tries left)" in await page.inner_text("#otp-error")
    assert await page.get_attribute("#otp", "aria-invalid") == "true"
    await shoot(page, artifacts, f"pages-card-otp-wrong-{size}")
    await enter_otp(page)
    returned_to_shop(page, receiver, "SUCCESS")
    [paid] = await receiver.wait_for(1, path=path)
    assert check_callback(paid, merchant, body)["transaction_status"] == "SUCCESS"
    await page.context.close()


async def test_a_new_field_error_clears_the_decline_banner(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any, artifacts: Path
) -> None:
    """Issue 42 item 13: after a decline the banner says why; once the customer types a card the page finds wrong,
    the field's error shows and the stale decline goes."""
    merchant = await make_merchant(app)
    _, data = await open_order(served, merchant, receiver, "/browser/banner")
    page = await new_page(chromium, SIZES["390"])
    await page.goto(data["link"])
    await fill_card(page, DECLINED)
    await submit(page)
    assert "Card declined by the issuer" in await page.inner_text("#message")
    await page.fill("#cvn", "123")  # a field filled in right: the banner stays
    assert await page.query_selector("#message") is not None
    await page.type("#card-number", "4811111111111115")
    assert await page.inner_text("#card-number-error") == "is not a valid card number (check digit)"
    assert await page.query_selector("#message") is None
    await shoot(page, artifacts, "pages-card-field-error-390")
    await page.context.close()


async def test_validation_as_the_customer_types(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver, chromium: Any
) -> None:
    merchant = await make_merchant(app)
    _, data = await open_order(served, merchant, receiver, "/browser/typing")
    page = await phone_page(chromium)
    await page.goto(data["link"])
    await page.type("#card-number", "4811111111111115")
    assert await page.input_value("#card-number") == "4811 1111 1111 1115"
    assert await page.inner_text("#card-number-error") == "is not a valid card number (check digit)"
    await page.fill("#card-number", "")
    await page.type("#card-number", "4811111111111114")
    assert await page.inner_text("#card-number-error") == ""
    await page.type("#exp-month", "13")
    assert await page.inner_text("#exp-month-error") == "must be a month, 01 to 12"
    await page.fill("#exp-month", "01")
    await page.type("#exp-year", "20")
    assert "expired" in await page.inner_text("#exp-year-error")
    await page.type("#cvn", "12")
    await page.click("#holder-name")
    assert await page.inner_text("#cvn-error") == "must be 3 or 4 digits"
    await page.type("#holder-name", "siti")
    assert await page.input_value("#holder-name") == "SITI"
    posts: list[str] = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
    await page.click("#pay")
    await page.wait_for_timeout(300)
    assert posts == []  # the page refused to send it; the server would have refused it too
    assert page.url == data["link"]
    await page.context.close()

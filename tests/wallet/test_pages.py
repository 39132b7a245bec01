"""The staging checkout page (payment_url): Pay and Fail drive the dummy payment's transitions."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest
from fastapi import FastAPI

from kasir.config import get_settings
from kasir.kit.pages import form_token
from tests.support.builders import make_merchant
from tests.support.forms import page_forms, post_form, submit, visible_text
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire.wallet import check_callback, create, dummy_payment, inquire, item, refund, void
from tests.support.worker import settled_callbacks

ITEMS = [item(40_000, 2, name="Sepatu Lari"), item(20_000, 1, item_id="shippingfee", name="Ongkir")]


def page_path(tx: dict[str, str]) -> str:
    return tx["payment_url"].removeprefix(get_settings().public_url)


async def test_page_shows_the_payment_and_pay_sends_the_callback(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    tx = await create(
        client, merchant, receiver.url("/page-pay"), channel="DANA", items=ITEMS, return_url="https://shop.example/done"
    )
    page = await client.get(page_path(tx))
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    html = page.text
    assert merchant.credentials.name in html
    assert "Sepatu Lari" in html
    assert "Ongkir" in html
    assert "Rp100.000" in html
    assert 'id="channel">DANA<' in html
    assert 'data-status="PENDING"' in html
    assert re.search(r'action="([^"]+/pay)"', html) is not None
    assert re.search(r'action="([^"]+/fail)"', html) is None  # DANA does not report failures

    forms = await page_forms(client, page_path(tx))
    assert forms["pay-form"].fields["csrf"]
    paid = await post_form(client, forms["pay-form"])
    assert paid.status_code == 303
    after = await client.get(paid.headers["location"])
    assert 'data-status="PAID"' in after.text
    assert "pay-form" not in after.text
    assert 'href="https://shop.example/done"' in after.text

    [request] = await receiver.wait_for(1, path="/page-pay")
    payload = check_callback(request, merchant, tx)
    assert payload["transaction_status"] == "PAID"
    assert (await inquire(client, merchant, tx))["transaction_status"] == "PAID"

    again = await post_form(client, forms["pay-form"])  # the page's form, sent again
    assert again.status_code == 409
    assert visible_text(again.text) == (
        f"Staging simulator: no money moves. {merchant.credentials.name} This payment is already paid. "
        "Back to the payment"
    )
    assert (await dummy_payment(client, merchant, tx)).status_code == 409
    assert len(receiver.requests) == 1


async def test_fail_on_the_page_for_ovo(app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, receiver.url("/page-fail"), channel="OVO")
    forms = await page_forms(client, page_path(tx))
    failed = await post_form(client, forms["fail-form"], reason="Customer cancelled in OVO")
    assert failed.status_code == 303
    [request] = await receiver.wait_for(1, path="/page-fail")
    payload = check_callback(request, merchant, tx)
    assert payload["transaction_status"] == "failed"
    assert payload["response_code"] == "03"
    assert payload["response_message"] == "Customer cancelled in OVO"
    assert (await post_form(client, forms["pay-form"])).status_code == 409


async def test_fail_on_the_page_is_refused_outside_ovo(app: FastAPI, client: httpx.AsyncClient) -> None:
    """The page offers no Fail button (only OVO reports failures); the form posted anyway is refused."""
    merchant = await make_merchant(app)
    tx = await create(client, merchant, channel="SHOPEEPAY")
    csrf = form_token("wallet-fail", tx["transaction_id"])
    refused = await client.post(f"{page_path(tx)}/fail", data={"csrf": csrf})
    assert refused.status_code == 409
    assert visible_text(refused.text) == (
        f"Staging simulator: no money moves. {merchant.credentials.name} "
        "Only OVO payments can be declined here: this one is paid with SHOPEEPAY. Back to the payment"
    )
    assert (await inquire(client, merchant, tx))["transaction_status"] == "PENDING"


@pytest.mark.parametrize("channel", ["OVO", "DANA", "SHOPEEPAY", "LINKAJA", "VIRGO", "QRIS"])
async def test_only_ovo_offers_a_fail_button(app: FastAPI, client: httpx.AsyncClient, channel: str) -> None:
    """decisions.md §5: OVO is the failure-reporting channel; a Fail button elsewhere could only be refused."""
    merchant = await make_merchant(app)
    tx = await create(client, merchant, channel=channel)
    forms = await page_forms(client, page_path(tx))
    assert "pay-form" in forms
    assert ("fail-form" in forms) == (channel == "OVO")
    html = (await client.get(page_path(tx))).text
    assert ('id="fail"' in html) == (channel == "OVO")


# Words of the wire a shopper has no use for: states, codes, field names, the wire's messages.
WIRE_WORDS = re.compile(
    r"\b(PENDING|PAID|EXPIRED|REFUNDED|VOID|failed|Failed Request|transaction_status|response_code|"
    r"payment_channel|[a-z]+_[a-z_]+)\b"
)


async def test_the_page_speaks_to_the_shopper_in_every_state(app: FastAPI, client: httpx.AsyncClient) -> None:
    """Pending, paid, declined, expired, refunded, void: words, not the wire's states, codes or field names;
    after paying a way back to the shop (the payment's return_url), or the advice to close the page."""
    merchant = await make_merchant(app)
    shop = "https://shop.example/orders/42"
    pages: dict[str, str] = {}

    pending = await create(client, merchant, channel="DANA", items=ITEMS, return_url=shop)
    pages["pending"] = (await client.get(page_path(pending))).text
    assert (await submit(client, page_path(pending), "pay-form")).status_code == 303
    pages["paid"] = (await client.get(page_path(pending))).text

    declined = await create(client, merchant, channel="OVO", return_url=shop)
    assert (await submit(client, page_path(declined), "fail-form")).status_code == 303
    pages["declined"] = (await client.get(page_path(declined))).text

    expired = await create(client, merchant, channel="LINKAJA")
    assert (await dummy_payment(client, merchant, expired, simulate_status="EXPIRED")).status_code == 200
    pages["expired"] = (await client.get(page_path(expired))).text

    refunded = await create(client, merchant, channel="SHOPEEPAY", return_url=shop)
    assert (await dummy_payment(client, merchant, refunded)).status_code == 200
    assert (await refund(client, merchant, refunded, 1_000)).status_code == 200
    pages["refunded"] = (await client.get(page_path(refunded))).text

    voided = await create(client, merchant, channel="VIRGO")
    assert (await dummy_payment(client, merchant, voided)).status_code == 200
    assert (await void(client, merchant, voided)).status_code == 200
    pages["void"] = (await client.get(page_path(voided))).text

    for name, html in pages.items():
        text = visible_text(html)
        assert WIRE_WORDS.search(text) is None, (name, WIRE_WORDS.search(text), text)
        assert "Rp100.000" in text, name
    assert "Pay Rp100.000" in visible_text(pages["pending"])
    assert f'href="{shop}" id="return">Back to {merchant.credentials.name} without paying<' in pages["pending"]
    assert "Paid. Thank you!" in visible_text(pages["paid"])
    assert f'href="{shop}" id="return">Back to {merchant.credentials.name}<' in pages["paid"]
    assert "The payment was declined. Declined on the checkout page" in visible_text(pages["declined"])
    assert f'href="{shop}" id="return"' in pages["declined"]
    assert "This payment expired before it was paid." in visible_text(pages["expired"])
    assert f"You can close this page and go back to {merchant.credentials.name}." in visible_text(pages["expired"])
    assert "Paid, then refunded by the shop." in visible_text(pages["refunded"])
    assert "Cancelled by the shop" in visible_text(pages["void"])
    for name in ("paid", "declined", "expired", "refunded", "void"):
        assert "pay-form" not in pages[name], name
        assert "fail-form" not in pages[name], name


async def test_qris_page_shows_the_code(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, channel="QRIS")
    html = (await client.get(page_path(tx))).text
    assert f'src="/ewallet/qr/{tx["transaction_id"]}.png"' in html
    assert (await client.get("/ewallet/pages/WLTNOSUCH")).status_code == 404


async def test_concurrent_page_payments_only_one_wins(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, receiver.url("/page-race"), channel="OVO")
    forms = await page_forms(client, page_path(tx))
    responses = await asyncio.gather(
        post_form(client, forms["pay-form"]),
        post_form(client, forms["fail-form"]),
        post_form(client, forms["pay-form"]),
        dummy_payment(client, merchant, tx),
    )
    statuses = sorted(r.status_code for r in responses)
    assert statuses in ([200, 409, 409, 409], [303, 409, 409, 409])  # one wins, by page (303) or API (200)
    await receiver.wait_for(1, path="/page-race")
    await settled_callbacks(app, merchant.id)
    assert len(receiver.requests) == 1


@pytest.mark.slow
async def test_over_a_real_socket(app: FastAPI, served: ServedKasir, receiver: CallbackReceiver) -> None:
    """create-qr, page, dummy payment and the signed callback across `kasir serve` in a subprocess."""
    merchant = await make_merchant(app)
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        qr = await create(http, merchant, receiver.url("/served-qr"), channel="QRIS")
        assert qr["qr_url"].startswith(served.base_url)
        assert (await http.get(qr["qr_url"])).content.startswith(b"\x89PNG")
        assert (await http.get(qr["payment_url"])).status_code == 200
        paid = await dummy_payment(http, merchant, qr)
        assert paid.status_code == 200, paid.text
        wallet = await create(http, merchant, receiver.url("/served-page"), channel="LINKAJA")
        assert (await submit(http, wallet["payment_url"], "pay-form")).status_code == 303
        responses = await asyncio.gather(*(dummy_payment(http, merchant, wallet) for _ in range(3)))
        assert all(r.status_code == 409 for r in responses)
        assert (await inquire(http, merchant, qr))["transaction_status"] == "PAID"
    [qr_callback] = await receiver.wait_for(1, path="/served-qr")
    assert check_callback(qr_callback, merchant, qr)["retrieval_reference_no"]
    [page_callback] = await receiver.wait_for(1, path="/served-page")
    assert check_callback(page_callback, merchant, wallet)["transaction_status"] == "PAID"


@pytest.mark.slow
async def test_concurrent_dummy_payments_across_a_real_socket(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    async with httpx.AsyncClient(base_url=served.base_url) as http:
        tx = await create(http, merchant, receiver.url("/served-race"), channel="VIRGO")
        responses = await asyncio.gather(*(dummy_payment(http, merchant, tx) for _ in range(5)))
    assert sorted(r.status_code for r in responses) == [200, 409, 409, 409, 409]
    await receiver.wait_for(1, path="/served-race")
    await settled_callbacks(app, merchant.id)
    assert len([r for r in receiver.requests if r.path == "/served-race"]) == 1


async def test_a_cross_site_post_changes_nothing(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    """Another site's form (no token, a token of another payment or form, a made-up one) is refused: 403."""
    merchant = await make_merchant(app)
    tx = await create(client, merchant, receiver.url("/page-forged"), channel="OVO")
    other = await create(client, merchant, channel="OVO")
    theirs = await page_forms(client, page_path(other))
    ours = await page_forms(client, page_path(tx))
    for action in ("pay", "fail"):
        url = f"{page_path(tx)}/{action}"
        for data in (
            {},
            {"csrf": ""},
            {"csrf": "0" * 64},
            {"csrf": theirs[f"{action}-form"].fields["csrf"]},  # another payment's page
            {"csrf": ours["fail-form" if action == "pay" else "pay-form"].fields["csrf"]},  # the other button's
        ):
            refused = await client.post(url, data=data, headers={"Origin": "https://evil.example"})
            assert refused.status_code == 403, (action, data)
            assert "nothing was changed" in refused.text
    assert (await inquire(client, merchant, tx))["transaction_status"] == "PENDING"
    assert (await post_form(client, ours["pay-form"])).status_code == 303
    assert (await inquire(client, merchant, tx))["transaction_status"] == "PAID"
    await receiver.wait_for(1, path="/page-forged")

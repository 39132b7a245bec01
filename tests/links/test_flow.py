"""The link's life (docs/decisions.md §10.4, §10.5): the customer chooses a method on its page, pays or fails
through that method's own page, and the merchant hears payment-page callbacks signed per §3.5 (computed here)
with §10.5's payment_method / payment_channel / acq per method. Inner payments send nothing of their own and
are not found through their rooms' routes."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from kasir.config import get_settings
from kasir.kit.clock import clock
from kasir.merchants.service import merchant_service
from tests.card.test_pages import pay as pay_card
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.forms import page_forms, post_form
from tests.support.receiver import CallbackReceiver
from tests.support.wire.card import APPROVED, DECLINED
from tests.support.wire.links import check_callback, create, create_body, post, read
from tests.support.wire.va import post as post_va
from tests.support.wire.wallet import assert_problem, post_wallet

ALL = [
    {"channel": "CARD", "acq": "BCACC"},
    {"channel": "DANA"},
    {"channel": "OVO"},
    {"channel": "QRIS"},
    {"channel": "VA", "acq": "BCA-MCP"},
]


def local(url: str) -> str:
    return url.removeprefix(get_settings().public_url)


async def choose(client: httpx.AsyncClient, link: dict[str, Any], channel: str, **fields: str) -> str:
    """Press the method's button on the link's page; where the customer is sent (303)."""
    forms = await page_forms(client, local(link["payment_url"]))
    form = next(f for f in forms.values() if f.fields.get("channel") == channel)
    answer = await post_form(client, form, **fields)
    assert answer.status_code == 303, answer.text
    return answer.headers["location"]


async def paid_by(
    receiver: CallbackReceiver, merchant: builders.TestMerchant, link: dict[str, Any], path: str, count: int = 1
) -> list[dict[str, Any]]:
    return [check_callback(r, merchant, link) for r in await receiver.wait_for(count, path=path)]


async def test_a_link_paid_by_card_reports_card_and_the_acquirer(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    link = await create(
        client, merchant, receiver.url("/card"), channels=ALL, success_redirect_url="https://shop.example/ok?x=1"
    )
    page = await client.get(local(link["payment_url"]))
    assert page.status_code == 200
    assert "Rp50.000" in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assert "<script>" not in page.text
    order_page = await choose(client, link, "CARD")
    assert order_page.startswith("/card/pages/CARD")
    assert await choose(client, link, "CARD") == order_page  # back and again: the same order
    card_page = (await client.get(order_page)).text
    assert "Full payment" in card_page
    assert "3 months" not in card_page  # a link is paid in full (§10.3)
    # The customer knows the order by the merchant's order id, may go back to the other methods, and is not
    # offered to save the card on a link that did not ask for it (§10.1 save_card).
    assert f'<code id="order-id">{link["order_id"]}</code>' in card_page
    assert 'id="choose-again">Choose another way to pay' in card_page
    assert 'id="save-card"' not in card_page
    declined = await pay_card(client, order_page, DECLINED)
    assert declined.status_code == 200
    assert "left" in declined.text
    [failed] = await paid_by(receiver, merchant, link, "/card")
    assert failed["transaction_status"] == "FAILED"
    assert (failed["payment_method"], failed["payment_channel"], failed["acq"]) == ("CARD", "CARD", "BCA")
    assert failed["response_message"]
    assert failed["paid_date"] == ""

    done = await pay_card(client, order_page, APPROVED)
    assert done.status_code == 303
    back = await client.get(local(done.headers["location"]))
    assert back.status_code == 303
    assert back.headers["location"] == f"https://shop.example/ok?x=1&transaction_id={link['transaction_id']}"
    _failed, success = await paid_by(receiver, merchant, link, "/card", 2)
    assert success["transaction_status"] == "SUCCESS"
    assert (success["payment_method"], success["payment_channel"], success["acq"]) == ("CARD", "CARD", "BCA")
    assert success["response_message"] == "Success"
    assert success["paid_date"].endswith("Z")
    assert success["selected_channels"][0] == {"channel": "CARD", "acq": "BCACC"}
    assert success["mis_version"] == 3
    assert "sub_merchant_id" not in success
    assert (await read(client, merchant, link["transaction_id"])).json()["data"]["transaction_status"] == "SUCCESS"
    # The card order sent nothing of its own: only the link's two callbacks arrived.
    assert len(receiver.requests) == 2


async def test_a_link_paid_by_dana_then_nothing_else_pays(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    link = await create(client, merchant, receiver.url("/dana"), channels=ALL)
    va_page = await choose(client, link, "VA")
    assert va_page == f"/payment-page/pages/{link['transaction_id']}/va"
    checkout = await choose(client, link, "DANA", wallet_id="081298765432")
    assert checkout.startswith("/ewallet/pages/")
    tx_id = checkout.rsplit("/", 1)[1]
    forms = await page_forms(client, checkout)
    paid = await post_form(client, forms["pay-form"])
    # Paid, the customer goes straight on to the link's page, which sends them to the merchant (§10.4).
    assert (paid.status_code, paid.headers["location"]) == (303, link["payment_url"])
    [success] = await paid_by(receiver, merchant, link, "/dana")
    assert success["transaction_status"] == "SUCCESS"
    assert (success["payment_method"], success["payment_channel"], success["acq"]) == ("WALLET", "DANA", "DANA")
    # Kasir's own result page where the merchant named no success URL.
    result = await client.get(local(link["payment_url"]))
    assert 'data-status="SUCCESS"' in result.text
    # The VA chosen before was cancelled silently: no VA callback, and its pay button is gone.
    assert (await client.get(va_page)).status_code == 200
    # The inner wallet transaction is not found through the wallet's routes.
    inquiry = {"transaction_id": tx_id, "external_id": f"{link['transaction_id']}-2", "order_id": link["order_id"]}
    assert_problem(await post_wallet(client, merchant, "/ewallet/v2/inquiry", inquiry), 404, "02")
    assert len(receiver.requests) == 1


async def test_a_link_paid_by_va_reports_the_bank_as_the_entry_names_it(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    link = await create(
        client, merchant, receiver.url("/va"), channels=ALL, failed_redirect_url="https://shop.example/no"
    )
    va_page = await choose(client, link, "VA")
    assert await choose(client, link, "VA") == va_page
    page = await client.get(va_page)
    assert page.status_code == 200
    assert "40416" in page.text.replace(" ", "")
    assert "Rp50.000" in page.text
    forms = await page_forms(client, va_page)
    va_id = forms["pay-form"].fields["va"]
    # The VA is the link's: the VA routes do not find it.
    ref = {"transaction_id": va_id, "external_id": f"{link['transaction_id']}-BCA-MCP", "order_id": link["order_id"]}
    assert_problem(await post_va(client, merchant, "/va/inquiry", ref), 404, "02")
    paid = await post_form(client, forms["pay-form"])
    assert paid.status_code == 303
    [success] = await paid_by(receiver, merchant, link, "/va")
    assert (success["payment_method"], success["payment_channel"], success["acq"]) == (
        "VIRTUAL_ACCOUNT",
        "VA",
        "BCA-MCP",
    )
    assert success["transaction_status"] == "SUCCESS"
    assert len(receiver.requests) == 1


async def test_the_third_failed_attempt_across_methods_expires_the_link(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    link = await create(
        client, merchant, receiver.url("/fails"), channels=ALL, failed_redirect_url="https://shop.example/no"
    )
    ovo = await choose(client, link, "OVO", wallet_id="081298765432")
    forms = await page_forms(client, ovo)
    assert (await post_form(client, forms["fail-form"])).status_code == 303
    page = await client.get(local(link["payment_url"]))
    assert "Payment failed" in page.text  # on Kasir's page, the reason shown
    order_page = await choose(client, link, "CARD")
    await pay_card(client, order_page, DECLINED)
    last = await pay_card(client, order_page, DECLINED)
    assert last.status_code == 303
    callbacks = await paid_by(receiver, merchant, link, "/fails", 4)
    assert [c["transaction_status"] for c in callbacks] == ["FAILED", "FAILED", "FAILED", "EXPIRED"]
    assert (callbacks[0]["payment_method"], callbacks[0]["acq"]) == ("WALLET", "OVO")
    assert callbacks[0]["response_message"] == "Declined on the checkout page"
    assert callbacks[3]["response_message"] == "Too many failed attempts"
    assert (callbacks[3]["payment_method"], callbacks[3]["acq"]) == ("CARD", "BCA")
    gone = await client.get(local(link["payment_url"]))
    assert gone.headers["location"] == f"https://shop.example/no?transaction_id={link['transaction_id']}"


async def test_a_link_expires_at_its_expired_time(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    link = await create(client, merchant, receiver.url("/late"), channels=ALL)
    untouched = await create(client, merchant, receiver.url("/late-untouched"), channels=ALL)
    va_page = await choose(client, link, "VA")
    clock.advance(24 * 3600 + 1)
    [expired] = await paid_by(receiver, merchant, link, "/late")
    assert expired["transaction_status"] == "EXPIRED"
    assert expired["response_message"] == "Payment expired"
    assert (expired["payment_method"], expired["payment_channel"], expired["acq"]) == (
        "VIRTUAL_ACCOUNT",
        "VA",
        "BCA-MCP",
    )
    [never] = await paid_by(receiver, merchant, untouched, "/late-untouched")
    assert (never["payment_method"], never["payment_channel"], never["acq"]) == ("", "", "")
    assert 'data-status="EXPIRED"' in (await client.get(va_page)).text


async def test_a_qris_link_is_paid_by_its_qr_and_a_sub_merchant_signs_the_callback(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await merchant_service.add_sub_merchant(session, merchant.id, "SUB-7", "Toko Cabang")
    body = create_body(receiver.url("/qris"), channels=[{"channel": "QRIS"}, {"channel": "CARD"}])
    body["customer_details"] |= {"is_email_show": False, "is_phone_show": False}
    answer = await post(client, merchant, body, **{"sub-merchant-id": "SUB-7"})
    assert answer.status_code == 200, answer.text
    link = answer.json()["data"]
    page = (await client.get(local(link["payment_url"]))).text
    assert "budi@example.id" not in page
    assert "081234567890" not in page  # not shown, and no wallet entry asks for it
    qr_page = await choose(client, link, "QRIS")
    assert qr_page.startswith("/ewallet/pages/")
    assert 'id="qr"' in (await client.get(qr_page)).text
    forms = await page_forms(client, qr_page)
    assert (await post_form(client, forms["pay-form"])).status_code == 303
    [success] = await paid_by(receiver, merchant, link, "/qris")
    assert success["sub_merchant_id"] == "SUB-7"  # and check_callback verified the signature with it
    assert (success["payment_method"], success["payment_channel"], success["acq"]) == ("WALLET", "QRIS", "QRIS")
    assert success["customer_details"]["is_email_show"] is False
    other = await post(client, merchant, create_body(), **{"sub-merchant-id": "NOT-MINE"})
    assert_problem(other, 403, "04", "sub-merchant-id")


async def test_a_links_card_order_is_not_found_by_the_card_inquiry(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    link = await create(client, merchant, channels=[{"channel": "CARD", "acq": "CIMBPG"}])
    order_id = (await choose(client, link, "CARD")).rsplit("/", 1)[1]
    reference = f"{link['transaction_id']}-1"  # the order's own external_id and order_id
    body = {"transaction_id": order_id, "external_id": reference, "order_id": reference}
    assert_problem(await post_wallet(client, merchant, "/card-v2/inquiry", body), 404, "02")


async def test_a_link_with_save_card_offers_saving_the_card(app: FastAPI, client: httpx.AsyncClient) -> None:
    """§10.1 save_card: true offers "save this card" on the card page; false (above) does not."""
    merchant = await make_merchant(app)
    link = await create(client, merchant, channels=[{"channel": "CARD"}], save_card=True)
    card_page = (await client.get(await choose(client, link, "CARD"))).text
    assert 'id="save-card"' in card_page

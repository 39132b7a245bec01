"""Two customers paying one link at once, by card and by VA (docs/decisions.md §10.4): exactly one SUCCESS and
one callback; the other's money is refused or its attempt closed. On both databases (on PostgreSQL the two
units run at once: the link is locked before the inner row, kasir.payments.owners)."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI
from sqlalchemy import func, select

from kasir.card.models import CardOrder
from kasir.db import fetch_value
from kasir.processors.models import ProcessorCall
from kasir.va.models import VirtualAccount
from tests.card.test_pages import hidden
from tests.links.test_flow import choose, local
from tests.support.builders import make_merchant
from tests.support.forms import page_forms, post_form
from tests.support.receiver import CallbackReceiver
from tests.support.wire.card import APPROVED, future_year
from tests.support.wire.links import check_callback, create
from tests.support.worker import settled_callbacks

ROUNDS = 6


def card_fields(page: str) -> dict[str, str]:
    return {
        "attempt": hidden(page, "attempt"),
        "csrf": hidden(page, "csrf"),
        "cardExpiredMonth": "09",
        "cardExpiredYear": future_year(),
        "cardCvn": "123",
        "cardHolderName": "Siti Rahayu",
        "tenor": "0",
    }


async def test_card_and_va_racing_give_one_success_and_one_callback(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    winners: list[str] = []
    losers: list[tuple[int, int]] = []
    for round_ in range(ROUNDS):
        path = f"/race-{round_}"
        link = await create(
            client, merchant, receiver.url(path), channels=[{"channel": "CARD"}, {"channel": "VA", "acq": "BNI"}]
        )
        va_page = await choose(client, link, "VA")
        order_page = await choose(client, link, "CARD")
        va_form = (await page_forms(client, va_page))["pay-form"]
        card_page = await client.get(order_page)  # both pages open, then both customers press Pay
        card_form = {**card_fields(card_page.text), "cardNumber": APPROVED}
        card_pay = client.post(f"{order_page}/pay", data=card_form)
        if round_ % 2:  # either customer's request first
            va_answer, card_answer = await asyncio.gather(post_form(client, va_form), card_pay)
        else:
            card_answer, va_answer = await asyncio.gather(card_pay, post_form(client, va_form))
        assert card_answer.status_code in (200, 303, 409), card_answer.text
        # The VA's money is refused while the card is with the acquirer (409, the customer stays on the link's
        # page), or after the card paid; or it pays first and the card page is closed (303 each).
        assert va_answer.status_code in (303, 409), va_answer.text

        rows = [
            row for row in await settled_callbacks(app, merchant.id) if row.transaction_ref == link["transaction_id"]
        ]
        assert [row.event for row in rows] == ["SUCCESS"]
        [callback] = await receiver.wait_for(1, path=path)
        payload = check_callback(callback, merchant, link)
        assert payload["transaction_status"] == "SUCCESS"
        winners.append(payload["payment_method"])
        losers.append((card_answer.status_code, va_answer.status_code))

        va_id = va_form.fields["va"]
        order_id = order_page.rsplit("/", 1)[1]
        async with app.state.database.unit_of_work(read_only=True) as session:
            va_status = await fetch_value(session, select(VirtualAccount.status).where(VirtualAccount.id == va_id))
            card_status = await fetch_value(session, select(CardOrder.status).where(CardOrder.id == order_id))
            # Nothing left half-asked of the acquirer (a call the worker would have to finish).
            left = select(func.count()).select_from(ProcessorCall).where(ProcessorCall.reference == order_id)
            assert await fetch_value(session, left) == 0
        if payload["payment_method"] == "CARD":
            assert (card_status, va_status) == ("SUCCESS", "CANCELLED")
        else:
            assert payload["payment_method"] == "VIRTUAL_ACCOUNT"
            assert (va_status, card_status) == ("PAID", "EXPIRED")
        # Whoever lost, the customer's page now says it is paid.
        assert 'data-status="SUCCESS"' in (await client.get(local(link["payment_url"]))).text
    assert set(winners) <= {"CARD", "VIRTUAL_ACCOUNT"}
    assert all(card == 303 for card, _va in losers)  # the card customer is sent on to the link's page


async def test_a_va_payment_after_the_card_paid_is_refused(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    link = await create(
        client, merchant, receiver.url("/late-va"), channels=[{"channel": "VA", "acq": "BRI"}, {"channel": "CARD"}]
    )
    va_page = await choose(client, link, "VA")
    va_form = (await page_forms(client, va_page))["pay-form"]
    order_page = await choose(client, link, "CARD")
    card_page = await client.get(order_page)
    paid = await client.post(f"{order_page}/pay", data={**card_fields(card_page.text), "cardNumber": APPROVED})
    assert paid.status_code == 303
    late = await post_form(client, va_form)  # the VA page was still open in another tab
    assert late.status_code == 303  # to the link's page, which says it is paid
    [callback] = await receiver.wait_for(1, path="/late-va")
    assert check_callback(callback, merchant, link)["payment_method"] == "CARD"
    async with app.state.database.unit_of_work(read_only=True) as session:
        va_status = await fetch_value(
            session, select(VirtualAccount.status).where(VirtualAccount.id == va_form.fields["va"])
        )
    assert va_status == "CANCELLED"
    rows = [row for row in await settled_callbacks(app, merchant.id) if row.transaction_ref == link["transaction_id"]]
    assert [row.event for row in rows] == ["SUCCESS"]

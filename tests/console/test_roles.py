"""A merchant user sees only its own merchant: every console route answers another merchant's ids with 404."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from kasir.callbacks.models import Callback
from kasir.db import fetch, fetch_value
from tests.console.helpers import closing, page_csrf, paid_wallet_payment, signed_in
from tests.support.builders import make_merchant

CALLBACK_URL = "http://127.0.0.1:9/cb"


async def first_callback(app: FastAPI, transaction_id: str) -> int:
    async with app.state.database.unit_of_work(read_only=True) as session:
        return int(
            await fetch_value(session, select(Callback.id).where(Callback.transaction_ref == transaction_id)) or 0
        )


async def test_a_merchant_user_gets_404_for_every_route_of_another_merchants_data(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    mine, theirs = (
        await make_merchant(app, callback_url=CALLBACK_URL),
        await make_merchant(app, callback_url=CALLBACK_URL),
    )
    my_tx = await paid_wallet_payment(client, mine, CALLBACK_URL)
    their_tx = await paid_wallet_payment(client, theirs, CALLBACK_URL)
    their_id = their_tx["transaction_id"]
    their_callback = await first_callback(app, their_id)
    assert their_callback
    async with closing(await signed_in(app, role="merchant", merchant_id=mine.id)) as browser:
        csrf = await page_csrf(browser)
        gets = [
            f"/console/payments/{their_id}",
            f"/console/merchants/{theirs.id}",
            f"/console/merchants/{mine.id}",  # merchant pages are operators' only
            "/console/merchants",
            "/console/merchants/new",
            "/console/audit",
            "/console/users",  # a merchant user manages nobody (a merchant's admin: tests/console/test_users.py)
            f"/console/callbacks?merchant={theirs.id}",
        ]
        for path in gets:
            response = await browser.get(path)
            assert response.status_code == 404, path
            assert their_id not in response.text, path
            assert theirs.credentials.name not in response.text, path
        posts = [
            (f"/console/payments/{their_id}/refund", {"amount": "1000"}),
            (f"/console/payments/{their_id}/refund", {"amount": "1000", "confirmed": "yes"}),
            (f"/console/payments/{their_id}/void", {}),
            (f"/console/payments/{their_id}/void", {"confirmed": "yes"}),
            (f"/console/payments/{their_id}/simulate", {"outcome": "pay"}),
            (f"/console/callbacks/{their_callback}/replay", {"target": "original"}),
            (f"/console/callbacks/{their_callback}/replay", {"target": "current"}),
            ("/console/callbacks/replay-given-up", {"merchant": theirs.id, "since": "2020-01-01", "confirmed": "yes"}),
            ("/console/callbacks/replay-given-up", {"merchant": theirs.id, "since": "2020-01-01"}),
            ("/console/merchants", {"name": "x", "key": "generate"}),
            (f"/console/merchants/{theirs.id}/callback-url", {"callback_url": "http://127.0.0.1:9/x"}),
            (f"/console/merchants/{theirs.id}/rotate", {"kind": "secret"}),
            (f"/console/merchants/{theirs.id}/disable", {"confirmed": "yes"}),
            (f"/console/merchants/{theirs.id}/enable", {}),
        ]
        for path, data in posts:
            response = await browser.post(path, data={**data, "csrf_token": csrf})
            assert response.status_code == 404, (path, response.status_code)
        # Their payment is in no list, search or export of mine; mine is.
        listed = await browser.get("/console/payments")
        assert my_tx["transaction_id"] in listed.text
        assert their_id not in listed.text
        searched = await browser.get(f"/console/payments?q={their_tx['order_id']}")
        assert their_id not in searched.text
        exported = await browser.get("/console/payments.csv")
        assert my_tx["transaction_id"] in exported.text
        assert their_id not in exported.text
        queue = await browser.get("/console/callbacks?state=pending")
        assert their_id not in queue.text
        # Their money is not in my overview either.
        assert (await browser.get("/console/overview")).status_code == 200
    # Nothing of theirs changed.
    async with app.state.database.unit_of_work(read_only=True) as session:
        replays = [
            row.id for row in await fetch(session, select(Callback.id).where(Callback.replay_of == their_callback))
        ]
    assert replays == []


async def test_an_operator_sees_every_merchant(app: FastAPI, client: httpx.AsyncClient) -> None:
    one, two = await make_merchant(app, callback_url=CALLBACK_URL), await make_merchant(app, callback_url=CALLBACK_URL)
    tx_one = await paid_wallet_payment(client, one, CALLBACK_URL)
    tx_two = await paid_wallet_payment(client, two, CALLBACK_URL)
    async with closing(await signed_in(app)) as browser:
        listed = await browser.get("/console/payments")
        assert tx_one["transaction_id"] in listed.text
        assert tx_two["transaction_id"] in listed.text
        for merchant in (one, two):
            page = await browser.get(f"/console/merchants/{merchant.id}")
            assert page.status_code == 200
            assert merchant.credentials.name in page.text

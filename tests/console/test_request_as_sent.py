"""A callback's request is shown as it was sent: the URL with its query, and the headers of that attempt."""

from __future__ import annotations

import html

import httpx
from fastapi import FastAPI

from tests.console.helpers import closing, paid_wallet_payment, signed_in
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.wire import x_req_signature
from tests.support.wire.callbacks import callback_signature
from tests.support.worker import settled_callbacks


async def test_the_payment_page_shows_the_delivered_request_as_the_merchant_received_it(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    tx = await paid_wallet_payment(client, merchant, receiver.url("/as-sent"))
    (received,) = await receiver.wait_for(1, path="/as-sent")
    signature = callback_signature(
        tx["transaction_id"], x_req_signature(merchant.credentials.hash_key, tx["external_id"], tx["order_id"])
    )
    assert received.headers["svc-signature"] == signature
    await settled_callbacks(app, merchant.id)  # the attempt is recorded once the merchant has answered
    async with closing(await signed_in(app)) as browser:
        page = html.unescape((await browser.get(f"/console/payments/{tx['transaction_id']}")).text)
    assert "Request as sent (attempt 1)" in page
    assert f"POST {receiver.url('/as-sent')}?svc-signature={signature}" in page
    assert f"svc-signature: {signature}" in page
    assert f"X-Kasir-Attempt: {received.headers['x-kasir-attempt']}" in page
    assert f"X-Kasir-Callback-Id: {received.headers['x-kasir-callback-id']}" in page

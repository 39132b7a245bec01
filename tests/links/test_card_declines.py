"""A link paid by one card order that the customer fails three times (docs/decisions.md §10.5): the third decline
is the link's third failed attempt too, so both end in the one unit of work: FAILED three times, then EXPIRED, and
the customer sent to the failed URL. Found by the browser proof (tests/links/test_browser_proofs.py): the link
closed the order, which then expired itself again, and the unit was refused."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from tests.card.test_pages import pay as pay_card
from tests.links.test_flow import ALL, choose, paid_by
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.wire.card import DECLINED
from tests.support.wire.links import create, read


async def test_three_declines_of_one_card_order_expire_the_link(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    link = await create(
        client, merchant, receiver.url("/declined"), channels=ALL, failed_redirect_url="https://shop.example/no"
    )
    order_page = await choose(client, link, "CARD")
    for _ in range(2):
        assert (await pay_card(client, order_page, DECLINED)).status_code == 200  # kept on the page, reason shown
    last = await pay_card(client, order_page, DECLINED)
    assert last.status_code == 303, last.text
    callbacks = await paid_by(receiver, merchant, link, "/declined", 4)
    assert [c["transaction_status"] for c in callbacks] == ["FAILED", "FAILED", "FAILED", "EXPIRED"]
    assert callbacks[3]["response_message"] == "Too many failed attempts"
    assert (callbacks[3]["payment_method"], callbacks[3]["payment_channel"], callbacks[3]["acq"]) == (
        "CARD",
        "CARD",
        "BCA",
    )
    assert (await read(client, merchant, link["transaction_id"])).json()["data"]["transaction_status"] == "EXPIRED"
    gone = await client.get(link["payment_url"].removeprefix(str(app.state.settings.public_url)))
    assert gone.headers["location"] == f"https://shop.example/no?transaction_id={link['transaction_id']}"

"""A processor per channel, in a running app: a channel without one is switched off, and a processor's
notifications move only the payments of the channels it serves."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from kasir.config import get_settings
from kasir.processors.protocols import Event, Notification
from kasir.processors.service import NotYourPayment, apply
from tests.processors.test_registry import installed_plugin  # noqa: F401  (the fixture)
from tests.support.builders import make_merchant
from tests.support.wire.wallet import CREATE, create, create_body, dummy_payment, post_wallet


@pytest.fixture
def ovo_elsewhere(installed_plugin: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """OVO goes to the `onlywallet` processor; every other wallet channel stays with the simulator."""
    monkeypatch.setattr(
        get_settings(), "processors", "card=simulator,bnpl=simulator,wallet=simulator,wallet.OVO=onlywallet"
    )


@pytest.mark.usefixtures("ovo_elsewhere")
async def test_a_notification_moves_only_the_payments_of_its_processors_channels(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    ovo = await create(client, merchant, channel="OVO")
    dana = await create(client, merchant, channel="DANA")
    database = app.state.database
    with pytest.raises(NotYourPayment):
        async with database.unit_of_work() as session:
            await apply(session, Notification("wallet", dana["transaction_id"], Event.PAID), by="onlywallet")
    with pytest.raises(NotYourPayment):
        async with database.unit_of_work() as session:
            await apply(session, Notification("wallet", ovo["transaction_id"], Event.PAID), by="simulator")
    async with database.unit_of_work() as session:
        state = await apply(session, Notification("wallet", ovo["transaction_id"], Event.PAID), by="onlywallet")
    assert state == "PAID"
    # the simulator's dummy payment is the simulator's notification: not for an OVO payment any more
    refused = await dummy_payment(client, merchant, {**ovo, "transaction_id": ovo["transaction_id"]})
    assert refused.status_code == 404, refused.text
    paid = await dummy_payment(client, merchant, dana)
    assert paid.status_code == 200, paid.text
    assert paid.json()["response_code"] == "00"


async def test_a_channel_with_no_processor_is_switched_off(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(get_settings(), "processors", "card=simulator,bnpl=simulator,wallet.DANA=simulator")
    merchant = await make_merchant(app)
    refused = await post_wallet(client, merchant, CREATE, create_body("http://127.0.0.1:9/cb", channel="OVO"))
    assert refused.status_code == 409, refused.text
    assert refused.json()["response_code"] == "03"
    assert "payment_channel is not available on this deployment" in refused.json()["response_message"]
    dana = await create(client, merchant, channel="DANA")
    assert dana["transaction_status"] == "PENDING", dana
    ready = await client.get("/readyz")
    assert ready.json()["products"] == {
        "card": "simulator",
        "wallet": "simulator",
        "bnpl": "simulator",
        "va": None,
        "payout": None,
    }

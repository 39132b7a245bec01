"""Production without a processor: every product is switched off, and no payment reaches a paid state.

The in-process app is switched to production for each test (as tests/card/test_pages.py does);
callback URLs resolve to a public address through an injected resolver (nothing is contacted).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from kasir.bnpl.models import BnplTransaction
from kasir.callbacks.ssrf import use_resolver
from kasir.card.models import CardOrder
from kasir.config import get_settings
from kasir.db import fetch_value
from tests.support.builders import make_merchant
from tests.support.wire.card import APPROVED, CHALLENGE, charge_body, post_charge
from tests.support.wire.snap import CHECKOUT, checkout_body, post_signed
from tests.support.wire.wallet import CREATE, create, create_body, dummy_payment, inquire, post_wallet

PUBLIC_CALLBACK = "https://merchant.example/kasir/callback"


@pytest.fixture
def production(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    async def public_address(host: str, port: int) -> list[str]:
        return ["93.184.216.34"]

    monkeypatch.setattr(get_settings(), "env", "production")
    with use_resolver(public_address):
        yield


async def count(app: FastAPI, model: Any, *where: Any) -> int:
    async with app.state.database.unit_of_work(read_only=True) as session:
        return int(await fetch_value(session, select(func.count()).select_from(model).where(*where)))


@pytest.mark.parametrize(("mode", "number"), [("CLOSE", APPROVED), ("CLOSE", CHALLENGE), ("OPEN", None)])
@pytest.mark.usefixtures("production")
async def test_card_charge_answers_the_channel_is_not_available(
    app: FastAPI, client: httpx.AsyncClient, mode: str, number: str | None
) -> None:
    merchant = await make_merchant(app)
    body = charge_body(mode=mode, number=number, callback_url=PUBLIC_CALLBACK)
    response = await post_charge(client, merchant, body)
    assert response.status_code == 400, response.text
    assert response.json() == {
        "statusCode": "400",
        "statusMessage": "VALIDATION_ERROR",
        "errors": [{"field": "paymentChannel", "message": "the channel is not available on this deployment"}],
    }
    assert await count(app, CardOrder, CardOrder.order_id == body["orderId"]) == 0
    # an ewallet charge through the card route is refused the same way
    body = charge_body(mode="OPEN", number=None, paymentMethod="ewallet", paymentChannel="DANA")
    response = await post_charge(client, merchant, body)
    assert (response.status_code, response.json()["errors"][0]["field"]) == (400, "paymentChannel")


async def test_a_card_order_made_before_cannot_be_paid_in_production(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    response = await post_charge(client, merchant, charge_body(mode="OPEN", number=None))
    path = response.json()["data"]["link"].removeprefix("http://kasir.test")
    monkeypatch.setattr(get_settings(), "env", "production")
    assert (await client.get(path)).status_code == 404
    form = {"attempt": "1", "cardNumber": APPROVED, "cardExpiredMonth": "12", "cardExpiredYear": "2030",
            "cardCvn": "123", "cardHolderName": "SITI"}  # fmt: skip
    assert (await client.post(f"{path}/pay", data=form)).status_code == 404
    assert (await client.get(f"{path}/3ds")).status_code == 404
    order_id = path.rsplit("/", 1)[1]
    assert await count(app, CardOrder, CardOrder.id == order_id, CardOrder.status == "PENDING") == 1


@pytest.mark.usefixtures("production")
async def test_wallet_create_answers_03_not_available(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    response = await post_wallet(client, merchant, CREATE, create_body(PUBLIC_CALLBACK))
    assert response.status_code == 409, response.text
    assert response.json() == {
        "response_code": "03",
        "response_message": "Failed Request: payment_channel is not available on this deployment",
    }


async def test_a_wallet_payment_made_before_cannot_be_paid_in_production(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant)
    page = tx["payment_url"].removeprefix("http://kasir.test")
    monkeypatch.setattr(get_settings(), "env", "production")
    assert (await dummy_payment(client, merchant, tx)).status_code == 404
    assert (await client.get(page)).status_code == 404
    assert (await client.post(f"{page}/pay")).status_code == 404
    assert (await client.post("/processors/simulator/notify", content=b"{}")).status_code == 404
    assert (await inquire(client, merchant, tx))["transaction_status"] == "PENDING"


@pytest.mark.usefixtures("production")
async def test_bnpl_checkout_answers_feature_not_allowed(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = checkout_body(PUBLIC_CALLBACK)
    response = await post_signed(client, merchant, CHECKOUT, body)
    assert response.status_code == 403, response.text
    assert response.json() == {
        "responseCode": "4039201",
        "responseMessage": "Feature Not Allowed: paymentChannel is not available on this deployment",
    }
    number = body["partnerReferenceNo"]
    assert await count(app, BnplTransaction, BnplTransaction.partner_reference_no == number) == 0


async def test_readyz_says_which_products_are_live(client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    ready = (await client.get("/readyz")).json()
    assert ready["products"] == {
        "card": "simulator",
        "wallet": "simulator",
        "bnpl": "simulator",
        "va": "simulator",
        "payout": "simulator",
    }
    monkeypatch.setattr(get_settings(), "processors", "wallet=simulator")
    assert (await client.get("/readyz")).json()["products"] == {
        "card": None,
        "wallet": "simulator",
        "bnpl": None,
        "va": None,
        "payout": None,
    }
    monkeypatch.setattr(get_settings(), "processors", "")
    monkeypatch.setattr(get_settings(), "env", "production")
    assert (await client.get("/readyz")).json()["products"] == {
        "card": None,
        "wallet": None,
        "bnpl": None,
        "va": None,
        "payout": None,
    }


async def test_staging_with_only_a_wallet_processor_switches_card_and_bnpl_off(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(get_settings(), "processors", "wallet=simulator")
    merchant = await make_merchant(app)
    response = await post_charge(client, merchant, charge_body())
    assert (response.status_code, response.json()["errors"][0]["field"]) == (400, "paymentChannel")
    response = await post_signed(client, merchant, CHECKOUT, checkout_body())
    assert response.json()["responseCode"] == "4039201"
    tx = await create(client, merchant)
    assert (await dummy_payment(client, merchant, tx)).json()["transaction_status"] == "PAID"


@pytest.mark.usefixtures("production")
async def test_va_creation_answers_03_and_the_dummy_payment_is_not_served(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """docs/decisions.md §9.8: without a VA issuer `/va` is switched off (`03`), and the staging dummy payment is
    404 in production; no VA is written."""
    from kasir.va.models import VirtualAccount
    from tests.support.wire import va

    merchant = await make_merchant(app)
    body = va.create_body(PUBLIC_CALLBACK)
    refused = await va.post(client, merchant, va.CREATE, body)
    assert refused.status_code == 409, refused.text
    assert refused.json() == {
        "response_code": "03",
        "response_message": "Failed Request: payment_channel is not available on this deployment",
    }
    assert await count(app, VirtualAccount, VirtualAccount.merchant_id == merchant.id) == 0
    reference = {"transaction_id": "VA" + "0" * 20, "external_id": body["external_id"], "order_id": body["order_id"]}
    dummy = await va.post(client, merchant, va.DUMMY, {**reference, "payment_method": "bank_transfer",
                                                        "payment_channel": "BCA"})  # fmt: skip
    assert dummy.status_code == 404

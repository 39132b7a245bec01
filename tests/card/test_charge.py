"""The charge API: outcomes per staging test card, the callbacks a real receiver gets."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from kasir.card.repository import CardAttemptRow, CardOrderRow, card_repository
from kasir.config import get_settings
from kasir.db import fetch, run
from kasir.kit.clock import parse_aware
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.wire.card import (
    APPROVED,
    APPROVED_MC,
    CHALLENGE,
    CHARGE,
    DECLINED,
    EXPIRED_CARD,
    INSUFFICIENT,
    ISSUER_DOWN,
    charge_body,
    check_callback,
    post_charge,
)
from tests.support.worker import settled_callbacks


async def stored(app: FastAPI, transaction_id: str) -> tuple[CardOrderRow, list[CardAttemptRow]]:
    async with app.state.database.unit_of_work(read_only=True) as session:
        order = await card_repository.get(session, transaction_id)
        assert order is not None
        return order, await card_repository.attempts(session, transaction_id)


async def test_frictionless_card_is_charged_at_once(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    body = charge_body(number=APPROVED, callback_url=receiver.url("/card/ok"), tenor="3")
    response = await post_charge(client, merchant, body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["statusCode"] == "00"
    assert answer["statusMessage"] == "SUCCESS"
    data = answer["data"]
    assert set(data) == {"transactionId", "externalId", "paymentStatus", "link"}
    assert data["paymentStatus"] == "SUCCESS"
    assert data["externalId"] == body["externalId"]
    assert data["link"] == f"{get_settings().public_url}/card/pages/{data['transactionId']}"

    [callback] = await receiver.wait_for(1, path="/card/ok")
    payload = check_callback(callback, merchant, body)
    assert payload["transaction_id"] == data["transactionId"]
    assert payload["transaction_status"] == "SUCCESS"
    assert payload["response_message"] == "Approved"
    assert payload["acq"] == "BCA"  # VISA on the CARD channel
    assert payload["selected_channels"] == [{"channel": "CARD", "acq": "BCA"}]
    assert payload["paid_date"].endswith("Z")
    parse_aware(payload["paid_date"])
    assert payload["item_details"] == [
        {"item_id": "SKU-1", "name": "Sepatu Lari", "amount": 50000, "qty": 2},
        {"item_id": "shippingfee", "name": "Ongkos kirim", "amount": 50000, "qty": 1},
    ]
    assert payload["is_customer_paying_fee"] is False
    assert payload["save_card"] is False
    assert payload["card_token"] == ""  # issue 26: a string, never null
    assert payload["customer_details"] == {
        "full_name": "Siti Rahayu",
        "email": "siti@example.id",
        "phone": "081234567890",
        "address": "Jl. Sudirman 1",
        "is_email_show": True,
        "is_phone_show": True,
    }
    assert payload["shipping_address"] == {
        "full_name": "Siti Rahayu",
        "phone": "081234567890",
        "address": "Jl. Thamrin 2",
        "city": "Bandung",
        "postal_code": "40111",
        "country": "ID",
    }
    assert payload["billing_address"]["city"] == "Jakarta"
    assert payload["callback_url"] == receiver.url("/card/ok")
    assert payload["success_redirect_url"].startswith("https://shop.example/return?")
    assert "status=SUCCESS" in payload["success_redirect_url"]
    assert "status=EXPIRED" in payload["failed_redirect_url"]
    assert payload["expired_time"].endswith("+07:00")

    order, [attempt] = await stored(app, data["transactionId"])
    assert order.status == "SUCCESS"
    assert order.tenor == "3"
    assert order.amount == 150000
    assert attempt.masked_card == "481111******1114"
    assert attempt.card_brand == "VISA"
    assert attempt.status == "SUCCESS"


@pytest.mark.parametrize(
    ("number", "message", "acq", "channel"),
    [
        (DECLINED, "Card declined by the issuer", "BCA", "CARD"),
        (INSUFFICIENT, "Insufficient funds", "CIMB", "CIMBCC"),
        (ISSUER_DOWN, "Issuer not responding", "BRI", "BRICC"),
        (EXPIRED_CARD, "Expired card", "BCA", "BCACC"),
    ],
)
async def test_failing_cards_leave_the_order_payable_and_send_failed(
    app: FastAPI,
    client: httpx.AsyncClient,
    receiver: CallbackReceiver,
    number: str,
    message: str,
    acq: str,
    channel: str,
) -> None:
    merchant = await make_merchant(app)
    path = f"/card/fail/{channel}"
    body = charge_body(number=number, callback_url=receiver.url(path), channel=channel)
    response = await post_charge(client, merchant, body)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["paymentStatus"] == "PENDING"  # the customer may still pay at the link
    assert data["link"].endswith(f"/card/pages/{data['transactionId']}")
    [callback] = await receiver.wait_for(1, path=path)
    payload = check_callback(callback, merchant, body)
    assert payload["transaction_status"] == "FAILED"
    assert payload["response_message"] == message
    assert payload["acq"] == acq
    assert payload["selected_channels"] == [{"channel": channel, "acq": acq}]
    assert payload["paid_date"] == ""  # issue 26: never null
    order, [attempt] = await stored(app, data["transactionId"])
    assert (order.status, order.attempts_failed) == ("PENDING", 1)
    assert attempt.status == "FAILED"
    assert attempt.response_message == message


async def test_challenge_card_needs_the_otp(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    body = charge_body(number=CHALLENGE, callback_url=receiver.url("/card/3ds"))
    response = await post_charge(client, merchant, body)
    data = response.json()["data"]
    assert data["paymentStatus"] == "PENDING"
    assert data["link"].endswith(f"/card/pages/{data['transactionId']}/3ds")
    order, [attempt] = await stored(app, data["transactionId"])
    assert order.status == "AUTHENTICATING"
    assert attempt.status == "CHALLENGE"
    assert await settled_callbacks(app, merchant.id) == []  # nothing a merchant is told about yet
    assert [r for r in receiver.requests if r.path == "/card/3ds"] == []


async def test_mastercard_on_card_channel_goes_to_cimb_and_three_part_auth(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    from tests.support.wire import auth

    merchant = await make_merchant(app)
    body = charge_body(number=APPROVED_MC, callback_url=receiver.url("/card/mc"))
    response = await post_charge(client, merchant, body, authorization=auth(merchant, three_part=True))
    assert response.status_code == 200, response.text
    [callback] = await receiver.wait_for(1, path="/card/mc")
    assert check_callback(callback, merchant, body)["acq"] == "CIMB"


async def test_merchant_default_callback_url_and_none_at_all(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app, callback_url=receiver.url("/card/default"))
    body = charge_body(number=APPROVED)
    response = await post_charge(client, merchant, body)
    [callback] = await receiver.wait_for(1, path="/card/default")
    payload: dict[str, Any] = check_callback(callback, merchant, body)
    assert payload["callback_url"] == receiver.url("/card/default")
    assert payload["transaction_id"] == response.json()["data"]["transactionId"]

    silent = await make_merchant(app)
    response = await post_charge(client, silent, charge_body(number=DECLINED))
    assert response.status_code == 200
    order, _ = await stored(app, response.json()["data"]["transactionId"])
    assert order.callback_url is None
    async with app.state.database.unit_of_work(read_only=True) as session:
        from kasir.callbacks.models import Callback

        rows = await fetch(session, select(Callback.id).where(Callback.merchant_id == silent.id))
    assert list(rows) == []


async def test_open_mode_links_to_the_payment_page(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = charge_body(mode="OPEN", tenor="6")
    response = await post_charge(client, merchant, body)
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["paymentStatus"] == "PENDING"
    page = await client.get(data["link"].removeprefix(get_settings().public_url))
    assert page.status_code == 200
    html = page.text
    assert merchant.credentials.name in html
    assert "Rp150.000" in html
    assert "Sepatu Lari" in html
    assert "Rp25.000 / month" in html  # 6 months of 150.000 at 0 %
    assert 'value="6" id="tenor-6"' in html
    assert "checked" in html.split('id="tenor-6"')[1].split(">")[0]
    for number in ("4811 1111 1111 1114", "4000 0000 0000 3220", "4000 0000 0000 0002"):
        assert number in html  # the test-card table


async def test_callbacks_follow_the_payment_page_acceptance_rule(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    """200 without a JSON `message` is not an acceptance: the callback stays due for one of its 3 retries."""
    from kasir.callbacks.models import Callback
    from tests.support.receiver import Answer

    receiver.answer(Answer(status=200, body="OK", content_type="text/plain"))
    merchant = await make_merchant(app)
    body = charge_body(number=APPROVED, callback_url=receiver.url("/card/picky"))
    transaction_id = (await post_charge(client, merchant, body)).json()["data"]["transactionId"]
    [callback] = await settled_callbacks(app, merchant.id)  # its first attempt made and recorded
    assert callback.transaction_ref == transaction_id
    assert (callback.kind, callback.event, callback.max_attempts) == ("payment_page", "SUCCESS", 4)
    assert (callback.status, callback.attempts_made) == ("pending", 1)
    assert callback.last_error == "HTTP 200 not accepted"
    async with app.state.database.unit_of_work() as session:  # no retry may reach a later test's receiver
        await run(session, update(Callback).where(Callback.id == callback.id).values(status="failed"))


async def test_the_request_log_line_names_the_order_it_created(
    app: FastAPI, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    merchant = await make_merchant(app)
    with caplog.at_level("INFO", logger="kasir.request"):
        response = await post_charge(client, merchant, charge_body(mode="OPEN"))
    assert response.status_code == 200, response.text
    lines = [r for r in caplog.records if r.name == "kasir.request" and getattr(r, "route", "") == CHARGE]
    assert len(lines) == 1
    assert lines[0].transaction_id == response.json()["data"]["transactionId"]  # type: ignore[attr-defined]
    assert lines[0].merchant_id == merchant.id  # type: ignore[attr-defined]


async def test_concurrent_charges_each_get_their_own_parse(app: FastAPI, client: httpx.AsyncClient) -> None:
    """Concurrent charges, good and bad: each answer is its own."""
    merchant = await make_merchant(app)
    good = [charge_body(mode="OPEN"), charge_body(), charge_body(mode="OPEN")]
    negative = charge_body(mode="OPEN")
    negative["paymentDetails"]["amount"] = -1
    bodies: list[Any] = [good[0], negative, good[1], "{not json", good[2]]
    responses = await asyncio.gather(
        *(
            post_charge(client, merchant, body, key=f"concurrent-{n}-{secrets.token_hex(4)}")
            for n, body in enumerate(bodies)
        )
    )
    assert [r.status_code for r in responses] == [200, 400, 200, 400, 200]
    answered = [r.json()["data"]["externalId"] for r in responses if r.status_code == 200]
    assert answered == [body["externalId"] for body in good]
    assert "paymentDetails.amount" in responses[1].text

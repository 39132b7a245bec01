"""The payment and OTP pages over HTTP: attempts, declines, 3-D Secure, double submission, CSRF, expiry."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from kasir.card.jobs import expire_due_card_orders
from kasir.config import get_settings
from kasir.kit.clock import clock
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.wire.card import (
    APPROVED,
    CHALLENGE,
    DECLINED,
    INSUFFICIENT,
    ISSUER_DOWN,
    charge_body,
    check_callback,
    future_year,
    jakarta_in,
    post_charge,
)
from tests.support.worker import expiry_hang_guard, settled_callbacks


def local(url: str) -> str:
    return url.removeprefix(get_settings().public_url)


def hidden(html: str, name: str) -> str:
    match = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert match is not None, name
    return match.group(1)


async def open_order(
    client: httpx.AsyncClient, merchant: builders.TestMerchant, **kwargs: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    body = charge_body(mode="OPEN", **kwargs)
    response = await post_charge(client, merchant, body)
    assert response.status_code == 200, response.text
    return body, response.json()["data"]


async def pay(
    client: httpx.AsyncClient, page_path: str, number: str, *, cvn: str = "123", tenor: str = "0", **extra: str
) -> httpx.Response:
    page = await client.get(page_path)
    assert page.status_code == 200, page.text
    form = {
        "attempt": hidden(page.text, "attempt"),
        "csrf": hidden(page.text, "csrf"),
        "cardNumber": number,
        "cardExpiredMonth": "09",
        "cardExpiredYear": future_year(),
        "cardCvn": cvn,
        "cardHolderName": "Siti Rahayu",
        "tenor": tenor,
        **extra,
    }
    return await client.post(f"{page_path}/pay", data=form)


async def test_decline_then_success_on_the_page(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    body, data = await open_order(client, merchant, callback_url=receiver.url("/pages/ok"), tenor="3")
    path = local(data["link"])

    declined = await pay(client, path, INSUFFICIENT, cvn="987", tenor="6")
    assert declined.status_code == 200
    html = declined.text
    assert "Insufficient funds" in html
    assert 'role="alert"' in html
    assert re.search(r'id="card-number"[^>]*value=', html) is None  # the number is typed again
    assert re.search(r'id="cvn"[^>]*value=', html) is None
    assert not re.search(r"(?<![0-9A-Za-z.])987(?![0-9A-Za-z.])", html)  # never the CVN
    assert 'value="SITI RAHAYU"' in html  # kept, upper-cased
    assert 'value="09"' in html
    assert re.search(r'value="6" id="tenor-6"\s+data-monthly="Rp25.000" data-months="6"\s+checked', html)
    assert hidden(html, "attempt") == "2"

    paid = await pay(client, path, APPROVED, tenor="12", saveCard="true")
    assert paid.status_code == 303
    location = paid.headers["location"]
    assert location.startswith("https://shop.example/return?")
    assert f"transaction_id={data['transactionId']}" in location
    assert "status=SUCCESS" in location

    failed, success = await receiver.wait_for(2, path="/pages/ok")
    assert check_callback(failed, merchant, body)["transaction_status"] == "FAILED"
    payload = check_callback(success, merchant, body)
    assert payload["transaction_status"] == "SUCCESS"
    assert payload["save_card"] is True
    assert re.fullmatch(r"CTK[A-Z0-9]{32}", payload["card_token"])

    closed = await client.get(path)
    assert 'data-status="SUCCESS"' in closed.text
    assert "pay-form" not in closed.text


async def test_three_declines_close_the_link(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    body, data = await open_order(client, merchant, callback_url=receiver.url("/pages/three"))
    path = local(data["link"])
    assert (await pay(client, path, DECLINED)).status_code == 200
    assert (await pay(client, path, ISSUER_DOWN)).status_code == 200
    last = await pay(client, path, DECLINED)
    assert last.status_code == 303
    assert "status=EXPIRED" in last.headers["location"]
    callbacks = await receiver.wait_for(4, path="/pages/three")
    payloads = [check_callback(c, merchant, body) for c in callbacks]
    assert [p["transaction_status"] for p in payloads] == ["FAILED", "FAILED", "FAILED", "EXPIRED"]
    assert payloads[1]["response_message"] == "Issuer not responding"
    assert payloads[3]["response_message"].startswith("Payment failed 3 times")
    closed = await client.get(path)
    assert 'data-status="EXPIRED"' in closed.text
    assert "pay-form" not in closed.text
    # a form kept open in another tab cannot pay any more
    refused = await client.post(f"{path}/pay", data={"attempt": "4", "csrf": "x", "cardNumber": APPROVED})
    assert refused.status_code == 403
    await settled_callbacks(app, merchant.id)
    assert len([r for r in receiver.requests if r.path == "/pages/three"]) == 4


def otp_form(otp_page: httpx.Response, code: str | None = None) -> tuple[dict[str, str], str]:
    """The OTP page's form with `code` (the right one, shown on the staging page, when None), and the right one."""
    shown = re.search(r'id="staging-otp">(\d{6})<', otp_page.text)
    assert shown is not None, otp_page.text
    right = shown.group(1)
    form = {"attempt": hidden(otp_page.text, "attempt"), "csrf": hidden(otp_page.text, "csrf"), "otp": code or right}
    return form, right


def wrong_code(right: str) -> str:
    return "000000" if right != "000000" else "111111"


async def test_a_wrong_otp_is_typed_again_without_using_up_an_attempt(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    """Issue 42 item 13: a wrong code shows the challenge again with the tries left (3 codes in all); the
    attempt is still waiting, no FAILED callback, and the right code then pays it."""
    merchant = await make_merchant(app)
    body, data = await open_order(client, merchant, callback_url=receiver.url("/pages/otp"))
    path = local(data["link"])
    challenged = await pay(client, path, CHALLENGE)
    assert (challenged.status_code, challenged.headers["location"]) == (303, f"{path}/3ds")
    assert (await client.get(path)).headers["location"] == f"{path}/3ds"

    otp_page = await client.get(f"{path}/3ds")
    assert "400000******3220" in otp_page.text
    assert 'id="otp-error"' not in otp_page.text
    form, right = otp_form(otp_page)
    for left in (2, 1):
        retry = await client.post(f"{path}/3ds", data={**form, "otp": wrong_code(right)})
        assert (retry.status_code, retry.headers["location"]) == (303, f"{path}/3ds"), left
        otp_page = await client.get(f"{path}/3ds")
        assert otp_page.status_code == 200
        tries = "try" if left == 1 else "tries"
        assert f"({left} {tries} left)" in " ".join(otp_page.text.split()), left
        assert otp_form(otp_page)[1] == right  # the same challenge, the same code
    # Still the first attempt, waiting at its challenge: nothing failed.
    assert (await client.get(path)).headers["location"] == f"{path}/3ds"
    paid = await client.post(f"{path}/3ds", data=otp_form(otp_page)[0])
    assert paid.status_code == 303
    assert "status=SUCCESS" in paid.headers["location"]
    [success] = await receiver.wait_for(1, path="/pages/otp")
    assert check_callback(success, merchant, body)["transaction_status"] == "SUCCESS"
    await settled_callbacks(app, merchant.id)
    assert len([r for r in receiver.requests if r.path == "/pages/otp"]) == 1  # no FAILED before it


async def test_three_wrong_codes_fail_the_attempt_and_the_next_one_pays(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    body, data = await open_order(client, merchant, callback_url=receiver.url("/pages/otp-fail"))
    path = local(data["link"])
    await pay(client, path, CHALLENGE)
    form, right = otp_form(await client.get(f"{path}/3ds"))
    form["otp"] = wrong_code(right)
    for _ in range(2):
        assert (await client.post(f"{path}/3ds", data=form)).headers["location"] == f"{path}/3ds"
    failed = await client.post(f"{path}/3ds", data=form)
    assert (failed.status_code, failed.headers["location"]) == (303, path)
    again = await client.get(path)
    assert "3-D Secure authentication failed" in again.text
    assert (await client.post(f"{path}/3ds", data=form)).status_code == 303  # the same form again: nothing happens

    await pay(client, path, CHALLENGE)
    otp_page = await client.get(f"{path}/3ds")
    assert 'id="otp-error"' not in otp_page.text  # the second attempt's challenge starts with all its tries
    paid = await client.post(f"{path}/3ds", data=otp_form(otp_page)[0])
    assert "status=SUCCESS" in paid.headers["location"]
    failed_cb, success_cb = await receiver.wait_for(2, path="/pages/otp-fail")
    assert check_callback(failed_cb, merchant, body)["response_message"] == "3-D Secure authentication failed"
    assert check_callback(success_cb, merchant, body)["transaction_status"] == "SUCCESS"


async def test_three_wrong_otps_close_the_link(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    """The 3-D Secure OTP's lockout (issue 24): each attempt's third wrong code fails it, the third failed
    attempt closes the payment (EXPIRED), and the right code is refused after it."""
    merchant = await make_merchant(app)
    body, data = await open_order(client, merchant, callback_url=receiver.url("/pages/otp3"))
    path = local(data["link"])
    right = ""
    for attempt in range(3):
        challenged = await pay(client, path, CHALLENGE)
        assert (challenged.status_code, challenged.headers["location"]) == (303, f"{path}/3ds"), attempt
        otp_page = await client.get(f"{path}/3ds")
        form, right = otp_form(otp_page)
        form["otp"] = wrong_code(right)
        for _ in range(3):
            failed = await client.post(f"{path}/3ds", data=form)
            assert failed.status_code == 303
    assert "status=EXPIRED" in failed.headers["location"]
    callbacks = await receiver.wait_for(4, path="/pages/otp3")
    payloads = [check_callback(c, merchant, body) for c in callbacks]
    assert [p["transaction_status"] for p in payloads] == ["FAILED", "FAILED", "FAILED", "EXPIRED"]
    assert payloads[0]["response_message"] == "3-D Secure authentication failed"
    # the last code shown, right this time, from the form still open: the payment stays closed
    late = {"attempt": "3", "csrf": hidden(otp_page.text, "csrf"), "otp": right}
    assert (await client.post(f"{path}/3ds", data=late)).status_code in (303, 403)
    closed = await client.get(path)
    assert 'data-status="EXPIRED"' in closed.text
    await settled_callbacks(app, merchant.id)
    assert len([r for r in receiver.requests if r.path == "/pages/otp3"]) == 4


async def test_close_mode_challenge_link_is_the_otp_page(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    body = charge_body(number=CHALLENGE, callback_url=receiver.url("/pages/close3ds"))
    data = (await post_charge(client, merchant, body)).json()["data"]
    otp_page = await client.get(local(data["link"]))
    otp = re.search(r'id="staging-otp">(\d{6})<', otp_page.text)
    assert otp is not None
    form = {"attempt": hidden(otp_page.text, "attempt"), "csrf": hidden(otp_page.text, "csrf"), "otp": otp.group(1)}
    assert (await client.post(local(data["link"]), data=form)).status_code == 303
    [callback] = await receiver.wait_for(1, path="/pages/close3ds")
    assert check_callback(callback, merchant, body)["transaction_status"] == "SUCCESS"


async def test_one_form_pays_once(app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver) -> None:
    """The same attempt sent twice (double click, back button, two at once) makes one attempt."""
    merchant = await make_merchant(app)
    body, data = await open_order(client, merchant, callback_url=receiver.url("/pages/once"))
    path = local(data["link"])
    page = await client.get(path)
    form = {
        "attempt": hidden(page.text, "attempt"),
        "csrf": hidden(page.text, "csrf"),
        "cardNumber": DECLINED,
        "cardExpiredMonth": "09",
        "cardExpiredYear": future_year(),
        "cardCvn": "123",
        "cardHolderName": "Siti",
        "tenor": "0",
    }
    answers = await asyncio.gather(*(client.post(f"{path}/pay", data=form) for _ in range(3)))
    assert sorted(a.status_code for a in answers) == [200, 409, 409]
    assert "already submitted" in [a for a in answers if a.status_code == 409][0].text
    await settled_callbacks(app, merchant.id)
    assert len([r for r in receiver.requests if r.path == "/pages/once"]) == 1


async def test_forged_or_stale_tokens_are_refused(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    _, data = await open_order(client, merchant)
    path = local(data["link"])
    page = await client.get(path)
    form = {"attempt": "1", "csrf": "0" * 64, "cardNumber": APPROVED, "cardExpiredMonth": "09"}
    assert (await client.post(f"{path}/pay", data=form)).status_code == 403
    form = {"attempt": "2", "csrf": hidden(page.text, "csrf"), "cardNumber": APPROVED}  # token of attempt 1
    assert (await client.post(f"{path}/pay", data=form)).status_code == 403
    assert 'data-status="PENDING"' not in (await client.get(path)).text


async def test_invalid_card_on_the_page_keeps_the_other_values(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    _, data = await open_order(client, merchant)
    path = local(data["link"])
    answer = await pay(client, path, "4811 1111 1111 1115", cvn="12")
    assert answer.status_code == 422
    html = answer.text
    assert "is not a valid card number (check digit)" in html
    assert "must be 3 or 4 digits" in html
    assert "4811 1111 1111 1115" not in html
    assert "4811111111111115" not in html
    assert 'value="SITI RAHAYU"' in html
    assert hidden(html, "attempt") == "1"  # nothing was attempted


async def test_pages_are_staging_only(app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    merchant = await make_merchant(app)
    _, data = await open_order(client, merchant)
    path = local(data["link"])
    monkeypatch.setattr(get_settings(), "env", "production")
    assert (await client.get(path)).status_code == 404
    assert (await client.get(f"{path}/3ds")).status_code == 404
    assert (await client.post(f"{path}/pay", data={})).status_code == 404
    assert (await client.get("/card/pages/CARDNOSUCH")).status_code == 404


async def test_pages_are_neither_cached_nor_framed(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    _, data = await open_order(client, merchant)
    page = await client.get(local(data["link"]))
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]


async def test_unknown_order_page(client: httpx.AsyncClient) -> None:
    assert (await client.get("/card/pages/CARDNOSUCH")).status_code == 404


async def test_expired_time_closes_the_order_without_any_request(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    """The embedded worker's expiry job: the clock passes expiredTime, EXPIRED arrives, the link is closed."""
    merchant = await make_merchant(app)
    body, data = await open_order(
        client, merchant, callback_url=receiver.url("/pages/expiry"), expired_time=jakarta_in(600)
    )
    challenged_body = charge_body(number=CHALLENGE, callback_url=receiver.url("/pages/expiry"))
    challenged = (await post_charge(client, merchant, challenged_body)).json()["data"]
    clock.advance(24 * 3600 + 1)  # past both: 10 minutes and the default 24 hours
    callbacks = await receiver.wait_for(2, path="/pages/expiry")  # nothing is called: the worker does it
    by_id = {c.json()["transaction_id"]: c for c in callbacks}
    payload = check_callback(by_id[data["transactionId"]], merchant, body)
    assert payload["transaction_status"] == "EXPIRED"
    assert payload["response_message"] == "Payment link expired"
    # Issue 26: an order never attempted names no acquirer (not a guess from the channel): "".
    assert payload["acq"] == ""
    assert payload["selected_channels"] == [{"channel": "CARD", "acq": ""}]
    challenged_payload = check_callback(by_id[challenged["transactionId"]], merchant, challenged_body)
    assert challenged_payload["transaction_status"] == "EXPIRED"
    assert challenged_payload["acq"] == "BCA"  # the attempt's acquirer (a VISA card on the CARD channel)
    assert await expire_due_card_orders(app.state.database) == 0
    page = await client.get(local(data["link"]))
    assert 'data-status="EXPIRED"' in page.text
    otp_path = local(challenged["link"])
    assert (await client.get(otp_path)).headers["location"] == otp_path.removesuffix("/3ds")
    assert 'data-status="EXPIRED"' in (await client.get(otp_path.removesuffix("/3ds"))).text


async def test_expiry_by_short_expired_time(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    body, data = await open_order(
        client, merchant, callback_url=receiver.url("/pages/short"), expired_time=jakarta_in(4)
    )
    clock.advance(5)  # past its own expiry (the default one is minutes away): the worker's scheduler sees it
    [callback] = await receiver.wait_for(1, path="/pages/short", timeout=expiry_hang_guard())
    payload = check_callback(callback, merchant, body)
    assert payload["transaction_status"] == "EXPIRED"
    assert payload["expired_time"] == body["paymentDetails"]["expiredTime"]
    assert (payload["acq"], payload["paid_date"], payload["card_token"]) == ("", "", "")  # issue 26

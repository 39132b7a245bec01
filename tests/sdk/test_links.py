"""The SDK's payment-link calls (create_payment_link, payment_link, confirm_payment_link) and a link's
payment-page callback (docs/decisions.md §10): the requests the SDK sends, checked against headers computed here
(a scripted server), and the §10.5 callback of each way a link is paid verified with the SDK, its signature
computed here from the formula."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from kasir_client import (
    AsyncClient,
    Client,
    ConfirmationError,
    ConflictError,
    Credentials,
    NotFoundError,
    PaymentLinkResult,
    SelectedChannel,
    SignatureError,
    ValidationError,
    sign_payment_page_callback,
    verify_payment_page_callback,
)
from kasir_client.bodies import PaymentLinkCreate

from kasir.merchants.service import merchant_service
from tests.links.test_flow import choose
from tests.sdk.helpers import kasir_client_command, sdk_credentials
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.forms import page_forms, post_form
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire import basic_auth, x_req_signature
from tests.support.wire.callbacks import callback_signature, sub_merchant_signature
from tests.support.wire.wallet import unique

CREDENTIALS = Credentials(
    merchant_id="M-LINK", client_id="C-LINK", client_secret="client-secret", secret="secret", hash_key="hash-key"
)
LINK_ID = "PPL0123456789ABCDEFGHIJ"


def link_body(**extra: Any) -> PaymentLinkCreate:
    body: dict[str, Any] = {
        "external_id": "ext-link-1",
        "order_id": "ORDER-LINK-1",
        "amount": 150_000,
        "description": "Kopi Susu x 3",
        "customer_details": {
            "full_name": "Siti Rahayu",
            "email": "siti@example.id",
            "phone": "081234567890",
            "address": "Jl. Merdeka 1",
        },
        "selected_channels": [{"channel": "card"}, {"channel": "DANA"}, {"channel": "VA", "acq": "bca"}],
        **extra,
    }
    return body  # type: ignore[return-value]


def link_data(status: str = "PENDING", **extra: Any) -> dict[str, Any]:
    """§10.2's `data`, as the create answer gives it (the inquiry adds §10.5's keys)."""
    return {
        "transaction_id": LINK_ID,
        "external_id": "ext-link-1",
        "order_id": "ORDER-LINK-1",
        "currency": "IDR",
        "amount": 150_000,
        "description": "Kopi Susu x 3",
        "transaction_status": status,
        "payment_url": f"http://kasir.test/payment-page/pages/{LINK_ID}",
        "transaction_time": "2026-11-28T17:00:00.000+07:00",
        "expired_time": "2026-11-29T17:00:00.000+07:00",
        "selected_channels": [
            {"channel": "CARD", "acq": "CARD"},
            {"channel": "DANA", "acq": "DANA"},
            {"channel": "VA", "acq": "BCA"},
        ],
        **extra,
    }


def ok(data: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.Response(
        200, json={"response_code": "00", "response_message": "Success", "data": data}, headers=headers
    )


def scripted(*answers: httpx.Response) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(answers)

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0)

    return httpx.MockTransport(handle), seen


def test_create_payment_link_signs_as_the_wallet_and_keeps_its_key_across_retries() -> None:
    outage = httpx.Response(
        500, json={"response_code": "98", "response_message": "Try again"}, headers={"Retry-After": "0"}
    )
    transport, seen = scripted(outage, ok(link_data(), **{"X-Request-ID": "req-1"}))
    with Client("http://kasir.test", CREDENTIALS, transport=transport, backoff=0) as client:
        link = client.create_payment_link(link_body(), sub_merchant_id="SUB-1")

    assert len(seen) == 2
    for request in seen:
        assert (request.method, request.url.path) == ("POST", "/payment-page/payment")
        assert request.headers["Authorization"] == basic_auth("M-LINK", "secret", "hash-key")
        assert request.headers["x-req-signature"] == x_req_signature("hash-key", "ext-link-1", "ORDER-LINK-1")
        assert request.headers["x-version"] == "v3"
        assert request.headers["Content-Type"] == "application/json"
        assert request.headers["sub-merchant-id"] == "SUB-1"
        assert json.loads(request.content)["selected_channels"][2] == {"channel": "VA", "acq": "bca"}
    keys = {request.headers["X-Idempotency-Key"] for request in seen}
    assert len(keys) == 1  # one key for every try of one call

    assert isinstance(link, PaymentLinkResult)
    assert (link.response_code, link.transaction_status, link.amount) == ("00", "PENDING", 150_000)
    assert link.payment_url == f"http://kasir.test/payment-page/pages/{LINK_ID}"
    assert (link.transaction_id, link.external_id, link.order_id) == (LINK_ID, "ext-link-1", "ORDER-LINK-1")
    assert link.expired_time == "2026-11-29T17:00:00.000+07:00"
    assert link.selected_channels == [
        SelectedChannel("CARD", "CARD"),
        SelectedChannel("DANA", "DANA"),
        SelectedChannel("VA", "BCA"),
    ]
    assert (link.payment_method, link.acq, link.paid_date) == ("", "", "")
    assert link.request_id == "req-1"
    assert not link.is_paid


def test_payment_link_is_a_get_with_basic_authentication_only() -> None:
    paid = link_data("SUCCESS", payment_method="VIRTUAL_ACCOUNT", payment_channel="VA", acq="BCA",
                     paid_date="2026-11-28T10:05:00.000Z", card_token="", additional_data="")  # fmt: skip
    transport, seen = scripted(ok(paid))
    with Client("http://kasir.test", CREDENTIALS, transport=transport) as client:
        link = client.payment_link(LINK_ID)

    [request] = seen
    assert (request.method, request.url.path) == ("GET", f"/payment-page/payment/{LINK_ID}")
    assert request.headers["Authorization"] == basic_auth("M-LINK", "secret", "hash-key")
    # §10.2: no x-req-signature, no x-version, no body; a read takes no idempotency key.
    for absent in ("x-req-signature", "x-version", "X-Idempotency-Key", "sub-merchant-id"):
        assert absent not in request.headers
    assert request.content == b""
    assert link.is_paid
    assert (link.payment_method, link.payment_channel, link.acq) == ("VIRTUAL_ACCOUNT", "VA", "BCA")
    assert link.paid_date == "2026-11-28T10:05:00.000Z"
    assert link.get("card_token") == ""


async def test_the_async_client_makes_the_same_calls_and_raises_refusals() -> None:
    refused = httpx.Response(400, json={"response_code": "01", "response_message": "selected_channels[0].channel"})
    unknown = httpx.Response(404, json={"response_code": "02", "response_message": "Transaction not found"})
    transport, seen = scripted(ok(link_data()), ok(link_data()), refused, unknown)
    async with AsyncClient("http://kasir.test", CREDENTIALS, transport=transport) as client:
        created = await client.create_payment_link(link_body(), idempotency_key="order-1")
        assert created.transaction_id == LINK_ID
        assert (await client.payment_link(LINK_ID)).transaction_status == "PENDING"
        with pytest.raises(ValidationError) as refusal:
            await client.create_payment_link(link_body(selected_channels=[{"channel": "OCTOCLICKS"}]))
        assert refusal.value.code == "01"
        with pytest.raises(NotFoundError):
            await client.payment_link("PPL-SOMEONE-ELSES")
    assert seen[0].headers["X-Idempotency-Key"] == "order-1"
    assert "sub-merchant-id" not in seen[0].headers
    assert seen[1].method == "GET"
    assert seen[3].url.raw_path == b"/payment-page/payment/PPL-SOMEONE-ELSES"


# --- the payment-page callback of a link: §10.5's fields, verified ---------------------------------------------


def link_callback(status: str, method: str, channel: str, acq: str, **extra: Any) -> dict[str, Any]:
    """§10.5's payload of a link as Kasir sends it: every key, `""` for strings never given."""
    address = {"full_name": "", "phone": "", "address": "", "city": "", "postal_code": "", "country": ""}
    return {
        "transaction_id": LINK_ID,
        "order_id": "ORDER-LINK-1",
        "external_id": "ext-link-1",
        "currency": "IDR",
        "transaction_status": status,
        "response_message": {"SUCCESS": "Success", "EXPIRED": "Payment expired"}.get(status, "Card declined"),
        "payment_method": method,
        "payment_channel": channel,
        "acq": acq,
        "paid_date": "2026-11-28T10:05:00.000Z" if status == "SUCCESS" else "",
        "amount": 150_000,
        "selected_channels": link_data()["selected_channels"],
        "is_customer_paying_fee": False,
        "item_details": [],
        "save_card": False,
        "card_token": "",
        "customer_details": {
            "full_name": "Siti Rahayu",
            "email": "siti@example.id",
            "phone": "081234567890",
            "address": "Jl. Merdeka 1",
            "is_email_show": True,
            "is_phone_show": True,
        },  # fmt: skip
        "shipping_address": address,
        "billing_address": address,
        "callback_url": "https://shop.example/callbacks",
        "success_redirect_url": "",
        "failed_redirect_url": "",
        "expired_time": "2026-11-29T17:00:00+07:00",
        "token": "",
        "fee": 0,
        "mis_version": 3,
        **extra,
    }


def signed(payload: dict[str, Any], sub_merchant_id: str | None = None) -> tuple[bytes, dict[str, str]]:
    """Signed here from §3.5 (with a sub-merchant, the provider's formula), not with the SDK's helper."""
    x_req = x_req_signature("hash-key", payload["external_id"], payload["order_id"])
    if sub_merchant_id is None:
        signature = callback_signature(payload["transaction_id"], x_req)
    else:
        signature = sub_merchant_signature(payload["transaction_id"], x_req, sub_merchant_id)
    headers = {"Content-Type": "application/json", "svc-signature": signature, "X-Kasir-Callback-Id": "71",
               "X-Kasir-Attempt": "1"}  # fmt: skip
    return json.dumps(payload).encode(), headers


@pytest.mark.parametrize(
    ("method", "channel", "acq"),
    [("CARD", "CARD", "BCA"), ("WALLET", "DANA", "DANA"), ("WALLET", "QRIS", "QRIS"), ("VIRTUAL_ACCOUNT", "VA", "BCA")],
)
def test_a_link_paid_by_each_method_verifies_and_says_how(method: str, channel: str, acq: str) -> None:
    body, headers = signed(link_callback("SUCCESS", method, channel, acq))
    event = verify_payment_page_callback(body, headers, hash_key="hash-key", order=("ext-link-1", "ORDER-LINK-1"))
    assert (event.transaction_id, event.transaction_status, event.amount) == (LINK_ID, "SUCCESS", Decimal(150_000))
    assert (event.payment_method, event.payment_channel, event.acq) == (method, channel, acq)
    assert event.paid_date == "2026-11-28T10:05:00.000Z"
    assert event.selected_channels[2] == SelectedChannel("VA", "BCA")
    assert (event.raw["token"], event.raw["fee"], event.raw["mis_version"]) == ("", 0, 3)
    assert isinstance(event.raw["mis_version"], int)  # a JSON number, as the provider's sample
    assert (event.sub_merchant_id, event.callback_id, event.attempt) == (None, "71", 1)


def test_a_sub_merchants_link_callback_verifies_with_the_id_it_names_and_no_other() -> None:
    payload = link_callback("FAILED", "CARD", "CARD", "CIMB", sub_merchant_id="SUB-7")
    body, headers = signed(payload, "SUB-7")
    # Without being told, the SDK signs with the sub-merchant the callback names (as verify_va_callback does).
    event = verify_payment_page_callback(body, headers, hash_key="hash-key")
    assert (event.sub_merchant_id, event.transaction_status, event.acq) == ("SUB-7", "FAILED", "CIMB")
    assert event.paid_date == ""
    assert verify_payment_page_callback(body, headers, hash_key="hash-key", sub_merchant_id="SUB-7").sub_merchant_id
    with pytest.raises(SignatureError, match="another sub-merchant"):
        verify_payment_page_callback(body, headers, hash_key="hash-key", sub_merchant_id="SUB-8")
    # The signature covers the id: a callback claiming another one does not verify.
    changed = json.dumps({**payload, "sub_merchant_id": "SUB-8"}).encode()
    with pytest.raises(SignatureError, match="does not match"):
        verify_payment_page_callback(changed, headers, hash_key="hash-key")
    # Nor does one that drops it.
    dropped = json.dumps({k: v for k, v in payload.items() if k != "sub_merchant_id"}).encode()
    with pytest.raises(SignatureError, match="does not match"):
        verify_payment_page_callback(dropped, headers, hash_key="hash-key")


def test_an_expired_link_never_attempted_says_nothing_of_a_method() -> None:
    body, headers = signed(link_callback("EXPIRED", "", "", ""))
    event = verify_payment_page_callback(body, headers, hash_key="hash-key")
    assert (event.transaction_status, event.payment_method, event.payment_channel, event.acq) == ("EXPIRED", "", "", "")
    assert event.response_message == "Payment expired"


def test_the_signed_fake_of_a_sub_merchants_link_callback_verifies() -> None:
    payload = link_callback("SUCCESS", "WALLET", "DANA", "DANA", sub_merchant_id="SUB-7")
    body, headers = sign_payment_page_callback(payload, hash_key="hash-key")
    assert headers["svc-signature"] == signed(payload, "SUB-7")[1]["svc-signature"]
    assert verify_payment_page_callback(body, headers, hash_key="hash-key").payment_channel == "DANA"


def test_confirm_payment_link_asks_kasir_and_refuses_what_it_does_not_say() -> None:
    body, headers = signed(link_callback("SUCCESS", "WALLET", "DANA", "DANA"))
    event = verify_payment_page_callback(body, headers, hash_key="hash-key")
    paid = link_data("SUCCESS", payment_method="WALLET", payment_channel="DANA", acq="DANA")
    transport, seen = scripted(ok(paid), ok(link_data("PENDING")), ok(paid), ok({**paid, "order_id": "OTHER"}))
    with Client("http://kasir.test", CREDENTIALS, transport=transport) as client:
        assert client.confirm_payment_link(event, amount=150_000).is_paid
        with pytest.raises(ConfirmationError, match="is PENDING"):
            client.confirm_payment_link(event)
        with pytest.raises(ConfirmationError, match="not 99000"):
            client.confirm_payment_link(event, amount=99_000)
        with pytest.raises(ConfirmationError, match="another order"):
            client.confirm_payment_link(event)
    assert {request.url.path for request in seen} == {f"/payment-page/payment/{LINK_ID}"}

    failed_body, failed_headers = signed(link_callback("FAILED", "CARD", "CARD", "BCA"))
    failed = verify_payment_page_callback(failed_body, failed_headers, hash_key="hash-key")
    transport, _ = scripted(ok(link_data("PENDING")), ok(link_data("EXPIRED")), ok(paid))
    with Client("http://kasir.test", CREDENTIALS, transport=transport) as client:
        assert client.confirm_payment_link(failed).transaction_status == "PENDING"  # attempts left
        assert client.confirm_payment_link(failed).transaction_status == "EXPIRED"  # the third
        with pytest.raises(ConfirmationError, match="is SUCCESS"):
            client.confirm_payment_link(failed)


# --- against Kasir ---------------------------------------------------------------------------------------------


def in_process(app: FastAPI, merchant: builders.TestMerchant) -> AsyncClient:
    return AsyncClient("http://kasir.test", sdk_credentials(merchant), transport=httpx.ASGITransport(app=app))


def served_body(**extra: Any) -> PaymentLinkCreate:
    given: dict[str, Any] = {"external_id": unique("sdk-link"), "order_id": unique("sdk-link")[:25]}
    return link_body(**{**given, "callback_url": "http://127.0.0.1:9/links", **extra})


async def test_the_async_client_creates_and_reads_a_link_in_kasir(app: FastAPI) -> None:
    merchant = await make_merchant(app)
    async with in_process(app, merchant) as kasir:
        body = served_body(item_details=[{"item_id": "KOPI-1", "name": "Kopi", "amount": 50_000, "qty": 3}])
        link = await kasir.create_payment_link(body, idempotency_key="sdk-link-once")
        assert (link.response_code, link.transaction_status, link.amount) == ("00", "PENDING", 150_000)
        assert link.transaction_id.startswith("PPL")
        assert link.payment_url.endswith(f"/payment-page/pages/{link.transaction_id}")
        assert link.selected_channels == [
            SelectedChannel("CARD", "CARD"),
            SelectedChannel("DANA", "DANA"),
            SelectedChannel("VA", "BCA"),
        ]
        assert not link.replayed
        again = await kasir.create_payment_link(body, idempotency_key="sdk-link-once")
        assert (again.replayed, again.transaction_id) == (True, link.transaction_id)

        now = await kasir.payment_link(link.transaction_id)
        assert (now.transaction_status, now.payment_method, now.acq, now.paid_date) == ("PENDING", "", "", "")
        assert now.get("mis_version") == 3
        assert now.get("item_details")[0]["item_id"] == "KOPI-1"
        assert (now.external_id, now.order_id) == (link.external_id, link.order_id)
        # §10.2 answers the creation's time in milliseconds; the read, as the callback, in seconds (§10.5).
        assert now.expired_time == link.expired_time[:19] + "+07:00"

        with pytest.raises(ValidationError) as refused:
            await kasir.create_payment_link(served_body(selected_channels=[{"channel": "OCTOCLICKS"}]))
        assert "selected_channels[0].channel" in refused.value.message
        with pytest.raises(ConflictError):  # the external_id is taken
            await kasir.create_payment_link({**body, "amount": 160_000, "item_details": []})
    other = await make_merchant(app)
    async with in_process(app, other) as someone_else:
        with pytest.raises(NotFoundError):
            await someone_else.payment_link(link.transaction_id)


@pytest.mark.slow
async def test_the_sync_client_against_kasir_serve(app: FastAPI, served: ServedKasir) -> None:
    merchant = await make_merchant(app)

    def work() -> tuple[PaymentLinkResult, PaymentLinkResult]:
        with Client(served.base_url, sdk_credentials(merchant)) as kasir:
            link = kasir.create_payment_link(served_body())
            return link, kasir.payment_link(link.transaction_id)

    link, now = await asyncio.to_thread(work)
    assert link.payment_url.startswith(served.base_url + "/payment-page/pages/PPL")
    assert (now.transaction_id, now.transaction_status) == (link.transaction_id, "PENDING")


async def test_a_real_sub_merchant_links_callback_verifies_with_the_sdk_and_its_command_and_is_confirmed(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver, tmp_path: Path, capsys: Any
) -> None:
    merchant = await make_merchant(app)
    async with app.state.database.unit_of_work() as session:
        await merchant_service.add_sub_merchant(session, merchant.id, "TOKO-9", "Toko Cabang")
    async with in_process(app, merchant) as kasir:
        body = served_body(callback_url=receiver.url("/sdk-link"), selected_channels=[{"channel": "dana"}])
        link = await kasir.create_payment_link(body, sub_merchant_id="TOKO-9")
        checkout = await choose(client, {"payment_url": link.payment_url}, "DANA", wallet_id="081298765432")
        assert (await post_form(client, (await page_forms(client, checkout))["pay-form"])).status_code == 303
        [callback] = await receiver.wait_for(1, path="/sdk-link")
        # The signature from the provider's sub-merchant formula, computed here; then the SDK's word.
        x_req = x_req_signature(merchant.credentials.hash_key, link.external_id, link.order_id)
        assert callback.headers["svc-signature"] == sub_merchant_signature(link.transaction_id, x_req, "TOKO-9")
        event = verify_payment_page_callback(
            callback.body,
            callback.headers,
            hash_key=merchant.credentials.hash_key,
            order=(link.external_id, link.order_id),
        )
        assert (event.transaction_status, event.sub_merchant_id) == ("SUCCESS", "TOKO-9")
        assert (event.payment_method, event.payment_channel, event.acq) == ("WALLET", "DANA", "DANA")
        assert event.selected_channels == [SelectedChannel("DANA", "DANA")]
        assert (event.raw["token"], event.raw["fee"], event.raw["mis_version"]) == ("", 0, 3)
        assert event.paid_date.endswith("Z")
        confirmed = await kasir.confirm_payment_link(event, amount=150_000)
        assert (confirmed.transaction_status, confirmed.payment_method, confirmed.paid_date) == (
            "SUCCESS",
            "WALLET",
            event.paid_date,
        )
        with pytest.raises(ConfirmationError):
            await kasir.confirm_payment_link(event, amount=149_000)
    # `kasir-client verify-callback payment-page`, the raw request as it arrived.
    (tmp_path / "credentials.json").write_text(
        json.dumps(dataclasses.asdict(sdk_credentials(merchant)) | {"private_key_pem": None})
    )
    head = f"POST {callback.path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in callback.headers.items())
    (tmp_path / "callback.http").write_bytes(head.encode() + b"\r\n" + callback.body)
    args = ["verify-callback", "payment-page", "--credentials", str(tmp_path / "credentials.json")]
    order = ["--external-id", link.external_id, "--order-id", link.order_id]
    assert kasir_client_command()([*args, "--file", str(tmp_path / "callback.http"), *order]) == 0
    assert capsys.readouterr().out.startswith("OK PaymentPageCallback")

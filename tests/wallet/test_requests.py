"""Headers and fields of the wallet API: each failure in the wallet format, naming the field and the rule."""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from kasir.config import get_settings
from kasir.db import fetch_value
from kasir.kit.clock import clock
from kasir.wallet.models import WalletTransaction
from tests.support.builders import make_merchant
from tests.support.wire import basic_auth, compact
from tests.support.wire.wallet import (
    CREATE,
    CREATE_QR,
    DUMMY,
    INQUIRY,
    REFUND,
    VOID,
    assert_problem,
    create,
    create_body,
    dummy_payment,
    post_wallet,
    ref,
    refund,
    wallet_headers,
)


async def stored(app: FastAPI, merchant_id: str) -> int:
    async with app.state.database.unit_of_work(read_only=True) as session:
        count = await fetch_value(
            session,
            select(func.count()).select_from(WalletTransaction).where(WalletTransaction.merchant_id == merchant_id),
        )
    return int(count or 0)


async def test_both_basic_forms_are_accepted(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = create_body()
    two = await post_wallet(client, merchant, CREATE, body)
    assert two.status_code == 200, two.text
    three = await post_wallet(client, merchant, CREATE, create_body(), three_part=True)
    assert three.status_code == 200, three.text
    assert three.json()["response_message"] == "Success"


@pytest.mark.parametrize("path", [CREATE, CREATE_QR, INQUIRY, REFUND, VOID, DUMMY])
async def test_headers_are_checked_on_every_route(app: FastAPI, client: httpx.AsyncClient, path: str) -> None:
    merchant = await make_merchant(app)
    other = await make_merchant(app)
    body = create_body()
    text = compact(body).encode()
    good = wallet_headers(merchant, body)

    async def send(headers: dict[str, str]) -> httpx.Response:
        return await client.post(path, content=text, headers=headers)

    missing_version = {k: v for k, v in good.items() if k != "x-version"}
    assert_problem(await send(missing_version), 400, "01", "x-version", "required")
    assert_problem(await send({**good, "x-version": "v2"}), 400, "01", "x-version", "v3")
    assert_problem(await send({**good, "Content-Type": "text/plain"}), 400, "01", "Content-Type")
    assert_problem(await send({k: v for k, v in good.items() if k != "Authorization"}), 401, "04")
    assert_problem(await send({**good, "Authorization": "Bearer abc"}), 401, "04")
    assert_problem(await send({**good, "Authorization": basic_auth(merchant.id, "wrong")}), 401, "04")
    assert_problem(await send({**good, "Authorization": basic_auth("MCHNOSUCH", "x")}), 401, "04")
    creds = merchant.credentials
    wrong_hash = basic_auth(merchant.id, creds.secret, "not-the-hash-key")
    assert_problem(await send({**good, "Authorization": wrong_hash}), 401, "04")
    # another merchant's credentials with this merchant's signature
    other_auth = basic_auth(other.id, other.credentials.secret)
    assert_problem(await send({**good, "Authorization": other_auth}), 401, "04", "x-req-signature")
    # issue 26: a missing x-req-signature answers as a wrong one (04, README), no longer 01.
    assert_problem(await send({k: v for k, v in good.items() if k != "x-req-signature"}), 401, "04", "x-req-signature")
    assert_problem(await send({**good, "x-req-signature": " "}), 401, "04", "x-req-signature")
    assert_problem(await send({**good, "x-req-signature": "0" * 64}), 401, "04", "x-req-signature")
    upper = good["x-req-signature"].upper()
    assert_problem(await send({**good, "x-req-signature": upper}), 401, "04")
    assert await stored(app, merchant.id) == 0


async def test_secrets_are_never_echoed(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = create_body()
    auth = basic_auth(merchant.id, "guess-" + merchant.credentials.secret[:4])
    response = await client.post(
        CREATE, content=compact(body), headers={**wallet_headers(merchant, body), "Authorization": auth}
    )
    assert_problem(response, 401, "04")
    assert merchant.credentials.secret[:4] not in response.text
    assert base64.b64encode(merchant.id.encode()).decode() not in response.text


async def test_signature_covers_the_body_fields(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = create_body()
    headers = wallet_headers(merchant, body)
    tampered = {**body, "order_id": body["order_id"] + "-2"}
    response = await client.post(CREATE, content=compact(tampered), headers=headers)
    assert_problem(response, 401, "04", "x-req-signature")
    assert_problem(await client.post(CREATE, content=b"[1, 2]", headers=headers), 400, "01", "JSON object")
    assert_problem(await client.post(CREATE, content=b"{nope", headers=headers), 400, "01", "JSON")
    no_external = {k: v for k, v in body.items() if k != "external_id"}
    response = await client.post(CREATE, content=compact(no_external), headers=headers)
    assert_problem(response, 400, "01", "external_id is required")


def _set(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    target: Any = body
    parts = path.split(".")
    for part in parts[:-1]:
        target = target[int(part)] if part.isdigit() else target[part]
    last = parts[-1]
    if value is _DROP:
        del target[last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return body


_DROP = object()

FIELD_CASES: list[tuple[str, Any, str]] = [
    ("order_id", "ORDER_1", "order_id may contain only letters, digits and -"),
    ("order_id", "ORDER 1", "order_id may contain only letters, digits and -"),
    ("order_id", "A" * 101, "order_id must be at most 100 characters"),
    ("external_id", "E" * 65, "external_id must be at most 64 characters"),
    ("external_id", 12345, "external_id must be a string"),
    ("currency", "USD", "currency must be IDR"),
    ("payment_method", "card", "payment_method must be wallet"),
    ("payment_method", "WALLET", "payment_method must be wallet"),
    ("payment_channel", "GOPAY", "payment_channel must be one of OVO, DANA, SHOPEEPAY, LINKAJA, VIRGO, QRIS"),
    ("payment_channel", "QRIS", "payment_channel QRIS is only available through /ewallet/v2/create-qr"),
    ("payment_details.amount", 100000.0, "payment_details.amount must be a whole number of rupiah"),
    ("payment_details.amount", "100000", "payment_details.amount must be a whole number of rupiah"),
    ("payment_details.amount", 0, "payment_details.amount must be a positive whole number"),
    ("payment_details.amount", -5, "payment_details.amount must be a positive whole number"),
    ("payment_details.amount", 99_000, "payment_details.amount must equal the sum of item_details amount × qty"),
    ("payment_details.transaction_description", "", "payment_details.transaction_description is required"),
    ("payment_details.transaction_description", _DROP, "payment_details.transaction_description is required"),
    ("payment_details.expired_time", "tomorrow", "payment_details.expired_time must be ISO 8601"),
    ("payment_details.expired_time", "2026-11-23T10:00:00", "payment_details.expired_time must be ISO 8601"),
    ("item_details.0.amount", 49_999.5, "item_details[0].amount must be a whole number of rupiah"),
    ("item_details.0.qty", 0, "item_details[0].qty must be between 1 and 999"),
    ("item_details.0.qty", "2", "item_details[0].qty must be an integer"),
    ("item_details.0.name", "N" * 129, "item_details[0].name must be at most 128 characters"),
    ("item_details.0.item_id", _DROP, "item_details[0].item_id is required"),
    ("item_details", [], "item_details must list 1 to 100 items"),
    ("customer_details.email", "siti-at-example", "customer_details.email must be an email address"),
    ("customer_details.phone", "call me", "customer_details.phone must be a phone number"),
    ("customer_details", _DROP, "customer_details is required"),
    ("wallet_details.id_type", "KTP", "wallet_details.id_type must be HP or EMAIL"),
    ("wallet_details", _DROP, "wallet_details is required"),
    ("billing_address", {"full_name": "A"}, "billing_address.phone is required"),
    ("shipping_address", {**{"full_name": "A", "phone": "0812345678", "address": "x", "city": "y"},
                          "postal_code": "1", "country": "Indonesia"}, "shipping_address.country must be at most 3"),
    ("callback_url", "ftp://example.id/cb", "callback_url must be an absolute http(s) URL"),
    ("return_url", "not a url", "return_url must be an absolute http(s) URL"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "value", "message"), FIELD_CASES)
async def test_a_bad_field_is_named_and_nothing_is_stored(
    app: FastAPI, client: httpx.AsyncClient, path: str, value: Any, message: str
) -> None:
    merchant = await make_merchant(app)
    body = _set(create_body(), path, value)
    response = await post_wallet(client, merchant, CREATE, body)
    assert_problem(response, 400, "01", message)
    assert await stored(app, merchant.id) == 0


async def test_expiry_window(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    for delta in (timedelta(seconds=30), timedelta(hours=24, minutes=1), timedelta(minutes=-5)):
        body = create_body(expired_time=clock.now() + delta)
        response = await post_wallet(client, merchant, CREATE, body)
        assert_problem(response, 400, "01", "payment_details.expired_time must be between 1 minute and 24 hours")
    assert await stored(app, merchant.id) == 0
    tx = await create(client, merchant, expired_time=clock.now() + timedelta(hours=23))
    assert tx["transaction_status"] == "PENDING"


async def test_create_qr_is_for_qris_only(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    response = await post_wallet(client, merchant, CREATE_QR, create_body(channel="DANA"))
    assert_problem(response, 400, "01", "payment_channel must be QRIS")
    body = create_body(channel="QRIS")
    del body["wallet_details"]  # whoever scans pays: optional on create-qr
    response = await post_wallet(client, merchant, CREATE_QR, body)
    assert response.status_code == 200, response.text
    assert response.json()["qr_url"].endswith(".png")


async def test_external_id_is_unique_per_merchant(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    other = await make_merchant(app)
    body = create_body()
    assert (await post_wallet(client, merchant, CREATE, body)).status_code == 200
    again = {**body, "order_id": body["order_id"]}  # order_id may repeat; external_id may not
    assert_problem(await post_wallet(client, merchant, CREATE, again), 409, "03", "external_id")
    assert (await post_wallet(client, other, CREATE, body)).status_code == 200
    same_order = create_body(order_id=body["order_id"])
    assert (await post_wallet(client, merchant, CREATE, same_order)).status_code == 200
    assert await stored(app, merchant.id) == 2


async def test_concurrent_creates_with_one_external_id(app: FastAPI, client: httpx.AsyncClient) -> None:
    import asyncio

    merchant = await make_merchant(app)
    body = create_body()
    responses = await asyncio.gather(*(post_wallet(client, merchant, CREATE, body) for _ in range(3)))
    assert sorted(r.status_code for r in responses) == [200, 409, 409]
    assert await stored(app, merchant.id) == 1


async def test_callback_url_falls_back_to_the_merchant_default(app: FastAPI, client: httpx.AsyncClient) -> None:
    without = await make_merchant(app)
    response = await post_wallet(client, without, CREATE, create_body(callback_url=None))
    assert_problem(response, 400, "01", "callback_url is required")
    assert await stored(app, without.id) == 0
    with_default = await make_merchant(app, callback_url="http://127.0.0.1:9/default")
    assert (await post_wallet(client, with_default, CREATE, create_body(callback_url=None))).status_code == 200


async def test_unknown_and_foreign_transactions_are_not_found(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    other = await make_merchant(app)
    tx = await create(client, merchant)
    for body in (
        {**ref(tx), "transaction_id": "WLTNOSUCH"},
        {**ref(tx), "external_id": "OTHER"},
        {**ref(tx), "order_id": "OTHER-ORDER"},
    ):
        assert_problem(await post_wallet(client, merchant, INQUIRY, body), 404, "02")
    assert_problem(await post_wallet(client, other, INQUIRY, ref(tx)), 404, "02")
    assert_problem(await dummy_payment(client, other, tx), 404, "02")
    assert_problem(
        await post_wallet(client, merchant, INQUIRY, {k: v for k, v in ref(tx).items() if k != "transaction_id"}),
        400,
        "01",
        "transaction_id is required",
    )


async def test_dummy_payment_fields(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, channel="DANA")
    assert_problem(
        await dummy_payment(client, merchant, tx, payment_channel="OVO"),
        400,
        "01",
        "payment_channel must be the payment channel of the transaction",
    )
    assert_problem(
        await dummy_payment(client, merchant, tx, payment_method="card"), 400, "01", "payment_method must be wallet"
    )
    assert_problem(
        await dummy_payment(client, merchant, tx, simulate_status="LATER"),
        400,
        "01",
        "simulate_status must be one of PAID, FAILED, EXPIRED",
    )


@pytest.mark.parametrize("amount", [0, -1, 1.5, "1000", None, True])
async def test_refund_amount_must_be_positive_whole_rupiah(
    app: FastAPI, client: httpx.AsyncClient, amount: Any
) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant)
    assert (await dummy_payment(client, merchant, tx)).status_code == 200
    response = await refund(client, merchant, tx, amount)
    assert_problem(response, 400, "01", "refund_amount")


async def test_production_hides_the_dummy_payment_and_pages(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, channel="QRIS")
    monkeypatch.setattr(get_settings(), "env", "production")
    assert_problem(await dummy_payment(client, merchant, tx), 404, "02")
    page = tx["payment_url"].removeprefix("http://kasir.test")
    assert (await client.get(page)).status_code == 404
    assert (await client.post(f"{page}/pay")).status_code == 404
    assert (await client.get(tx["qr_url"].removeprefix("http://kasir.test"))).status_code == 200
    # production refuses a loopback callback URL
    response = await post_wallet(client, merchant, CREATE, create_body("https://127.0.0.1/cb"))
    assert_problem(response, 400, "01", "callback_url")


async def test_openapi_documents_the_wallet_routes(app: FastAPI, client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    for path in ("create-payment", "create-qr", "inquiry", "refund", "void", "dummy-payment"):
        operation = schema["paths"][f"/ewallet/v2/{path}"]["post"]
        assert {p["name"] for p in operation["parameters"]} >= {"x-req-signature", "x-version"}
        assert operation["security"] == [{"merchantBasic": []}]  # Authorization: Basic, as a security scheme
        assert "requestBody" in operation
    assert "WalletItem" in schema["components"]["schemas"]

"""`POST /payment-page/payment` and `GET /payment-page/payment/{transaction_id}` (docs/decisions.md §10.1, §10.2):
answers, refusals naming their field, the external_id namespace shared with wallet, card and VA."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI

from kasir.config import get_settings
from kasir.kit.clock import parse_aware
from tests.support.builders import make_merchant
from tests.support.wire.card import charge_body, post_charge
from tests.support.wire.links import create, create_body, post, read
from tests.support.wire.va import CREATE as CREATE_VA
from tests.support.wire.va import create as create_va
from tests.support.wire.va import create_body as va_body
from tests.support.wire.va import post as post_va
from tests.support.wire.wallet import CREATE as CREATE_WALLET
from tests.support.wire.wallet import assert_problem, post_wallet
from tests.support.wire.wallet import create_body as wallet_body

CHANNELS = [
    {"channel": "card", "acq": "bcacc"},
    {"channel": "DANA"},
    {"channel": "VA", "acq": "bca-mcp", "payment_system": "CLOSED", "is_multi_use": False},
    {"channel": "QRIS", "acq": "QRIS"},
]


async def test_a_link_is_created_and_read_back(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    link = await create(client, merchant, channels=CHANNELS, amount=50_000.0)
    assert link["transaction_id"].startswith("PPL")
    assert len(link["transaction_id"]) == 23
    assert link["transaction_status"] == "PENDING"
    assert link["amount"] == 50_000
    assert link["currency"] == "IDR"
    assert link["payment_url"].endswith(f"/payment-page/pages/{link['transaction_id']}")
    assert parse_aware(link["expired_time"]) - parse_aware(link["transaction_time"]) == timedelta(hours=24)
    assert link["expired_time"].endswith("+07:00")
    assert link["selected_channels"] == [
        {"channel": "CARD", "acq": "BCACC"},
        {"channel": "DANA", "acq": "DANA"},
        {"channel": "VA", "acq": "BCA-MCP"},
        {"channel": "QRIS", "acq": "QRIS"},
    ]

    answer = await read(client, merchant, link["transaction_id"])
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert data["transaction_status"] == "PENDING"
    assert data["payment_url"] == link["payment_url"]
    assert data["payment_method"] == data["payment_channel"] == data["acq"] == data["paid_date"] == ""
    assert data["selected_channels"] == link["selected_channels"]
    assert data["mis_version"] == 3
    assert data["fee"] == 0
    assert data["token"] == data["card_token"] == ""
    assert data["customer_details"]["is_email_show"] is True
    assert data["item_details"] == []
    assert "sub_merchant_id" not in data

    other = await make_merchant(app)
    assert_problem(await read(client, other, link["transaction_id"]), 404, "02")
    assert_problem(await read(client, merchant, "PPLNOSUCHLINK"), 404, "02")


@pytest.mark.parametrize(
    ("channels", "field"),
    [
        ([{"channel": "CARD"}, {"channel": "OCTOCLICKS"}], "selected_channels[1].channel"),
        ([{"channel": "DANA"}, {"channel": "VA"}], "selected_channels[1].acq"),
        ([{"channel": "DANA"}, {"channel": "OVO"}, {"channel": "VA", "acq": "FINPAY"}], "selected_channels[2].acq"),
        ([{"channel": "CARD", "acq": "MANDIRICC"}], "selected_channels[0].acq"),
        ([{"channel": "DANA", "acq": "OVO"}], "selected_channels[0].acq"),
        ([{"channel": 5}], "selected_channels[0].channel"),
        ([], "selected_channels"),
    ],
)
async def test_a_channel_outside_the_table_is_refused_naming_its_entry(
    app: FastAPI, client: httpx.AsyncClient, channels: list[dict[str, object]], field: str
) -> None:
    merchant = await make_merchant(app)
    assert_problem(await post(client, merchant, create_body(channels=channels)), 400, "01", field)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"amount": 9_999}, "amount"),
        ({"amount": 10_000.5}, "amount"),
        ({"amount": 30_000, "item_details": [{"item_id": "A", "name": "x", "amount": 10_000, "qty": 2}]}, "amount"),
        ({"external_id": "has space"}, "external_id"),
        ({"order_id": "a_b"}, "order_id"),
        ({"description": ""}, "description"),
        ({"expired_time": "2020-01-01T00:00:00+07:00"}, "expired_time"),
        ({"success_redirect_url": "ftp://x"}, "success_redirect_url"),
        ({"currency": "USD"}, "currency"),
    ],
)
async def test_a_field_that_breaks_its_rule_is_refused_by_name(
    app: FastAPI, client: httpx.AsyncClient, change: dict[str, object], field: str
) -> None:
    merchant = await make_merchant(app)
    assert_problem(await post(client, merchant, create_body(**change)), 400, "01", field)


async def test_a_missing_customer_address_is_refused(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = create_body()
    del body["customer_details"]["address"]
    assert_problem(await post(client, merchant, body), 400, "01", "customer_details.address")


async def test_external_id_is_one_namespace_with_the_other_payments(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    link = await create(client, merchant)
    again = create_body(external_id=link["external_id"])
    assert_problem(await post(client, merchant, again), 409, "03", "external_id")
    va = await create_va(client, merchant)
    assert_problem(await post(client, merchant, create_body(external_id=va["external_id"])), 409, "03", "external_id")
    # another merchant's external_id is its own
    assert (await create(client, await make_merchant(app), external_id=link["external_id"]))["transaction_status"]


async def test_the_idempotency_key_replays_the_first_answer(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = create_body()
    first = await post(client, merchant, body, **{"X-Idempotency-Key": "k-1"})
    second = await post(client, merchant, body, **{"X-Idempotency-Key": "k-1"})
    assert first.status_code == second.status_code == 200
    assert second.content == first.content
    assert second.headers.get("Idempotent-Replayed") == "true"


async def test_the_wallet_family_authentication_guards_create(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    body = create_body()
    assert_problem(await post(client, merchant, body, **{"x-req-signature": "0" * 64}), 401, "04")
    assert_problem(await post(client, merchant, body, **{"x-version": "v2"}), 400, "01", "x-version")
    assert_problem(await client.get("/payment-page/payment/PPLX"), 401, "04")


async def test_the_other_payments_refuse_an_external_id_a_link_holds(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    link = await create(client, merchant)
    taken = link["external_id"]
    va = {**va_body(), "external_id": taken}
    assert_problem(await post_va(client, merchant, CREATE_VA, va), 409, "03", "external_id")
    wallet = {**wallet_body(), "external_id": taken}
    assert_problem(await post_wallet(client, merchant, CREATE_WALLET, wallet), 409, "03")
    card = await post_charge(client, merchant, charge_body(mode="OPEN", number=None, externalId=taken))
    assert card.status_code == 409, card.text
    assert card.json()["errors"][0]["field"] == "externalId"


async def test_a_switched_off_channel_is_refused_naming_its_entry(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    monkeypatch.setattr(get_settings(), "processors", "card=simulator,wallet.DANA=simulator,va.BCA=simulator")
    served = [{"channel": "CARD"}, {"channel": "DANA"}, {"channel": "VA", "acq": "BCA-MCP"}]
    assert (await create(client, merchant, channels=served))["transaction_status"] == "PENDING"
    for channels, field in (
        ([*served, {"channel": "OVO"}], "selected_channels[3].channel"),
        ([{"channel": "DANA"}, {"channel": "VA", "acq": "BRI"}], "selected_channels[1].channel"),
        ([{"channel": "QRIS"}], "selected_channels[0].channel"),
    ):
        assert_problem(await post(client, merchant, create_body(channels=channels)), 409, "03", field)

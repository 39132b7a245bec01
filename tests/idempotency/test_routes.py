"""X-Idempotency-Key on every money-moving route: replay, reuse, refusals kept, one effect under a race.

The card charge's own cases are in tests/card/test_idempotency.py; here every other route
that takes a key, through the same component, each answering in its own wire format.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from kasir.bnpl.models import BnplTransaction
from kasir.db import fetch_value
from kasir.wallet.models import WalletRefund, WalletTransaction
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.server import ServedKasir
from tests.support.wire import compact, same_meaning, wallet
from tests.support.wire import snap as bnpl

KEY = "X-Idempotency-Key"


def new_key() -> str:
    return f"idem-{secrets.token_hex(12)}"


@dataclass
class Route:
    """A keyed route: how to make its request (a fresh body each call), and how many effects it left."""

    name: str
    prepare: Callable[[httpx.AsyncClient, builders.TestMerchant], Awaitable[dict[str, Any]]]
    request: Callable[[builders.TestMerchant, dict[str, Any]], tuple[str, str, dict[str, str]]]
    effects: Callable[[FastAPI, builders.TestMerchant, dict[str, Any]], Awaitable[int]]
    reused_code: tuple[str, str]  # (field, value) of the 422 body


async def _nothing(client: httpx.AsyncClient, merchant: builders.TestMerchant) -> dict[str, Any]:
    return {}


async def _paid(client: httpx.AsyncClient, merchant: builders.TestMerchant) -> dict[str, Any]:
    tx = await wallet.create(client, merchant)
    assert (await wallet.dummy_payment(client, merchant, tx)).status_code == 200
    return tx


async def _pending(client: httpx.AsyncClient, merchant: builders.TestMerchant) -> dict[str, Any]:
    return await wallet.create(client, merchant)


def _wallet(path: str, body: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    def request(merchant: builders.TestMerchant, state: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
        payload = body(state)
        return path, compact(payload), wallet.wallet_headers(merchant, payload)

    return request


def _checkout(merchant: builders.TestMerchant, state: dict[str, Any]) -> tuple[str, str, dict[str, str]]:
    text = compact(bnpl.checkout_body())
    return "/v1.0/bnpl/qr-checkout", text, bnpl.snap_headers(merchant, "/v1.0/bnpl/qr-checkout", text)


async def _count(app: FastAPI, query: Any) -> int:
    async with app.state.database.unit_of_work(read_only=True) as session:
        return int(await fetch_value(session, query) or 0)


async def _transactions(app: FastAPI, merchant: builders.TestMerchant, state: dict[str, Any]) -> int:
    query = select(func.count()).select_from(WalletTransaction).where(WalletTransaction.merchant_id == merchant.id)
    return await _count(app, query)


async def _refunds(app: FastAPI, merchant: builders.TestMerchant, state: dict[str, Any]) -> int:
    query = select(func.count()).select_from(WalletRefund).where(WalletRefund.transaction_id == state["transaction_id"])
    return await _count(app, query)


async def _state_changes(app: FastAPI, merchant: builders.TestMerchant, state: dict[str, Any]) -> int:
    """Voids and dummy payments leave a state; a second effect would have been refused, so count the callbacks."""
    from kasir.callbacks.models import Callback

    query = select(func.count()).select_from(Callback).where(Callback.transaction_ref == state["transaction_id"])
    return await _count(app, query)


async def _checkouts(app: FastAPI, merchant: builders.TestMerchant, state: dict[str, Any]) -> int:
    query = select(func.count()).select_from(BnplTransaction).where(BnplTransaction.merchant_id == merchant.id)
    return await _count(app, query)


ROUTES = [
    Route(
        "create-payment",
        _nothing,
        _wallet(wallet.CREATE, lambda _: wallet.create_body()),
        _transactions,
        ("response_code", "01"),
    ),
    Route(
        "create-qr",
        _nothing,
        _wallet(wallet.CREATE_QR, lambda _: wallet.create_body(channel="QRIS")),
        _transactions,
        ("response_code", "01"),
    ),
    Route(
        "refund",
        _paid,
        _wallet(wallet.REFUND, lambda tx: {**wallet.ref(tx), "refund_amount": 1000 + secrets.randbelow(1000)}),
        _refunds,
        ("response_code", "01"),
    ),
    Route(
        "void",
        _paid,
        # Another body for the same transaction: a reason no void needs (extra fields are ignored by the schema
        # only if allowed; the order_id stays, so the signature holds).
        _wallet(wallet.VOID, lambda tx: {**wallet.ref(tx), "reason": secrets.token_hex(4)}),
        _state_changes,
        ("response_code", "01"),
    ),
    Route(
        "dummy-payment",
        _pending,
        _wallet(
            wallet.DUMMY,
            lambda tx: {
                **wallet.ref(tx),
                "payment_method": "wallet",
                "payment_channel": tx["payment_channel"],
                "failure_reason": secrets.token_hex(4),
            },
        ),  # fmt: skip
        _state_changes,
        ("response_code", "01"),
    ),
    Route("qr-checkout", _nothing, _checkout, _checkouts, ("responseCode", "4229200")),
]


@pytest.fixture(params=ROUTES, ids=[route.name for route in ROUTES])
def route(request: pytest.FixtureRequest) -> Route:
    return request.param  # type: ignore[no-any-return]


async def send(client: httpx.AsyncClient, request: tuple[str, str, dict[str, str]], key: str | None) -> httpx.Response:
    path, text, headers = request
    if key is not None:
        headers = {**headers, KEY: key}
    return await client.post(path, content=text.encode(), headers=headers)


async def test_a_repeat_is_replayed_byte_for_byte_with_one_effect(
    app: FastAPI, client: httpx.AsyncClient, route: Route
) -> None:
    merchant = await make_merchant(app)
    state = await route.prepare(client, merchant)
    before = await route.effects(app, merchant, state)
    key, request = new_key(), route.request(merchant, state)
    first = await send(client, request, key)
    assert first.status_code == 200, first.text
    assert "idempotent-replayed" not in first.headers
    again = await send(client, request, key)
    assert again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert again.headers["content-type"] == first.headers["content-type"]
    assert await route.effects(app, merchant, state) == before + 1


async def test_the_same_key_with_another_body_is_refused_in_the_routes_format(
    app: FastAPI, client: httpx.AsyncClient, route: Route
) -> None:
    merchant = await make_merchant(app)
    state = await route.prepare(client, merchant)
    key = new_key()
    assert (await send(client, route.request(merchant, state), key)).status_code == 200
    before = await route.effects(app, merchant, state)
    other = await send(client, route.request(merchant, state), key)
    assert other.status_code == 422, other.text
    field, value = route.reused_code
    assert other.json()[field] == value
    assert "idempotent-replayed" not in other.headers
    assert await route.effects(app, merchant, state) == before


def _restated(
    merchant: builders.TestMerchant, request: tuple[str, str, dict[str, str]]
) -> tuple[str, str, dict[str, str]]:
    """The request with its body written another way (`same_meaning`), signed again where the signature covers
    the body (SNAP: its minified hash), under a new X-EXTERNAL-ID as a SNAP client's retry has."""
    path, text, headers = request
    restated = same_meaning(text)
    if path.startswith("/v1.0/bnpl/"):
        headers = bnpl.snap_headers(merchant, path, restated)
    return path, restated, headers


async def test_the_same_json_written_another_way_is_replayed(
    app: FastAPI, client: httpx.AsyncClient, route: Route
) -> None:
    """docs/decisions.md §12.5: key order, whitespace and escapes do not matter (numbers by value:
    tests/idempotency/test_service.py, as these routes' schemas take whole rupiah as integers only)."""
    merchant = await make_merchant(app)
    state = await route.prepare(client, merchant)
    before = await route.effects(app, merchant, state)
    key, request = new_key(), route.request(merchant, state)
    first = await send(client, request, key)
    assert first.status_code == 200, first.text
    again = await send(client, _restated(merchant, request), key)
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert await route.effects(app, merchant, state) == before + 1
    # A changed value, written the same other way, is another request.
    other = await send(client, _restated(merchant, route.request(merchant, state)), key)
    assert other.status_code == 422, other.text
    field, value = route.reused_code
    assert other.json()[field] == value
    assert await route.effects(app, merchant, state) == before + 1


async def test_a_body_that_is_not_json_is_refused_before_its_key_is_looked_at(
    app: FastAPI, client: httpx.AsyncClient, route: Route
) -> None:
    """docs/decisions.md §12.5: the refusal is not the key's answer; the key's first request is the next one."""
    merchant = await make_merchant(app)
    state = await route.prepare(client, merchant)
    key, (path, text, headers) = new_key(), route.request(merchant, state)
    broken = await send(client, (path, text[:-1], headers), key)
    assert broken.status_code in (400, 401), broken.text
    assert "idempotent-replayed" not in broken.headers
    first = await send(client, route.request(merchant, state), key)
    assert first.status_code == 200, first.text
    assert "idempotent-replayed" not in first.headers


async def test_keys_are_per_merchant(app: FastAPI, client: httpx.AsyncClient, route: Route) -> None:
    first, second = await make_merchant(app), await make_merchant(app)
    key = new_key()
    for merchant in (first, second):
        state = await route.prepare(client, merchant)
        answer = await send(client, route.request(merchant, state), key)
        assert answer.status_code == 200, answer.text
        assert "idempotent-replayed" not in answer.headers


async def test_a_refusal_is_the_keys_answer_and_undoes_nothing_else(app: FastAPI, client: httpx.AsyncClient) -> None:
    """A refund beyond what was paid is refused (4xx): the refusal is stored and replayed; a new key may try again."""
    merchant = await make_merchant(app)
    tx = await _paid(client, merchant)
    too_much = {**wallet.ref(tx), "refund_amount": 10_000_000}
    request = (wallet.REFUND, compact(too_much), wallet.wallet_headers(merchant, too_much))
    key = new_key()
    refused = await send(client, request, key)
    assert refused.status_code in (400, 409), refused.text
    replayed = await send(client, request, key)
    assert (replayed.status_code, replayed.headers["idempotent-replayed"]) == (refused.status_code, "true")
    assert replayed.content == refused.content
    fine = {**wallet.ref(tx), "refund_amount": 1000}
    assert (
        await send(client, (wallet.REFUND, compact(fine), wallet.wallet_headers(merchant, fine)), new_key())
    ).is_success


async def test_without_a_key_nothing_is_remembered(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    tx = await _paid(client, merchant)
    body = {**wallet.ref(tx), "refund_amount": 1000}
    request = (wallet.REFUND, compact(body), wallet.wallet_headers(merchant, body))
    for _ in range(2):
        answer = await send(client, request, None)
        assert answer.status_code == 200, answer.text
        assert "idempotent-replayed" not in answer.headers
    assert await _refunds(app, merchant, tx) == 2  # the retry-after-timeout double refund a key prevents


@pytest.mark.parametrize("bad", ["", "x" * 256, "tab\there"])
async def test_a_malformed_key_is_a_400_in_the_routes_format(app: FastAPI, client: httpx.AsyncClient, bad: str) -> None:
    merchant = await make_merchant(app)
    body = wallet.create_body()
    answer = await send(client, (wallet.CREATE, compact(body), wallet.wallet_headers(merchant, body)), bad)
    wallet.assert_problem(answer, 400, "01", KEY)


async def test_twenty_simultaneous_refunds_with_one_key_from_two_processes_refund_once(
    app: FastAPI, client: httpx.AsyncClient, served: ServedKasir
) -> None:
    """Ten through a real `kasir serve`, ten through this process's app, at once, on one database."""
    merchant = await make_merchant(app)
    tx = await _paid(client, merchant)
    body = {**wallet.ref(tx), "refund_amount": 5000}
    request = (wallet.REFUND, compact(body), wallet.wallet_headers(merchant, body))
    key = new_key()
    async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
        answers = await asyncio.gather(*(send(http if i % 2 else client, request, key) for i in range(20)))
    assert {a.status_code for a in answers} <= {200, 409}, [a.text for a in answers]
    originals = [a for a in answers if a.status_code == 200 and "idempotent-replayed" not in a.headers]
    assert len(originals) == 1
    for answer in answers:
        if answer.status_code == 200:
            assert answer.content == originals[0].content
        else:
            assert answer.headers["retry-after"] == "1"
            assert answer.json()["response_code"] == "03"
    assert await _refunds(app, merchant, tx) == 1

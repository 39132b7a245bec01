"""X-Idempotency-Key (docs/decisions.md §7): replay, reuse with another body, in progress, and a 20-way race."""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from kasir.card.models import CardOrder
from kasir.card.service import card_service
from kasir.db import fetch_one, fetch_value
from kasir.idempotency.models import IdempotencyKey
from kasir.kit.clock import clock
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire import compact, same_meaning
from tests.support.wire.card import DECLINED, charge_body, post_charge
from tests.support.worker import settled_callbacks


def new_key() -> str:
    return f"idem-{secrets.token_hex(12)}"


async def orders_for(app: FastAPI, merchant: builders.TestMerchant) -> int:
    async with app.state.database.unit_of_work(read_only=True) as session:
        count = await fetch_value(
            session, select(func.count()).select_from(CardOrder).where(CardOrder.merchant_id == merchant.id)
        )
        return int(count or 0)


async def test_replay_returns_the_same_answer(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    key = new_key()
    body = compact(charge_body(number=DECLINED, callback_url=receiver.url("/idem")))
    first = await post_charge(client, merchant, body, key=key)
    assert first.status_code == 200, first.text
    assert "idempotent-replayed" not in first.headers
    again = await post_charge(client, merchant, body, key=key)
    assert again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert await orders_for(app, merchant) == 1
    await settled_callbacks(app, merchant.id)
    assert len([r for r in receiver.requests if r.path == "/idem"]) == 1  # the replay charged nothing


async def test_same_key_other_body_is_refused(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    key = new_key()
    assert (await post_charge(client, merchant, charge_body(), key=key)).status_code == 200
    other = await post_charge(client, merchant, charge_body(), key=key)
    assert other.status_code == 422
    assert other.json() == {
        "statusCode": "422",
        "statusMessage": "IDEMPOTENCY_KEY_REUSED",
        "errors": [
            {
                "field": "X-Idempotency-Key",
                "message": "X-Idempotency-Key was already used with a different request body",
            }
        ],
    }
    assert await orders_for(app, merchant) == 1


async def test_the_same_json_written_another_way_is_replayed(app: FastAPI, client: httpx.AsyncClient) -> None:
    """docs/decisions.md §12.5: key order, whitespace and escapes do not matter (numbers by value:
    tests/idempotency/test_service.py; the charge takes whole rupiah as integers only)."""
    merchant = await make_merchant(app)
    key = new_key()
    body = compact(charge_body(number=DECLINED))
    first = await post_charge(client, merchant, body, key=key)
    assert first.status_code == 200, first.text
    again = await post_charge(client, merchant, same_meaning(body), key=key)
    assert again.status_code == 200, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    changed = json.loads(body)
    changed["paymentDetails"]["transactionDescription"] += " "
    other = await post_charge(client, merchant, same_meaning(compact(changed)), key=key)
    assert (other.status_code, other.json()["statusMessage"]) == (422, "IDEMPOTENCY_KEY_REUSED")
    assert await orders_for(app, merchant) == 1


async def test_a_refused_reuse_leaves_no_trace(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    """A reused key whose other body would be charged (a declined card, which records a callback):
    422, and neither the order nor its callback exists afterwards. Under SQLite group commit the
    charge runs before the key is written, and is undone when the key turns out to be taken."""
    merchant = await make_merchant(app)
    key = new_key()
    assert (await post_charge(client, merchant, charge_body(), key=key)).status_code == 200
    with caplog.at_level("INFO", logger="kasir.request"):
        reused = await post_charge(
            client, merchant, charge_body(number=DECLINED, callback_url=receiver.url("/reused")), key=key
        )
    assert reused.status_code == 422, reused.text
    assert reused.json()["statusMessage"] == "IDEMPOTENCY_KEY_REUSED"
    [line] = [r for r in caplog.records if r.name == "kasir.request" and getattr(r, "status", 0) == 422]
    assert not hasattr(line, "transaction_id")  # not the id of the order that was undone
    sent = await post_charge(
        client, merchant, charge_body(number=DECLINED, callback_url=receiver.url("/sent")), key=new_key()
    )
    assert sent.status_code == 200, sent.text
    await settled_callbacks(app, merchant.id)  # whatever was recorded has been sent: "/reused" would have been
    assert [r.path for r in receiver.requests if r.path == "/reused"] == []
    assert await orders_for(app, merchant) == 2


async def test_keys_belong_to_one_merchant(app: FastAPI, client: httpx.AsyncClient) -> None:
    one, two = await make_merchant(app), await make_merchant(app)
    key = new_key()
    assert (await post_charge(client, one, charge_body(), key=key)).status_code == 200
    answer = await post_charge(client, two, charge_body(), key=key)
    assert answer.status_code == 200
    assert "idempotent-replayed" not in answer.headers


async def test_duplicate_order_is_the_stored_answer_of_its_key(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    first = charge_body()
    assert (await post_charge(client, merchant, first)).status_code == 200
    duplicate = compact({**charge_body(), "orderId": first["orderId"]})
    key = new_key()
    refused = await post_charge(client, merchant, duplicate, key=key)
    assert refused.status_code == 409
    assert refused.json()["statusMessage"] == "DUPLICATE_ORDER"
    replayed = await post_charge(client, merchant, duplicate, key=key)
    assert (replayed.status_code, replayed.headers["idempotent-replayed"]) == (409, "true")
    assert replayed.content == refused.content


async def test_a_replay_of_the_original_is_not_a_duplicate(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    key, body = new_key(), compact(charge_body())
    first = await post_charge(client, merchant, body, key=key)
    second = await post_charge(client, merchant, body, key=key)
    assert (first.status_code, second.status_code) == (200, 200)
    assert second.json()["data"]["transactionId"] == first.json()["data"]["transactionId"]


async def test_validation_failures_do_not_use_up_the_key(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    key = new_key()
    bad = charge_body()
    bad["currency"] = "USD"
    assert (await post_charge(client, merchant, bad, key=key)).status_code == 400
    assert (await post_charge(client, merchant, charge_body(), key=key)).status_code == 200


async def test_a_server_error_lets_go_of_the_key(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    key, body = new_key(), compact(charge_body())
    original = card_service.charge

    async def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(card_service, "charge", broken)
    assert (await post_charge(client, merchant, body, key=key)).status_code == 500
    monkeypatch.setattr(card_service, "charge", original)
    retried = await post_charge(client, merchant, body, key=key)
    assert retried.status_code == 200
    assert "idempotent-replayed" not in retried.headers


async def test_keys_expire_after_24_hours(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    key = new_key()
    assert (await post_charge(client, merchant, charge_body(), key=key)).status_code == 200
    async with app.state.database.unit_of_work(read_only=True) as session:
        row = await fetch_one(session, select(*IdempotencyKey.__table__.c).where(IdempotencyKey.key == key))
        assert row is not None
        assert row.scope == "POST /card-v2/v1/charge"
        assert row.response_status == 200
        assert (row.expires_at - row.created_at).total_seconds() == 24 * 3600
    clock.advance(24 * 3600 + 1)
    fresh = await post_charge(client, merchant, charge_body(), key=key)  # another body: no longer a reuse
    assert fresh.status_code == 200
    assert "idempotent-replayed" not in fresh.headers


@pytest.mark.parametrize("mode", ["CLOSE", "OPEN"])
async def test_twenty_simultaneous_charges_with_one_key(
    app: FastAPI, client: httpx.AsyncClient, served: ServedKasir, mode: str
) -> None:
    """Ten through a real `kasir serve`, ten through this process's app, at once, on one database:
    exactly one order; every other answer is 409 REQUEST_IN_PROGRESS or the replayed 200."""
    merchant = await make_merchant(app)
    key, body = new_key(), compact(charge_body(mode=mode, number=None if mode == "OPEN" else DECLINED))
    async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
        answers = await asyncio.gather(
            *(post_charge(http if i % 2 else client, merchant, body, key=key) for i in range(20))
        )
    assert {a.status_code for a in answers} <= {200, 409}, [a.text for a in answers]
    originals = [a for a in answers if a.status_code == 200 and "idempotent-replayed" not in a.headers]
    assert len(originals) == 1
    transaction_id = originals[0].json()["data"]["transactionId"]
    for answer in answers:
        if answer.status_code == 200:
            assert answer.json()["data"]["transactionId"] == transaction_id
        else:
            assert answer.json()["statusMessage"] == "REQUEST_IN_PROGRESS"
    assert await orders_for(app, merchant) == 1
    replay = await post_charge(client, merchant, body, key=key)
    assert replay.headers["idempotent-replayed"] == "true"
    assert replay.content == originals[0].content


async def test_open_mode_charges_replay_and_refuse_as_every_charge_does(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """The replay, the reused key and the taken orderId and externalId answer in OPEN mode as in CLOSE mode."""
    merchant = await make_merchant(app)
    original = charge_body(mode="OPEN", number=None)
    key, body = new_key(), compact(original)
    first = await post_charge(client, merchant, body, key=key)
    assert first.status_code == 200, first.text
    assert first.json()["data"]["paymentStatus"] == "PENDING"
    again = await post_charge(client, merchant, body, key=key)
    assert (again.status_code, again.headers["idempotent-replayed"]) == (200, "true")
    assert again.content == first.content
    reused = await post_charge(client, merchant, compact(charge_body(mode="OPEN", number=None)), key=key)
    assert (reused.status_code, reused.json()["statusMessage"]) == (422, "IDEMPOTENCY_KEY_REUSED")
    for field in ("orderId", "externalId"):
        taken = compact({**charge_body(mode="OPEN", number=None), field: original[field]})
        taken_key = new_key()
        refused = await post_charge(client, merchant, taken, key=taken_key)
        assert refused.status_code == 409, refused.text
        assert refused.json()["statusMessage"] == "DUPLICATE_ORDER"
        assert [e["field"] for e in refused.json()["errors"]] == [field]
        replayed = await post_charge(client, merchant, taken, key=taken_key)  # the refusal is the key's answer
        assert (replayed.status_code, replayed.headers["idempotent-replayed"]) == (409, "true")
        assert replayed.content == refused.content
    assert await orders_for(app, merchant) == 1
    async with app.state.database.unit_of_work(read_only=True) as session:
        stored = await fetch_value(
            session,
            select(IdempotencyKey.response_body).where(
                IdempotencyKey.merchant_id == merchant.id, IdempotencyKey.key == key
            ),
        )
    assert stored == first.text

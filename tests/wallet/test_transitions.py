"""Refund, void, expiry, OVO failure, refused transitions and races, all over HTTP with real callbacks."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from kasir.callbacks.models import Callback
from kasir.db import fetch, fetch_value
from kasir.kit.clock import clock, parse_aware
from kasir.wallet.jobs import expire_due_wallet_transactions
from tests.support import builders
from tests.support.builders import make_merchant
from tests.support.receiver import Answer, CallbackReceiver
from tests.support.wire.wallet import assert_problem, check_callback, create, dummy_payment, inquire, refund, void
from tests.support.worker import expiry_hang_guard, settled_callbacks


async def recorded_callbacks(app: FastAPI, transaction_id: str) -> list[str]:
    async with app.state.database.unit_of_work(read_only=True) as session:
        rows = await fetch(
            session, select(Callback.event).where(Callback.transaction_ref == transaction_id).order_by(Callback.id)
        )
        return [row.event for row in rows]


async def attempts_recorded(app: FastAPI, merchant: builders.TestMerchant, transaction_id: str, count: int) -> None:
    """Every attempt due now is made and recorded (and so the next one scheduled): `count` in all."""
    await settled_callbacks(app, merchant.id)
    async with app.state.database.unit_of_work(read_only=True) as session:
        made = await fetch_value(
            session, select(Callback.attempts_made).where(Callback.transaction_ref == transaction_id)
        )
    assert made == count


async def test_partial_refund_then_the_rest(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, receiver.url("/refund"), channel="SHOPEEPAY")
    assert (await dummy_payment(client, merchant, tx)).status_code == 200

    first = await refund(client, merchant, tx, 30_000)
    assert first.status_code == 200, first.text
    assert first.json()["transaction_status"] == "REFUNDED"
    assert first.json()["refunded_amount"] == 30_000
    assert_problem(await refund(client, merchant, tx, 70_001), 409, "03", "refund_amount", "70000")
    second = await refund(client, merchant, tx, 70_000)
    assert second.status_code == 200, second.text
    assert second.json()["refunded_amount"] == 100_000
    assert [h["refund_amount"] for h in second.json()["refund_history"]] == [30_000, 70_000]
    assert_problem(await refund(client, merchant, tx, 1), 409, "03", "refund_amount")
    assert_problem(await void(client, merchant, tx), 409, "03", "REFUNDED")

    paid, refund1, refund2 = await receiver.wait_for(3, path="/refund")
    assert check_callback(paid, merchant, tx)["transaction_status"] == "PAID"
    one = check_callback(refund1, merchant, tx)
    two = check_callback(refund2, merchant, tx)
    assert one["transaction_status"] == two["transaction_status"] == "REFUNDED"
    assert [h["refund_amount"] for h in one["refund_history"]] == [30_000]
    assert [h["refund_amount"] for h in two["refund_history"]] == [30_000, 70_000]
    for history in two["refund_history"]:
        assert parse_aware(history["refund_time"]).utcoffset() == timedelta(hours=7)
    assert "void_history" not in two
    assert "issuer" not in two
    # Inquiry reads the same transaction and refunds (plain rows, no lock) as the refund answered.
    assert await inquire(client, merchant, tx) == second.json()
    assert await recorded_callbacks(app, tx["transaction_id"]) == ["PAID", "REFUNDED", "REFUNDED"]


async def test_void_on_the_day_of_payment(app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, receiver.url("/void"), channel="LINKAJA")
    assert_problem(await void(client, merchant, tx), 409, "03", "PENDING")
    assert (await dummy_payment(client, merchant, tx)).status_code == 200
    voided = await void(client, merchant, tx)
    assert voided.status_code == 200, voided.text
    assert voided.json()["transaction_status"] == "VOID"
    assert voided.json()["void_history"][0]["void_amount"] == 100_000
    assert_problem(await void(client, merchant, tx), 409, "03", "VOID")
    assert_problem(await refund(client, merchant, tx, 1_000), 409, "03", "VOID")
    assert_problem(await dummy_payment(client, merchant, tx), 409, "03")

    _, request = await receiver.wait_for(2, path="/void")
    payload = check_callback(request, merchant, tx)
    assert payload["transaction_status"] == "VOID"
    assert payload["void_history"] == [{"void_time": payload["void_history"][0]["void_time"], "void_amount": 100_000}]
    assert "refund_history" not in payload
    assert "issuer" not in payload
    assert (await inquire(client, merchant, tx))["transaction_status"] == "VOID"


async def test_void_the_next_day_is_refused(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant)
    assert (await dummy_payment(client, merchant, tx)).status_code == 200
    clock.advance(24 * 3600)
    assert_problem(await void(client, merchant, tx), 409, "03", "day it was paid")
    assert (await inquire(client, merchant, tx))["transaction_status"] == "PAID"
    assert (await refund(client, merchant, tx, 100_000)).status_code == 200  # a refund is still possible


async def test_expiry_without_any_request(app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, receiver.url("/expire"), expired_time=clock.now() + timedelta(seconds=65))
    kept = await create(client, merchant)  # default expiry: 15 minutes
    assert parse_aware(kept["expired_time"]) - parse_aware(kept["transaction_time"]) == timedelta(minutes=15)
    clock.advance(66)
    # Nothing is called: the embedded worker's scheduler expires it and the callback arrives.
    [request] = await receiver.wait_for(1, path="/expire", timeout=expiry_hang_guard())
    payload = check_callback(request, merchant, tx)
    assert payload["transaction_status"] == "EXPIRED"
    assert payload["response_code"] == "00"
    assert payload["payment_details"]["paid_time"] == ""  # issue 26: never null
    assert "issuer" not in payload
    assert "acquirer_issuer_relation" not in payload
    assert (await inquire(client, merchant, tx))["transaction_status"] == "EXPIRED"
    assert (await inquire(client, merchant, kept))["transaction_status"] == "PENDING"
    assert_problem(await dummy_payment(client, merchant, tx), 409, "03", "EXPIRED")
    assert await expire_due_wallet_transactions(app.state.database) == 0
    assert await recorded_callbacks(app, tx["transaction_id"]) == ["EXPIRED"]


async def test_payment_after_expired_time_is_refused_before_the_job_runs(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant)
    clock.advance(15 * 60 + 1)
    response = await dummy_payment(client, merchant, tx)
    assert_problem(response, 409, "03")
    assert (await inquire(client, merchant, tx))["transaction_status"] in ("PENDING", "EXPIRED")


async def test_ovo_failure(app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, receiver.url("/ovo"), channel="OVO")
    failed = await dummy_payment(client, merchant, tx, simulate_status="FAILED", failure_reason="OVO balance too low")
    assert failed.status_code == 200, failed.text
    assert failed.json()["transaction_status"] == "failed"
    assert failed.json()["paid_time"] == ""
    [request] = await receiver.wait_for(1, path="/ovo")
    payload = check_callback(request, merchant, tx)
    assert payload["transaction_status"] == "failed"
    assert payload["response_code"] == "03"
    assert payload["response_message"] == "OVO balance too low"
    assert "issuer" not in payload
    status = await inquire(client, merchant, tx)
    assert status["transaction_status"] == "failed"
    assert status["failure_reason"] == "OVO balance too low"
    assert_problem(await dummy_payment(client, merchant, tx), 409, "03", "failed")
    assert_problem(await refund(client, merchant, tx, 1), 409, "03")


@pytest.mark.parametrize("channel", ["DANA", "SHOPEEPAY", "LINKAJA", "VIRGO", "QRIS"])
async def test_only_ovo_reports_failures(app: FastAPI, client: httpx.AsyncClient, channel: str) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, channel=channel)
    assert_problem(await dummy_payment(client, merchant, tx, simulate_status="FAILED"), 409, "03", "OVO")
    assert (await inquire(client, merchant, tx))["transaction_status"] == "PENDING"
    assert await recorded_callbacks(app, tx["transaction_id"]) == []


async def test_simulated_expiry(app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, receiver.url("/sim-expired"), channel="VIRGO")
    response = await dummy_payment(client, merchant, tx, simulate_status="EXPIRED")
    assert response.status_code == 200
    assert response.json()["transaction_status"] == "EXPIRED"
    [request] = await receiver.wait_for(1, path="/sim-expired")
    assert check_callback(request, merchant, tx)["transaction_status"] == "EXPIRED"


async def test_refused_transitions_change_nothing(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant)
    assert_problem(await refund(client, merchant, tx, 1_000), 409, "03", "PENDING")
    assert_problem(await void(client, merchant, tx), 409, "03", "PENDING")
    assert (await dummy_payment(client, merchant, tx)).status_code == 200
    assert_problem(await dummy_payment(client, merchant, tx), 409, "03", "PAID")
    assert_problem(await dummy_payment(client, merchant, tx, simulate_status="EXPIRED"), 409, "03", "PAID")
    assert_problem(await refund(client, merchant, tx, 100_001), 409, "03", "refund_amount")
    status = await inquire(client, merchant, tx)
    assert status["transaction_status"] == "PAID"
    assert status["refunded_amount"] == 0
    assert await recorded_callbacks(app, tx["transaction_id"]) == ["PAID"]


async def test_concurrent_dummy_payments_only_one_succeeds(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, receiver.url("/race"))
    responses = await asyncio.gather(*(dummy_payment(client, merchant, tx) for _ in range(4)))
    assert sorted(r.status_code for r in responses) == [200, 409, 409, 409]
    assert await recorded_callbacks(app, tx["transaction_id"]) == ["PAID"]
    await receiver.wait_for(1, path="/race")
    await settled_callbacks(app, merchant.id)
    assert len(receiver.requests) == 1


async def test_concurrent_refunds_cannot_exceed_the_paid_amount(app: FastAPI, client: httpx.AsyncClient) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant)
    assert (await dummy_payment(client, merchant, tx)).status_code == 200
    responses = await asyncio.gather(*(refund(client, merchant, tx, 60_000) for _ in range(3)))
    assert sorted(r.status_code for r in responses) == [200, 409, 409]
    assert (await inquire(client, merchant, tx))["refunded_amount"] == 60_000
    assert await recorded_callbacks(app, tx["transaction_id"]) == ["PAID", "REFUNDED"]


async def test_refused_callback_is_retried_twice(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    """interface.md: a wallet callback not answered 200 is retried 2 times (3 attempts in all)."""
    merchant = await make_merchant(app)
    receiver.answer(Answer(status=500), Answer(status=503), Answer(status=500))
    tx = await create(client, merchant, receiver.url("/retry"))
    assert (await dummy_payment(client, merchant, tx)).status_code == 200
    await attempts_recorded(app, merchant, tx["transaction_id"], 1)
    clock.advance(15)  # past the first backoff (10 s + jitter)
    await attempts_recorded(app, merchant, tx["transaction_id"], 2)
    clock.advance(70)  # past the second (60 s + jitter)
    await attempts_recorded(app, merchant, tx["transaction_id"], 3)
    attempts = await receiver.wait_for(3, path="/retry")
    clock.advance(400)
    await settled_callbacks(app, merchant.id)  # anything due after the schedule has been sent
    assert len(receiver.requests) == 3  # no fourth attempt
    for attempt in attempts:
        assert check_callback(attempt, merchant, tx)["transaction_status"] == "PAID"
    assert [a.headers["x-kasir-attempt"] for a in attempts] == ["1", "2", "3"]


async def test_a_locked_read_is_read_once_per_unit_and_forgotten_when_the_unit_rolls_back(
    app: FastAPI, client: httpx.AsyncClient, receiver: CallbackReceiver
) -> None:
    """kasir.db.held_rows: a second locked read in the unit is the first's row with its changes, without a
    statement; after rollback_unit the row is read again, as the database has it."""
    from kasir.db import rollback_unit
    from kasir.wallet.service import wallet_service

    merchant = await make_merchant(app)
    tx = await create(client, merchant, receiver.url("/held"))
    async with app.state.database.unit_of_work() as session:
        held = await wallet_service.get(session, tx["transaction_id"], lock=True)
        await wallet_service.pay(session, held)
        again = await wallet_service.get(session, tx["transaction_id"], lock=True)
        assert again is held
        assert again.status == "PAID"
        await rollback_unit(session)
        fresh = await wallet_service.get(session, tx["transaction_id"], lock=True)
        assert fresh is not held
        assert fresh.status == "PENDING"
    assert (await inquire(client, merchant, tx))["transaction_status"] == "PENDING"

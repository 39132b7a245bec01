"""A worker whose machine's clock stepped ahead acts on nothing time decides (issue 43 N5, item 5).

Measured on 2026-11-27: a worker 25 h ahead purged every idempotency key (20 of 20 retried refunds paid out
twice), and at +1 h, 20 wallet payments expired 14 minutes early. Expiries, purges and callback leases compare
moments of the worker's clock with moments other processes wrote; the worker now first asks the database's
clock, and waits while the two disagree.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

import httpx
from fastapi import FastAPI
from sqlalchemy import func, select

from kasir.callbacks.worker import DeliveryWorker
from kasir.db import fetch_value
from kasir.idempotency.models import IdempotencyKey
from kasir.kit.clock import clock
from kasir.wallet.models import WalletRefund, WalletTransaction
from tests.idempotency.test_service import answering, once
from tests.support.builders import make_merchant
from tests.support.wire import compact, wallet

DAY_AND_AN_HOUR = 25 * 3600.0


async def state(app: FastAPI, merchant_id: str, transaction_id: str) -> tuple[int, str]:
    async with app.state.database.unit_of_work(read_only=True) as session:
        of_merchant = IdempotencyKey.merchant_id == merchant_id
        keys = await fetch_value(session, select(func.count()).select_from(IdempotencyKey).where(of_merchant))
        status = await fetch_value(
            session, select(WalletTransaction.status).where(WalletTransaction.id == transaction_id)
        )
    return int(keys), str(status)


async def test_a_worker_whose_clock_is_a_day_ahead_purges_no_key_and_expires_no_payment(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    merchant = await make_merchant(app)
    await once(app.state.database, merchant.id, "refund-1", answering(200))
    payment = await wallet.create(client, merchant)
    worker = DeliveryWorker(app.state.database, app.state.settings, name="ahead")
    # The machine's clock stepped a day ahead: Kasir's clock (all it compares) and the machine's both.
    clock.advance(DAY_AND_AN_HOUR)
    worker.clock.process_epoch = lambda: time.time() + DAY_AND_AN_HOUR
    running = asyncio.create_task(worker.run())
    try:
        await worker.next_expiry_pass()
        assert await state(app, merchant.id, payment["transaction_id"]) == (1, "PENDING")
        # The machine's clock is put right (Kasir's test clock stays ahead, as if the day had passed): it acts.
        worker.clock.process_epoch = time.time
        # Past the once-a-minute purge of a worker of an earlier test in this process (its clock ahead as well).
        clock.advance(120)
        await worker.next_expiry_pass()
        await worker.next_expiry_pass()
        assert await state(app, merchant.id, payment["transaction_id"]) == (0, "EXPIRED")
    finally:
        worker.stop()
        await running


async def refund_count(app: FastAPI, transaction_id: str) -> int:
    async with app.state.database.unit_of_work(read_only=True) as session:
        query = select(func.count()).select_from(WalletRefund).where(WalletRefund.transaction_id == transaction_id)
        return int(await fetch_value(session, query))


async def test_a_server_whose_clock_is_a_day_ahead_answers_an_outage_and_pays_no_refund_twice(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """The request path judges a key's 24 hours by its own clock: a server a day ahead took over the key of a
    retried refund and paid it again. It now answers 503 (and /readyz says why) until the clocks agree."""
    merchant = await make_merchant(app)
    payment = await wallet.create(client, merchant)
    assert (await wallet.dummy_payment(client, merchant, payment)).status_code == 200
    body = compact({**wallet.ref(payment), "refund_amount": 1500})
    headers = {**wallet.wallet_headers(merchant, json.loads(body)), "X-Idempotency-Key": "refund-once"}
    first = await client.post(wallet.REFUND, content=body, headers=headers)
    assert first.status_code == 200, first.text
    agreement = app.state.clock_agreement
    clock.advance(DAY_AND_AN_HOUR)
    agreement.process_epoch = lambda: time.time() + DAY_AND_AN_HOUR
    try:
        assert await agreement.check(app.state.database) is False
        retried = await client.post(wallet.REFUND, content=body, headers=headers)
        assert retried.status_code == 500, retried.text  # wallet's outage: `98` with HTTP 500 (decisions §4)
        assert retried.json()["response_code"] == "98"
        assert retried.headers["Retry-After"] == "10"
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        # SQLite's CURRENT_TIMESTAMP has whole seconds: 90,000 or 90,001 s.
        assert re.search(r"clock is 9000[01] s ahead of the database's", ready.json()["reason"]), ready.json()
        assert (await client.get("/healthz")).status_code == 200
        assert await refund_count(app, payment["transaction_id"]) == 1
    finally:
        # The machine's time is put right: both clocks (and the app, shared with the tests after this one, agrees
        # again even when an assertion above failed).
        clock.reset()
        agreement.process_epoch = time.time
        assert await agreement.check(app.state.database) is True
    replayed = await client.post(wallet.REFUND, content=body, headers=headers)
    assert replayed.status_code == 200
    assert replayed.content == first.content
    assert await refund_count(app, payment["transaction_id"]) == 1
    assert (await client.get("/readyz")).status_code == 200

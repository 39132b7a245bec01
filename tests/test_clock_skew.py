"""A worker whose machine's clock stepped ahead acts on nothing time decides (issue 43 N5, item 5).

Measured on 2026-11-27: a worker 25 h ahead purged every idempotency key (20 of 20 retried refunds paid out
twice), and at +1 h, 20 wallet payments expired 14 minutes early. Expiries, purges and callback leases compare
moments of the worker's clock with moments other processes wrote; the worker now first asks the database's
clock, and waits while the two disagree.
"""

from __future__ import annotations

import asyncio
import time

import httpx
from fastapi import FastAPI
from sqlalchemy import func, select

from kasir.callbacks.worker import DeliveryWorker
from kasir.db import fetch_value
from kasir.idempotency.models import IdempotencyKey
from kasir.kit.clock import clock
from kasir.wallet.models import WalletTransaction
from tests.idempotency.test_service import answering, once
from tests.support.builders import make_merchant
from tests.support.wire import wallet

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
    worker.process_epoch = lambda: time.time() + DAY_AND_AN_HOUR
    running = asyncio.create_task(worker.run())
    try:
        await worker.next_expiry_pass()
        assert await state(app, merchant.id, payment["transaction_id"]) == (1, "PENDING")
        # The machine's clock is put right (Kasir's test clock stays ahead, as if the day had passed): it acts.
        worker.process_epoch = time.time
        # Past the once-a-minute purge of a worker of an earlier test in this process (its clock ahead as well).
        clock.advance(120)
        await worker.next_expiry_pass()
        await worker.next_expiry_pass()
        assert await state(app, merchant.id, payment["transaction_id"]) == (0, "EXPIRED")
    finally:
        worker.stop()
        await running

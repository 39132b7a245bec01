"""Waiting on the callback worker instead of the clock.

"Sleep, then assert nothing was sent" passes on a slow machine whether or not the callback would have
gone out. These wait for what proves it: the worker's own word that a claim begun after the wait began
found nothing due and left no attempt in flight (`DeliveryWorker.idle`), and, for callbacks another
process may be sending (`served`), their rows no longer being delivered.
"""

from __future__ import annotations

import asyncio

from fastapi import FastAPI

from kasir.callbacks.models import CallbackStatus
from kasir.callbacks.repository import CallbackRow, callback_repository
from kasir.callbacks.worker import EXPIRY_INTERVAL_SECONDS, DeliveryWorker
from kasir.config import get_settings
from kasir.db import Database

SETTLED = {CallbackStatus.DELIVERED.value, CallbackStatus.FAILED.value}


def callback_hang_guard() -> float:
    """How long a callback due now may take to be sent and recorded before the worker counts as stuck.

    Not a bound on speed: a worker looks for due callbacks at least every KASIR_CALLBACK_POLL_SECONDS,
    an attempt ends within its timeout and is recorded within its lease (which must exceed the timeout).
    """
    settings = get_settings()
    return settings.callback_poll_seconds + settings.callback_lease_seconds


async def worker_idle(app: FastAPI) -> None:
    """Return once the app's worker has sent everything due and recorded every attempt it started."""
    worker: DeliveryWorker | None = app.state.worker
    assert worker is not None, "the app runs no callback worker"
    async with asyncio.timeout(callback_hang_guard()):
        await worker.idle()


async def next_expiry_pass(app: FastAPI) -> None:
    """Return once the app's worker has run its expiry jobs (payments, idempotency keys, ...) from start to end
    after this call: whatever was due by their rules then has been expired or purged."""
    worker: DeliveryWorker | None = app.state.worker
    assert worker is not None, "the app runs no callback worker"
    async with asyncio.timeout(expiry_hang_guard()):
        await worker.next_expiry_pass()


async def settled_callbacks(app: FastAPI, merchant_id: str) -> list[CallbackRow]:
    """The merchant's callbacks once nothing due is left unsent and none is being delivered anywhere.

    Every attempt that will be made at the clock's present time has then been made and recorded, so the
    receiver has every request it will get until the clock moves (an attempt is recorded only after the
    receiver has the request). Rows newest first.
    """
    database = app.state.database
    async with asyncio.timeout(callback_hang_guard()):
        while True:
            await worker_idle(app)
            async with database.unit_of_work(read_only=True) as session:
                rows = await callback_repository.search(session, merchant_id=merchant_id)
            if all(row.status != "delivering" for row in rows):
                return rows
            # Another process (a `served` kasir) holds a claim: its attempt's record ends it.
            await asyncio.sleep(get_settings().callback_poll_seconds)


def expiry_hang_guard() -> float:
    """How long a payment past its expiry may take to be expired and its callback sent and recorded.

    Not a bound on speed: the worker's expiry scheduler runs every EXPIRY_INTERVAL_SECONDS, and the callback
    it records is then due now (callback_hang_guard).
    """
    return EXPIRY_INTERVAL_SECONDS + callback_hang_guard()


async def callbacks_settled_in(database: Database, merchant_id: str) -> list[CallbackRow]:
    """The merchant's callbacks once each is delivered or given up, on a database whose worker runs in another
    process (no `idle()` to ask). A settled callback is never sent again: its attempts are all it will have."""
    async with asyncio.timeout(callback_hang_guard()):
        while True:
            async with database.unit_of_work(read_only=True) as session:
                rows = await callback_repository.search(session, merchant_id=merchant_id)
            if all(row.status in SETTLED for row in rows):
                return rows
            await asyncio.sleep(get_settings().callback_poll_seconds)

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI
from sqlalchemy import select, update

from kasir.callbacks.dispatcher import ClaimedCallback
from kasir.callbacks.models import Callback, CallbackKind
from kasir.callbacks.repository import CallbackAttemptRow, CallbackRow, callback_repository
from kasir.callbacks.service import callback_outbox
from kasir.db import Database, fetch_value, run
from kasir.kit.clock import clock
from tests.support.worker import callback_hang_guard


async def record(
    database: Database,
    *,
    merchant_id: str,
    url: str,
    kind: CallbackKind = CallbackKind.WALLET,
    transaction_ref: str = "TX-1",
    event: str = "PAID",
    payload: dict[str, Any] | None = None,
    svc_signature: str | None = "sig",
) -> int:
    async with database.unit_of_work() as session:
        await callback_outbox.record(
            session,
            kind=kind,
            merchant_id=merchant_id,
            transaction_ref=transaction_ref,
            event=event,
            url=url,
            payload=payload if payload is not None else {"transaction_id": transaction_ref, "event": event},
            svc_signature=svc_signature,
        )
        newest = (
            select(Callback.id)
            .where(Callback.merchant_id == merchant_id, Callback.kind == kind.value)
            .where(Callback.transaction_ref == transaction_ref)
            .order_by(Callback.id.desc())
            .limit(1)
        )
        return int(await fetch_value(session, newest))  # the outbox hands back no id: none needs it


async def load(database: Database, callback_id: int) -> tuple[CallbackRow, list[CallbackAttemptRow]]:
    async with database.unit_of_work(read_only=True) as session:
        callback = await callback_repository.get(session, callback_id)
        assert callback is not None
        return callback, await callback_repository.attempts(session, callback_id)


async def wait_status(database: Database, callback_id: int, status: str) -> CallbackRow:
    deadline = asyncio.get_running_loop().time() + callback_hang_guard()
    while True:
        callback, _ = await load(database, callback_id)
        if callback.status == status:
            return callback
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"callback {callback_id} is {callback.status}, expected {status}")
        await asyncio.sleep(0.05)


def db(app: FastAPI) -> Database:
    return app.state.database


async def wait_attempts(database: Database, callback_id: int, count: int) -> CallbackRow:
    """Wait until `count` attempts of the callback are recorded (not merely received)."""
    deadline = asyncio.get_running_loop().time() + callback_hang_guard()
    while True:
        callback, attempts = await load(database, callback_id)
        if len(attempts) >= count and callback.status != "delivering":
            return callback
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"callback {callback_id} has {len(attempts)} attempts, expected {count}")
        await asyncio.sleep(0.05)


async def give_up(database: Database, callback_id: int) -> None:
    """The callback as a worker leaves it after its last attempt was refused (without sending any): given up."""
    async with database.unit_of_work() as session:
        await run(
            session,
            update(Callback)
            .where(Callback.id == callback_id)
            .values(status="failed", attempts_made=Callback.max_attempts, last_error="HTTP 500 not accepted"),
        )


async def settle(app: FastAPI, callback_id: int, status: str) -> None:
    """Let the worker make the delivery's attempts until it is `status`, moving the clock to each retry.

    The clock moves only while the delivery waits (pending), and only to its retry: a lease is never
    run out under an attempt in flight."""
    async with asyncio.timeout(callback_hang_guard()):
        while (row := (await load(db(app), callback_id))[0]).status != status:
            assert row.status != ("delivered" if status == "failed" else "failed"), row
            if row.status == "pending" and row.attempts_made > 0 and row.next_attempt_at > clock.now():
                clock.advance((row.next_attempt_at - clock.now()).total_seconds() + 0.5)
            await asyncio.sleep(0.02)


def claimed(url: str, kind: CallbackKind = CallbackKind.WALLET) -> ClaimedCallback:
    """A callback as a worker holds it after claiming it: its first attempt, to `url`, of merchant "M"."""
    return ClaimedCallback(
        id=1,
        fence=1,
        kind=kind,
        merchant_id="M",
        transaction_ref="T",
        url=url,
        payload=b"{}",
        svc_signature="s",
        signed_ids=None,
        event_key=1,
        attempt_offset=0,
        attempt_number=1,
        max_attempts=3,
        created_at_unix=0,
        signing=None,
    )

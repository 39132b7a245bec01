from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI
from sqlalchemy import select

from kasir.callbacks.models import Callback, CallbackAttempt, CallbackKind
from kasir.callbacks.service import callback_outbox
from kasir.db import Database


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
        return int((await session.execute(newest)).scalar_one())  # the outbox hands back no id: none needs it


async def load(database: Database, callback_id: int) -> tuple[Callback, list[CallbackAttempt]]:
    async with database.unit_of_work(read_only=True) as session:
        callback = await session.get(Callback, callback_id)
        assert callback is not None
        attempts = (
            (
                await session.execute(
                    select(CallbackAttempt)
                    .where(CallbackAttempt.callback_id == callback_id)
                    .order_by(CallbackAttempt.id)
                )
            )
            .scalars()
            .all()
        )
        return callback, list(attempts)


async def wait_status(database: Database, callback_id: int, status: str, timeout: float = 15) -> Callback:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        callback, _ = await load(database, callback_id)
        if callback.status == status:
            return callback
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"callback {callback_id} is {callback.status}, expected {status}")
        await asyncio.sleep(0.05)


def db(app: FastAPI) -> Database:
    return app.state.database


async def wait_attempts(database: Database, callback_id: int, count: int, timeout: float = 15) -> Callback:
    """Wait until `count` attempts of the callback are recorded (not merely received)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        callback, attempts = await load(database, callback_id)
        if len(attempts) >= count and callback.status != "delivering":
            return callback
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"callback {callback_id} has {len(attempts)} attempts, expected {count}")
        await asyncio.sleep(0.05)

"""The idempotency component itself: a key held by a running request, expiry, the purge."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from fastapi import FastAPI
from sqlalchemy import select

from kasir.config import Settings
from kasir.errors import RequestInProgress
from kasir.idempotency import service
from kasir.idempotency.models import IdempotencyKey
from kasir.idempotency.repository import idempotency_repository
from kasir.kit.clock import clock
from tests.support.builders import make_merchant

SCOPE = "POST /test"


async def test_a_key_held_by_a_running_request_answers_409_after_a_short_wait_on_postgresql(
    app: FastAPI, settings: Settings
) -> None:
    """Two sessions: the first holds the key (its unit of work still open), the second waits for the key's
    row at most KASIR_IDEMPOTENCY_WAIT_SECONDS, then is told to come back; once the first commits, the
    second gets its answer."""
    if settings.resolved_database_url.startswith("sqlite"):
        pytest.skip("on SQLite a process's writers take turns: a first request has always finished")
    database = app.state.database
    merchant = await make_merchant(app)
    claimed, finish = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with database.unit_of_work() as session:
            assert await service._claim(session, merchant.id, SCOPE, "held", "hash-1", b"{}") is None
            claimed.set()
            await finish.wait()
            await idempotency_repository.answer(session, merchant.id, SCOPE, "held", 200, "{}", '{"ok":true}')

    holder = asyncio.create_task(first())
    await claimed.wait()
    started = time.monotonic()
    with pytest.raises(RequestInProgress) as refused:
        async with database.unit_of_work() as session:
            await service._claim(session, merchant.id, SCOPE, "held", "hash-1", b"{}")
    waited = time.monotonic() - started
    assert settings.idempotency_wait_seconds * 0.9 <= waited < settings.idempotency_wait_seconds + 2
    assert refused.value.headers == {"Retry-After": "1"}
    finish.set()
    await holder
    async with database.unit_of_work() as session:
        stored = await service._claim(session, merchant.id, SCOPE, "held", "hash-1", b"{}")
    assert stored is not None
    assert (stored.response_status, stored.response_body) == (200, '{"ok":true}')


async def test_an_expired_key_is_a_new_key_and_the_purge_removes_it(app: FastAPI) -> None:
    database = app.state.database
    merchant = await make_merchant(app)
    async with database.unit_of_work() as session:
        assert await service._claim(session, merchant.id, SCOPE, "old", "hash-1", b"{}") is None
        await idempotency_repository.answer(session, merchant.id, SCOPE, "old", 200, "{}", "{}")
    clock.advance(24 * 3600 + 1)
    async with database.unit_of_work() as session:
        assert await service._claim(session, merchant.id, SCOPE, "old", "hash-2", b"{}") is None  # taken over
        await idempotency_repository.answer(session, merchant.id, SCOPE, "old", 201, "{}", "{}")
    service._purged_at.clear()
    clock.advance(24 * 3600 + 1)
    assert await service.purge_expired_keys(database) >= 1
    async with database.unit_of_work(read_only=True) as session:
        left = await session.scalar(select(IdempotencyKey.id).where(IdempotencyKey.merchant_id == merchant.id))
    assert left is None
    clock.advance(timedelta(seconds=10).total_seconds())
    assert await service.purge_expired_keys(database) == 0  # at most once a minute


def test_the_worker_runs_the_purge() -> None:
    """Without it the table only grows: the purge is one of the worker's scheduled jobs."""
    from kasir.callbacks.worker import expiry_jobs

    assert service.purge_expired_keys in expiry_jobs()

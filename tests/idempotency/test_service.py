"""The idempotency component itself: a key held by a running request, expiry, the purge."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response
from sqlalchemy import select, text

from kasir.config import Settings
from kasir.db import Session, fetch_value
from kasir.errors import RequestInProgress, UnprocessableEntity
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


async def test_a_claim_leaves_the_wait_of_the_rest_of_its_unit_as_it_was_on_postgresql(
    app: FastAPI, settings: Settings
) -> None:
    """The claim bounds its own wait (lock_timeout, set and set back by its one statement); the handler's
    row locks after it wait as they would without a key: a claimed key, and a key replayed."""
    if settings.resolved_database_url.startswith("sqlite"):
        pytest.skip("on SQLite a process's writers take turns: there is no lock wait to bound")
    database = app.state.database
    merchant = await make_merchant(app)
    async with database.unit_of_work() as session:
        before = await fetch_value(session, text("SHOW lock_timeout"))
        assert await service._claim(session, merchant.id, SCOPE, "restored", "hash-1", b"{}") is None
        assert await fetch_value(session, text("SHOW lock_timeout")) == before
        await idempotency_repository.answer(session, merchant.id, SCOPE, "restored", 200, "{}", "{}")
    async with database.unit_of_work() as session:
        assert await service._claim(session, merchant.id, SCOPE, "restored", "hash-1", b"{}") is not None
        assert await fetch_value(session, text("SHOW lock_timeout")) == before
    assert before == "0"  # no limit: what a row lock of the handler waits, as PostgreSQL's default


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
        left = await fetch_value(session, select(IdempotencyKey.id).where(IdempotencyKey.merchant_id == merchant.id))
    assert left is None
    clock.advance(timedelta(seconds=10).total_seconds())
    assert await service.purge_expired_keys(database) == 0  # at most once a minute


class _TooMuch(UnprocessableEntity):
    """A refusal kept with its key, as a handler raises it after writing."""


def _request() -> Request:
    return Request({"type": "http", "method": "POST", "path": "/test", "headers": [], "query_string": b""})


async def _key_exists(app: FastAPI, merchant_id: str, key: str) -> bool:
    async with app.state.database.unit_of_work(read_only=True) as session:
        return await idempotency_repository.find(session, merchant_id, SCOPE, key) is not None


async def test_a_refusal_after_writes_undoes_them_and_is_the_keys_answer(app: FastAPI) -> None:
    """The handler's unit rolls back whole (what it wrote goes); a second unit keeps the refusal with the
    key, and the key's retry replays it without running the handler again."""
    database = app.state.database
    merchant = await make_merchant(app)
    calls = 0

    async def handler(session: Session) -> Response:
        nonlocal calls
        calls += 1
        assert await service._claim(session, merchant.id, SCOPE, "written-by-the-handler", "h", b"{}") is None
        raise _TooMuch("refund_amount exceeds what was paid", field="refund_amount")

    async def once() -> Response:
        return await service.run_once(
            _request(), database, "refused", merchant_id=merchant.id, scope=SCOPE, body=b"{}", handler=handler
        )

    first = await once()
    assert first.status_code == 422
    assert not await _key_exists(app, merchant.id, "written-by-the-handler")
    again = await once()
    assert (again.status_code, again.headers[service.REPLAYED_HEADER]) == (422, "true")
    assert bytes(again.body) == bytes(first.body)
    assert calls == 1


async def test_a_refusal_yields_to_an_answer_stored_in_between(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the handler's rolled-back unit and the one that keeps its refusal, a retry of the same
    request may take the key and answer it: that answer is the key's, and this request replays it."""
    database = app.state.database
    merchant = await make_merchant(app)
    fingerprint = service.request_fingerprint(b"{}")

    async def handler(session: Session) -> Response:
        raise _TooMuch("refused", field="refund_amount")

    async def a_retry_answers_the_key() -> None:
        async with database.unit_of_work() as session:
            assert await service._claim(session, merchant.id, SCOPE, "raced", fingerprint, b"{}") is None
            await idempotency_repository.answer(session, merchant.id, SCOPE, "raced", 200, "{}", '{"paid":true}')

    keep_refusal = service._keep_refusal

    async def retry_first(*args: Any) -> Response:
        await a_retry_answers_the_key()
        return await keep_refusal(*args)

    monkeypatch.setattr(service, "_keep_refusal", retry_first)
    answer = await service.run_once(
        _request(), database, "raced", merchant_id=merchant.id, scope=SCOPE, body=b"{}", handler=handler
    )
    assert (answer.status_code, bytes(answer.body)) == (200, b'{"paid":true}')
    assert answer.headers[service.REPLAYED_HEADER] == "true"


def test_the_worker_runs_the_purge() -> None:
    """Without it the table only grows: the purge is one of the worker's scheduled jobs."""
    from kasir.callbacks.worker import expiry_jobs

    assert service.purge_expired_keys in expiry_jobs()

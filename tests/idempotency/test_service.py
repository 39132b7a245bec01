"""The idempotency component itself: a key held by a running request, expiry, the purge."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response
from sqlalchemy import func, select

from kasir.callbacks.worker import DeliveryWorker
from kasir.config import Settings
from kasir.db import Database, Session, fetch_value
from kasir.errors import RequestInProgress, UnprocessableEntity
from kasir.idempotency import jobs, service
from kasir.idempotency.repository import NewKey, idempotency_repository
from kasir.kit.clock import clock
from tests.support.builders import make_merchant
from tests.support.worker import next_expiry_pass

SCOPE = "POST /test"
# Only a hang guard, not a bound on speed: a request that waits on another without a bound would wait here
# for ever, as the other lets go only when the test tells it to.
HANG_GUARD_SECONDS = 60.0


def _request() -> Request:
    return Request({"type": "http", "method": "POST", "path": "/test", "headers": [], "query_string": b""})


async def once(
    database: Database, merchant_id: str, key: str, handler: service.Handler, body: bytes = b"{}"
) -> Response:
    """A keyed request of route SCOPE, as an endpoint runs it."""
    return await service.run_once(
        _request(), database, key, merchant_id=merchant_id, scope=SCOPE, body=body, handler=handler
    )


def answering(status: int, body: str = "{}") -> service.Handler:
    async def handler(session: Session) -> Response:
        return Response(body, status_code=status)

    return handler


async def never_runs(session: Session) -> Response:
    raise AssertionError("the key's answer is stored: the handler does not run again")


async def test_a_key_held_by_a_running_request_answers_409_after_a_short_wait_on_postgresql(
    app: FastAPI, settings: Settings
) -> None:
    """Two requests: the first holds the key (its unit of work still open), the second waits for the key's
    row at most KASIR_IDEMPOTENCY_WAIT_SECONDS, then is told to come back; once the first commits, its
    answer is the key's."""
    if settings.resolved_database_url.startswith("sqlite"):
        pytest.skip("on SQLite a process's writers take turns: a first request has always finished")
    database = app.state.database
    merchant = await make_merchant(app)
    claimed, finish = asyncio.Event(), asyncio.Event()

    async def holds_the_key(session: Session) -> Response:
        claimed.set()
        await finish.wait()
        return Response('{"ok":true}', status_code=200)

    holder = asyncio.create_task(once(database, merchant.id, "held", holds_the_key))
    try:
        await claimed.wait()
        started = time.monotonic()
        with pytest.raises(RequestInProgress) as refused:
            async with asyncio.timeout(HANG_GUARD_SECONDS):
                await once(database, merchant.id, "held", never_runs)
        waited = time.monotonic() - started
        assert not holder.done()  # told to come back while the first still holds the key: its wait has a bound
    finally:
        finish.set()  # the first request ends whatever happened: its connection goes back to the pool
        first = await holder
    # Wall-clock time: the bound is PostgreSQL's lock_timeout, which runs on it (it did wait for the row).
    assert waited >= settings.idempotency_wait_seconds * 0.9
    assert refused.value.headers == {"Retry-After": "1"}
    assert first.status_code == 200
    replayed = await once(database, merchant.id, "held", never_runs)
    assert (replayed.status_code, bytes(replayed.body)) == (200, b'{"ok":true}')
    assert replayed.headers[service.REPLAYED_HEADER] == "true"


async def test_a_handler_after_a_claim_waits_for_rows_as_without_a_key_on_postgresql(
    app: FastAPI, settings: Settings, worker: DeliveryWorker
) -> None:
    """The claim bounds its own wait (lock_timeout, set and set back by its one statement), and so does the
    look-up of a key found taken; the handler's row locks after either wait as they would without a key: a
    new key's handler, and the handler of a key taken over once it expired."""
    if settings.resolved_database_url.startswith("sqlite"):
        pytest.skip("on SQLite a process's writers take turns: there is no lock wait to bound")
    database = app.state.database
    merchant = await make_merchant(app)
    async with database.unit_of_work() as session:
        before = await fetch_value(session, select(func.current_setting("lock_timeout")))
    seen: list[str] = []

    async def shows_its_wait(session: Session) -> Response:
        seen.append(await fetch_value(session, select(func.current_setting("lock_timeout"))))
        return Response("{}", status_code=200)

    assert (await once(database, merchant.id, "restored", shows_its_wait)).status_code == 200
    await expired_but_not_purged(app, merchant.id, "restored")
    assert (await once(database, merchant.id, "restored", shows_its_wait)).status_code == 200
    assert seen == [before, before]
    assert before == "0"  # no limit: what a row lock of the handler waits, as PostgreSQL's default


async def expired_but_not_purged(app: FastAPI, merchant_id: str, key: str) -> None:
    """Move the clock past the key's expiry, the test's worker (the `worker` fixture) having purged half a
    minute before it: the key is expired and still there (the worker purges at most once a minute), so it is
    taken over, not made anew.

    Wall-clock time: the clock moves with it, and the worker's minute is measured on it; each half of the
    minute leaves a step (a pass of the worker, a request) half a minute of it. Should the worker's last
    purge, made in an earlier test on the session's clock, fall just before, it may purge the key here: the
    key is then made anew, which the test's assertions hold for too.
    """
    async with app.state.database.unit_of_work(read_only=True) as session:
        stored = await idempotency_repository.find(session, merchant_id, SCOPE, key)
    assert stored is not None
    clock.advance((stored.expires_at - clock.now()).total_seconds() - 30)
    await next_expiry_pass(app)  # it purged now, unless it did within the last minute
    clock.advance(31)


async def _key_exists(app: FastAPI, merchant_id: str, key: str) -> bool:
    async with app.state.database.unit_of_work(read_only=True) as session:
        return await idempotency_repository.find(session, merchant_id, SCOPE, key) is not None


async def test_an_expired_key_is_a_new_key_and_the_purge_removes_it(app: FastAPI) -> None:
    """A key past its 24 hours is a new key for whoever sends it; the purge deletes expired keys, at most once
    a minute. Wall-clock time: the clock moves with it, and the purge's minute is measured on it; each step
    below has half a minute of it to spare."""
    database = app.state.database
    merchant = await make_merchant(app)
    assert (await once(database, merchant.id, "old", answering(200))).status_code == 200
    clock.advance(service.TTL.total_seconds() + 1)
    # Expired: a new key (another body is no reuse), the handler runs.
    assert (await once(database, merchant.id, "old", answering(201), body=b'{"a":1}')).status_code == 201
    clock.advance(60)
    assert (await once(database, merchant.id, "later", answering(200))).status_code == 200
    async with database.unit_of_work(read_only=True) as session:
        later = await idempotency_repository.find(session, merchant.id, SCOPE, "later")
    assert later is not None
    clock.advance((later.expires_at - clock.now()).total_seconds() - 30)  # "old" has expired, "later" has not
    # Listed exception (docs/contributor/tests.md): the purge's once-a-minute memory is the module's, per
    # Database, and every earlier test's worker on the session's Database moved it, on clocks of its own;
    # clearing it is the only way to a known start. No await from here to the purge: a worker would run
    # between awaits only.
    jobs._purged_at.clear()
    assert await jobs.purge_expired_keys(database) >= 1
    assert not await _key_exists(app, merchant.id, "old")
    assert await _key_exists(app, merchant.id, "later")
    clock.advance(31)  # "later" has expired now, within the minute of the last purge: it stays
    assert await jobs.purge_expired_keys(database) == 0  # at most once a minute
    assert await _key_exists(app, merchant.id, "later")
    clock.advance(30)
    await jobs.purge_expired_keys(database)  # it, or the worker's own pass, purges "later" now
    assert not await _key_exists(app, merchant.id, "later")


class _TooMuch(UnprocessableEntity):
    """A refusal kept with its key, as a handler raises it after writing."""


async def test_a_refusal_after_writes_undoes_them_and_is_the_keys_answer(app: FastAPI) -> None:
    """The handler's unit rolls back whole (what it wrote goes); a second unit keeps the refusal with the
    key, and the key's retry replays it without running the handler again."""
    database = app.state.database
    merchant = await make_merchant(app)
    calls = 0

    async def handler(session: Session) -> Response:
        nonlocal calls
        calls += 1
        now = clock.now()  # a write of the handler's own: another key's row
        written = NewKey(merchant.id, SCOPE, "written-by-the-handler", "h", now, now + service.TTL)
        assert await idempotency_repository.claim(session, written, wait_seconds=1)
        raise _TooMuch("refund_amount exceeds what was paid", field="refund_amount")

    first = await once(database, merchant.id, "refused", handler)
    assert first.status_code == 422
    assert not await _key_exists(app, merchant.id, "written-by-the-handler")
    again = await once(database, merchant.id, "refused", handler)
    assert (again.status_code, again.headers[service.REPLAYED_HEADER]) == (422, "true")
    assert bytes(again.body) == bytes(first.body)
    assert calls == 1


async def test_a_refusal_yields_to_an_answer_stored_in_between(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the handler's rolled-back unit and the one that keeps its refusal, a retry of the same
    request may take the key and answer it: that answer is the key's, and this request replays it."""
    database = app.state.database
    merchant = await make_merchant(app)

    async def handler(session: Session) -> Response:
        raise _TooMuch("refused", field="refund_amount")

    # Listed exception (docs/contributor/tests.md): nothing public runs between the two units, and on SQLite
    # no other request of the process can (its writers take turns): the retry is put there by wrapping the step.
    keep_refusal = service._keep_refusal

    async def retry_first(*args: Any) -> Response:
        retried = await once(database, merchant.id, "raced", answering(200, '{"paid":true}'))
        assert retried.status_code == 200
        return await keep_refusal(*args)

    monkeypatch.setattr(service, "_keep_refusal", retry_first)
    answer = await once(database, merchant.id, "raced", handler)
    assert (answer.status_code, bytes(answer.body)) == (200, b'{"paid":true}')
    assert answer.headers[service.REPLAYED_HEADER] == "true"


def test_the_worker_runs_the_purge() -> None:
    """Without it the table only grows: the purge is one of the worker's scheduled jobs."""
    from kasir.jobs import JOBS

    assert jobs.purge_expired_keys in JOBS


@pytest.mark.parametrize(
    ("first", "retry"),
    [
        (b'{"amount":10000,"items":[1,2]}', b'{ "items" : [ 1, 2 ],\n  "amount" : 10000.0 }'),
        (b'{"amount":10000}', b'{"amount":1e4}'),
        (b'{"amount":10000}', b'{"amount":1.0000E+4}'),
        (b'{"amount":0}', b'{"amount":-0.0}'),
        (b'{"url":"https://a/b","name":"A\xc3\xa9"}', b'{"name":"\\u0041\\u00e9","url":"https:\\/\\/a\\/b"}'),
        (b'{"n":123456789012345678901234567890.5}', b'{"n":1234567890123456789012345678905e-1}'),
    ],
)
async def test_bodies_with_equal_json_values_are_one_request(app: FastAPI, first: bytes, retry: bytes) -> None:
    """docs/decisions.md §12.5: key order, whitespace, escapes and the spelling of a number do not matter."""
    database = app.state.database
    merchant = await make_merchant(app)
    answered = await once(database, merchant.id, "k", answering(200, '{"paid":true}'), body=first)
    replayed = await once(database, merchant.id, "k", never_runs, body=retry)
    assert replayed.headers[service.REPLAYED_HEADER] == "true"
    assert (replayed.status_code, bytes(replayed.body)) == (200, bytes(answered.body))


@pytest.mark.parametrize(
    ("first", "retry"),
    [
        (b'{"amount":10000}', b'{"amount":10000.5}'),
        (b'{"amount":10000}', b'{"amount":"10000"}'),
        # Beyond a float's (and Decimal's default context's) precision: still another number.
        (b'{"n":12345678901234567890123456789012345}', b'{"n":12345678901234567890123456789012346}'),
        (b'{"n":0.1000000000000000000000000000000001}', b'{"n":0.1}'),
        (b'{"items":[1,2]}', b'{"items":[2,1]}'),
        (b'{"flag":true}', b'{"flag":1}'),
        (b'{"note":null}', b'{"note":""}'),
        (b'{"note":null}', b"{}"),
        (b'{"name":"a"}', b'{"name":"A"}'),
    ],
)
async def test_bodies_with_other_json_values_are_another_request(app: FastAPI, first: bytes, retry: bytes) -> None:
    database = app.state.database
    merchant = await make_merchant(app)
    assert (await once(database, merchant.id, "k", answering(200), body=first)).status_code == 200
    with pytest.raises(service.IdempotencyKeyReused):
        await once(database, merchant.id, "k", never_runs, body=retry)


async def test_a_key_stored_with_its_raw_bodys_fingerprint_still_replays_that_body(app: FastAPI) -> None:
    """Keys stored before §12.5 hold a keyed hash of the raw bytes (`raw_fingerprint`) for their 24 hours: a
    byte-identical retry still replays; the same JSON written another way is refused, as it was then."""
    database = app.state.database
    merchant = await make_merchant(app)
    body = b'{"amount":10000,"order_id":"O-1"}'
    now = clock.now()
    stored = NewKey(merchant.id, SCOPE, "old", service.raw_fingerprint(body), now, now + service.TTL)
    async with database.unit_of_work() as session:
        assert await idempotency_repository.claim(session, stored, wait_seconds=1)
        await idempotency_repository.answer(session, merchant.id, SCOPE, "old", 200, "{}", '{"paid":true}')
    replayed = await once(database, merchant.id, "old", never_runs, body=body)
    assert (replayed.status_code, bytes(replayed.body)) == (200, b'{"paid":true}')
    assert replayed.headers[service.REPLAYED_HEADER] == "true"
    with pytest.raises(service.IdempotencyKeyReused):
        await once(database, merchant.id, "old", never_runs, body=b'{"order_id":"O-1","amount":10000}')

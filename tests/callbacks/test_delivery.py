"""Delivery policies, schedule, order and rollback (docs/decisions.md §8), against a real receiver."""

from __future__ import annotations

import json

import pytest

from kasir.callbacks.models import Callback, CallbackKind
from kasir.callbacks.service import callback_outbox
from kasir.db import fetch
from kasir.kit.clock import clock
from tests.callbacks.helpers import db, load, record, wait_attempts, wait_status
from tests.support.builders import make_merchant
from tests.support.receiver import Answer
from tests.support.wire.callbacks import notify_signature
from tests.support.worker import settled_callbacks, worker_idle


async def test_delivered_at_once_with_signature_header_and_query(app, receiver):
    merchant = await make_merchant(app)
    url = receiver.url("/cb") + "?order=42"
    callback_id = await record(
        db(app),
        merchant_id=merchant.id,
        url=url,
        svc_signature="abc123",
        payload={"transaction_id": "TX-1", "amount": 15000, "nama": "Budi Śantoso"},
    )
    [request] = await receiver.wait_for(1)
    assert request.path == "/cb"
    assert request.query == {"order": "42", "svc-signature": "abc123"}  # keeps the merchant's own query
    assert request.headers["svc-signature"] == "abc123"
    assert request.headers["content-type"] == "application/json"
    assert request.json() == {"transaction_id": "TX-1", "amount": 15000, "nama": "Budi Śantoso"}
    callback = await wait_status(db(app), callback_id, "delivered")
    _, attempts = await load(db(app), callback_id)
    assert [a.http_status for a in attempts] == [200]
    assert attempts[0].accepted
    assert json.loads(attempts[0].response_excerpt) == {"message": "ok"}
    assert callback.delivered_at is not None


async def test_rolled_back_request_sends_nothing(app, receiver):
    merchant = await make_merchant(app)
    database = db(app)

    async def request_that_fails_after_recording() -> None:
        async with database.unit_of_work() as session:
            await callback_outbox.record(
                session,
                kind=CallbackKind.WALLET,
                merchant_id=merchant.id,
                transaction_ref="TX-ROLLBACK",
                event="PAID",
                url=receiver.url(),
                payload={"x": 1},
            )
            raise RuntimeError("the request failed after recording its callback")

    with pytest.raises(RuntimeError):
        await request_that_fails_after_recording()
    await worker_idle(app)  # it has looked for due callbacks since: had one been kept, it was sent
    assert receiver.requests == []
    async with database.unit_of_work(read_only=True) as session:
        from sqlalchemy import select

        found = await fetch(session, select(Callback.id).where(Callback.merchant_id == merchant.id))
    assert found == []


async def advance_until_attempts(app, callback_id: int, count: int, seconds: float) -> None:
    clock.advance(seconds)
    await wait_attempts(db(app), callback_id, count)


async def test_wallet_policy_two_retries_on_schedule_then_failed(app, receiver):
    receiver.answer(default=Answer(status=500, body={"message": "down"}))
    merchant = await make_merchant(app)
    callback_id = await record(db(app), merchant_id=merchant.id, url=receiver.url())
    callback = await wait_attempts(db(app), callback_id, 1)
    assert callback.status == "pending"
    wait = (callback.next_attempt_at - clock.now()).total_seconds()
    assert 8.5 < wait <= 11.1  # 10 s ± 10 % jitter

    await worker_idle(app)  # it has looked for due callbacks since: this one is not due yet
    assert len(receiver.requests) == 1
    assert (await load(db(app), callback_id))[0].attempts_made == 1
    await advance_until_attempts(app, callback_id, 2, 11.5)
    callback, _ = await load(db(app), callback_id)
    wait = (callback.next_attempt_at - clock.now()).total_seconds()
    assert 50 < wait <= 66.1  # 60 s ± 10 %
    await advance_until_attempts(app, callback_id, 3, 67)

    callback = await wait_status(db(app), callback_id, "failed")
    _, attempts = await load(db(app), callback_id)
    assert [a.number for a in attempts] == [1, 2, 3]  # first try + 2 retries
    assert all(a.http_status == 500 and not a.accepted for a in attempts)
    clock.advance(400)
    await worker_idle(app)  # it has looked for due callbacks since, with the schedule long over
    assert len(receiver.requests) == 3  # nothing after the last attempt
    assert (await load(db(app), callback_id))[0].status == "failed"


async def test_payment_page_acceptance_rule_and_three_retries(app, receiver):
    receiver.answer(
        Answer(status=200, body="OK", content_type="text/plain"),  # wrong content type
        Answer(status=200, body={"status": "ok"}),  # JSON without `message`
        Answer(status=200, body={"message": 42}),  # `message` not a string
        Answer(status=200, body={"message": "received"}),
    )
    merchant = await make_merchant(app)
    callback_id = await record(db(app), merchant_id=merchant.id, url=receiver.url(), kind=CallbackKind.PAYMENT_PAGE)
    await wait_attempts(db(app), callback_id, 1)
    for count, seconds in ((2, 11.5), (3, 67), (4, 331)):
        await advance_until_attempts(app, callback_id, count, seconds)
    callback = await wait_status(db(app), callback_id, "delivered")
    assert callback.attempts_made == 4
    # The payment page callback carries the header only, not the query parameter.
    assert "svc-signature" not in receiver.requests[0].query


async def test_payment_page_fails_after_four_attempts(app, receiver):
    receiver.answer(default=Answer(status=200, body="[]"))
    merchant = await make_merchant(app)
    callback_id = await record(db(app), merchant_id=merchant.id, url=receiver.url(), kind=CallbackKind.PAYMENT_PAGE)
    await wait_attempts(db(app), callback_id, 1)
    for count, seconds in ((2, 11.5), (3, 67), (4, 331)):
        await advance_until_attempts(app, callback_id, count, seconds)
    await wait_status(db(app), callback_id, "failed")


async def test_bnpl_notification_is_signed_per_snap_notify(app, receiver):
    merchant = await make_merchant(app)
    url = receiver.url("/bnpl/notify")
    await record(
        db(app),
        merchant_id=merchant.id,
        url=url,
        kind=CallbackKind.BNPL,
        svc_signature=None,
        payload={"originalReferenceNo": "R1", "latestTransactionStatus": "00"},
    )
    [request] = await receiver.wait_for(1)
    headers = request.headers
    assert headers["x-partner-id"] == merchant.id
    assert headers["x-version"] == "v1"
    expected = notify_signature(merchant.credentials.client_secret, url, request.body, headers["x-timestamp"])
    assert headers["x-signature"] == expected
    assert "svc-signature" not in headers


async def test_bnpl_policy_three_retries(app, receiver):
    receiver.answer(default=Answer(status=503))
    merchant = await make_merchant(app)
    callback_id = await record(
        db(app), merchant_id=merchant.id, url=receiver.url(), kind=CallbackKind.BNPL, svc_signature=None
    )
    await wait_attempts(db(app), callback_id, 1)
    for count, seconds in ((2, 11.5), (3, 67), (4, 331)):
        await advance_until_attempts(app, callback_id, count, seconds)
    callback = await wait_status(db(app), callback_id, "failed")
    assert callback.attempts_made == 4


async def test_redirect_is_not_followed_and_counts_as_failure(app, receiver):
    receiver.answer(Answer(status=302, body="", location=receiver.url("/elsewhere")))
    merchant = await make_merchant(app)
    callback_id = await record(db(app), merchant_id=merchant.id, url=receiver.url("/cb"))
    await wait_attempts(db(app), callback_id, 1)
    await worker_idle(app)
    assert [r.path for r in receiver.requests] == ["/cb"]
    callback, attempts = await load(db(app), callback_id)
    assert callback.status == "pending"
    assert attempts[0].http_status == 302
    assert "redirect" in attempts[0].error


async def test_timeout_counts_as_failure(app, receiver):
    receiver.answer(Answer(status=200, delay=3))  # the test settings' timeout is 2 s
    merchant = await make_merchant(app)
    callback_id = await record(db(app), merchant_id=merchant.id, url=receiver.url())
    await receiver.wait_for(1)
    await wait_attempts(db(app), callback_id, 1)
    callback, attempts = await load(db(app), callback_id)
    assert attempts[0].http_status is None
    assert "timeout" in attempts[0].error
    assert callback.status == "pending"


async def test_connection_refused_is_recorded(app, worker):
    from tests.support.postgres import free_port

    merchant = await make_merchant(app)
    callback_id = await record(db(app), merchant_id=merchant.id, url=f"http://127.0.0.1:{free_port()}/cb")
    await wait_attempts(db(app), callback_id, 1)
    _, attempts = await load(db(app), callback_id)
    assert attempts[0].error.startswith("ConnectError")


async def test_callbacks_of_one_transaction_are_delivered_in_order(app, receiver):
    receiver.answer(Answer(status=500))  # the first attempt of the first callback fails
    merchant = await make_merchant(app)
    first = await record(db(app), merchant_id=merchant.id, url=receiver.url(), transaction_ref="TX-ORDER", event="PAID")
    second = await record(
        db(app), merchant_id=merchant.id, url=receiver.url(), transaction_ref="TX-ORDER", event="REFUNDED"
    )
    await wait_attempts(db(app), first, 1)
    # Recorded once the first attempt took the 500: sent together, either could have drawn it.
    other = await record(db(app), merchant_id=merchant.id, url=receiver.url(), transaction_ref="TX-OTHER")
    await wait_attempts(db(app), other, 1)
    await settled_callbacks(app, merchant.id)  # whatever may go out now has gone out
    # The other transaction is not held up; the later event of TX-ORDER waits for the earlier one.
    events = [(r.json()["transaction_id"], r.json()["event"]) for r in receiver.requests]
    assert sorted(events) == [("TX-ORDER", "PAID"), ("TX-OTHER", "PAID")]
    assert (await load(db(app), second))[0].attempts_made == 0
    clock.advance(11.5)
    await wait_attempts(db(app), second, 1)
    events = [(r.json()["transaction_id"], r.json()["event"]) for r in receiver.requests]
    events = [event for event in events if event[0] == "TX-ORDER"]
    assert events == [("TX-ORDER", "PAID"), ("TX-ORDER", "PAID"), ("TX-ORDER", "REFUNDED")]
    for callback_id in (first, second, other):
        await wait_status(db(app), callback_id, "delivered")

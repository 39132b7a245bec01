"""Processors are asked with no unit of work open (kasir.processors.calls), on both databases.

- While the acquirer decides a card charge, the charge's attempt is committed as SUBMITTED and any
  other write goes through (on SQLite a unit holding the write seat would block it).
- A processor that does not answer (503): nothing stays recorded, and the key's retry runs afresh.
- A second refund while one is at the issuer: 409 `03`, not kept with its key.
- A process that stopped between asking and recording: the worker's job asks again and records,
  the key's answer with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from kasir.auth import basic
from kasir.card.models import CardAttempt, CardOrder
from kasir.card.service import card_service
from kasir.card.states import CardAttemptStatus
from kasir.db import fetch
from kasir.idempotency.repository import NewKey, idempotency_repository
from kasir.idempotency.service import KeyRef, request_fingerprint
from kasir.kit.clock import clock
from kasir.processors.calls import PendingCall, finish_stalled_calls, stalled_after
from kasir.processors.models import ProcessorCall
from kasir.processors.protocols import CardCharge, CardDecision, ProcessorUnavailable
from kasir.simulator import SimulatedAcquirer, SimulatedIssuer
from kasir.wallet.models import WalletTransaction
from tests.support.builders import make_merchant
from tests.support.wire import auth, compact
from tests.support.wire.card import APPROVED, charge_body, jakarta_in, post_charge
from tests.support.wire.wallet import REFUND, create, dummy_payment, ref, wallet_headers

TIMEOUT = 30  # seconds: far beyond any of these steps on a loaded machine; only a deadlock reaches it


async def scalar(app: FastAPI, statement: Any) -> Any:
    async with app.state.database.unit_of_work(read_only=True) as session:
        rows = await fetch(session, statement)
    assert len(rows) <= 1, rows
    return rows[0][0] if rows else None


def hold_processor(
    monkeypatch: pytest.MonkeyPatch, owner: type, name: str, during: Callable[[], Awaitable[None]] | None = None
) -> tuple[asyncio.Event, asyncio.Event]:
    """Make `owner.name` wait at `release` (after running `during`), telling `entered` when it is asked."""
    entered, release = asyncio.Event(), asyncio.Event()
    original = getattr(owner, name)

    async def held(self: Any, *args: Any, **kwargs: Any) -> Any:
        entered.set()
        if during is not None:
            await during()
        await asyncio.wait_for(release.wait(), TIMEOUT)
        return await original(self, *args, **kwargs)

    monkeypatch.setattr(owner, name, held)
    return entered, release


async def test_the_acquirer_is_asked_with_no_unit_of_work_open(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    body = charge_body(number=APPROVED)
    seen: dict[str, Any] = {}

    async def meanwhile() -> None:
        # The attempt is committed: another connection reads it...
        seen["attempt"] = await scalar(
            app,
            select(CardAttempt.status).join(CardOrder).where(CardOrder.order_id == body["orderId"]),
        )
        # ...and another request writes (a wallet payment): it would wait for ever behind a held write seat.
        seen["wallet"] = await asyncio.wait_for(create(client, merchant), TIMEOUT)

    entered, release = hold_processor(monkeypatch, SimulatedAcquirer, "charge", meanwhile)
    charge = asyncio.create_task(post_charge(client, merchant, body, key="held-charge"))
    await asyncio.wait_for(entered.wait(), TIMEOUT)
    while "wallet" not in seen:
        await asyncio.sleep(0.01)
    # the key has no answer yet: its retry is told to wait
    retry = await post_charge(client, merchant, body, key="held-charge")
    assert retry.status_code == 409, retry.text
    assert retry.json()["statusMessage"] == "REQUEST_IN_PROGRESS"
    release.set()
    response = await asyncio.wait_for(charge, TIMEOUT)
    assert response.status_code == 200, response.text
    assert response.json()["data"]["paymentStatus"] == "SUCCESS"
    assert seen["attempt"] == CardAttemptStatus.SUBMITTED.value
    assert seen["wallet"]["response_code"] == "00"
    assert await scalar(app, select(func.count()).select_from(ProcessorCall)) == 0
    replay = await post_charge(client, merchant, body, key="held-charge")
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json() == response.json()


async def test_an_acquirer_that_does_not_answer_leaves_nothing_and_frees_the_key(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    body = charge_body(number=APPROVED)

    async def unavailable(self: Any, charge: CardCharge) -> CardDecision:
        raise ProcessorUnavailable()

    with monkeypatch.context() as patched:
        patched.setattr(SimulatedAcquirer, "charge", unavailable)
        response = await post_charge(client, merchant, body, key="unanswered")
    assert response.status_code == 503, response.text
    assert (
        await scalar(app, select(func.count()).select_from(CardOrder).where(CardOrder.order_id == body["orderId"])) == 0
    )
    assert await scalar(app, select(func.count()).select_from(ProcessorCall)) == 0
    retry = await post_charge(client, merchant, body, key="unanswered")
    assert retry.status_code == 200, retry.text
    assert "Idempotent-Replayed" not in retry.headers
    assert retry.json()["data"]["paymentStatus"] == "SUCCESS"


async def test_a_second_refund_while_one_is_at_the_issuer_is_refused_and_not_kept(
    app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    merchant = await make_merchant(app)
    tx = await create(client, merchant, amount=100_000)
    assert (await dummy_payment(client, merchant, tx)).json()["response_code"] == "00"

    async def refund(amount: int, key: str) -> httpx.Response:
        body = {**ref(tx), "refund_amount": amount}
        headers = {**wallet_headers(merchant, body), "X-Idempotency-Key": key}
        return await client.post(REFUND, json=body, headers=headers)

    entered, release = hold_processor(monkeypatch, SimulatedIssuer, "refund")
    first = asyncio.create_task(refund(30_000, "refund-1"))
    await asyncio.wait_for(entered.wait(), TIMEOUT)
    second = await refund(20_000, "refund-2")
    assert second.status_code == 409, second.text
    assert second.json()["response_code"] == "03"
    assert "with the processor" in second.json()["response_message"]
    release.set()
    assert (await asyncio.wait_for(first, TIMEOUT)).json()["response_code"] == "00"
    again = await refund(20_000, "refund-2")  # the refusal was not kept with its key
    assert again.status_code == 200, again.text
    assert again.json()["refund_history"][-1]["refund_amount"] == 20_000
    refunded = await scalar(
        app, select(WalletTransaction.refunded_amount).where(WalletTransaction.id == tx["transaction_id"])
    )
    assert refunded == 50_000


@pytest.mark.parametrize("asked", [True, False], ids=["asked-then-stopped", "stopped-before-asking"])
async def test_the_worker_finishes_a_charge_a_stopped_process_left_at_the_acquirer(
    app: FastAPI, client: httpx.AsyncClient, asked: bool
) -> None:
    """Held and asked, never recorded (the process stopped): the worker's job asks the acquirer for the
    attempt's status, records it (SUCCESS, its callback) and gives the key its answer. The order's
    expiredTime passes meanwhile: it is not expired while the acquirer's answer is unrecorded."""
    merchant = await make_merchant(app)
    body = charge_body(number=APPROVED, expired_time=jakarta_in(5))
    database = app.state.database
    raw = compact(body).encode()
    caller = await basic.authenticate(database, auth(merchant), address="127.0.0.1")
    request, card = card_service.parse(raw)
    async with database.unit_of_work() as session:
        pending = await card_service.charge(session, caller, request, card)
        assert isinstance(pending, PendingCall)
        await _claim(session, merchant.id, "stopped", raw)
        await pending.hold(session, KeyRef(merchant.id, "POST /card-v2/v1/charge", "stopped"))
    assert pending.call.card is not None
    if asked:
        await _simulator_acquirer().charge(pending.call.card)  # asked; then the process "stopped"
    # Else the process stopped before asking. Either way the simulator of the worker's process need not
    # remember: it answers `status` by the card Kasir recorded (kasir.processors.calls.recorded_card).
    assert await finish_stalled_calls(database) == 0  # not stalled yet: the request may still record it
    clock.advance(stalled_after().total_seconds() + 1)
    try:
        async with database.unit_of_work() as session:
            assert await card_service.expire(session, pending.call.reference) is False
        # this job, or the app's own worker running the same job meanwhile: one of them records it
        await finish_stalled_calls(database)
    finally:
        clock.reset()
    status = await scalar(app, select(CardOrder.status).where(CardOrder.order_id == body["orderId"]))
    assert status == "SUCCESS"
    assert await scalar(app, select(func.count()).select_from(ProcessorCall)) == 0
    replay = await post_charge(client, merchant, body, key="stopped")
    assert replay.status_code == 200, replay.text
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert replay.json()["data"]["paymentStatus"] == "SUCCESS"


# --- helpers of the last test ------------------------------------------------------------


async def _claim(session: Any, merchant_id: str, key: str, body: bytes) -> None:
    """The key as the charge's request claimed it (kasir.idempotency.service.run_once)."""
    now = clock.now()
    new = NewKey(merchant_id, "POST /card-v2/v1/charge", key, request_fingerprint(body), now, now + timedelta(hours=1))
    assert await idempotency_repository.claim(session, new, wait_seconds=0.5)


def _simulator_acquirer() -> SimulatedAcquirer:
    from kasir.processors.registry import card_acquirer

    acquirer = card_acquirer("CARD")
    assert isinstance(acquirer, SimulatedAcquirer)
    return acquirer

"""A VA payment accepted is never lost to a crash (issue 44 item 6): the payment and its callback are written in one
unit of work (the durable outbox), so a server SIGKILLed the moment it answered leaves the callback to any worker
on the database, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI

from tests.support.builders import make_merchant
from tests.support.receiver import CallbackReceiver
from tests.support.server import ServedKasir
from tests.support.wire.va import check_callback, create, pay

pytestmark = pytest.mark.slow


async def test_a_server_killed_after_accepting_payments_loses_no_callback(
    app: FastAPI, served: ServedKasir, receiver: CallbackReceiver
) -> None:
    merchant = await make_merchant(app)
    async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as http:
        vas = [
            await create(http, merchant, receiver.url(f"/crash-{n}"), system="PARTIAL", amount=40_000) for n in range(3)
        ]
        answers = await asyncio.gather(*(pay(http, merchant, va, 10_000) for va in vas))
    assert [a.status_code for a in answers] == [200, 200, 200]
    await asyncio.to_thread(served.kill)  # no shutdown: whatever the server had not sent yet is still to send
    for n, va in enumerate(vas):
        [callback] = await receiver.wait_for(1, path=f"/crash-{n}")  # this test's worker, another process's rows
        payload = check_callback(callback, merchant, va)
        assert (payload["transaction_status"], payload["payment_details"]["total_amount"]) == ("PARTIALLY_PAID", 10_000)
    await asyncio.to_thread(served.start)  # the fixture stops it as it would a running server

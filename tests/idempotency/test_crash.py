"""A server killed in the middle of keyed charges: the clients' retries with the same keys get their
final answers as soon as the server is back, and every key is charged exactly once.

The key is claimed inside the request's own unit of work, so a kill rolls it back with
everything else (on PostgreSQL the server's connection dies with it and its transaction is
aborted at once): there is no in-progress key left for a takeover timer to free. The previous
design left such keys for 60 s or more on PostgreSQL, answering their retries 409 meanwhile.

No time is measured: a server is either down (the retry cannot connect) or up, and every answer
it gives, the first after a restart included, must be final. A key left in progress would be
answered 409 REQUEST_IN_PROGRESS; a 5xx would be a bug.
"""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import func, select

from kasir.card.models import CardOrder
from kasir.db import fetch_value
from tests.support.builders import make_merchant
from tests.support.server import ServedKasir
from tests.support.wire import compact
from tests.support.wire.card import charge_body, post_charge

pytestmark = pytest.mark.slow

KILLS = 3
CLIENTS = 12
KEYS_PER_CLIENT = 10


async def test_killed_mid_charge_the_retries_with_the_same_key_get_one_charge_each(
    app: FastAPI, settings_env: dict[str, str]
) -> None:
    merchant = await make_merchant(app)
    server = ServedKasir(settings_env)
    await asyncio.to_thread(server.start)
    base_url = server.base_url
    outcomes: dict[str, httpx.Response] = {}
    not_final: list[tuple[str, int, str]] = []
    retried = 0
    clients_done = asyncio.Event()

    async def client_loop(number: int) -> None:
        nonlocal retried
        # No client timeout: a request ends with its answer, or with the connection when the server is killed.
        async with httpx.AsyncClient(base_url=base_url, timeout=None) as http:
            for n in range(KEYS_PER_CLIENT):
                key = f"crash-{number}-{n}-{os.urandom(4).hex()}"
                body = compact(charge_body(mode="OPEN", number=None))
                while True:
                    try:
                        answer = await post_charge(http, merchant, body, key=key)
                    except httpx.TransportError:  # killed, or not back yet: the same key again
                        retried += 1
                        await asyncio.sleep(0.05)
                        continue
                    if answer.status_code >= 500 or answer.status_code == 409:
                        not_final.append((key, answer.status_code, answer.text[:200]))
                    outcomes[key] = answer
                    break

    async def clients() -> None:
        await asyncio.gather(*(client_loop(c) for c in range(CLIENTS)))
        clients_done.set()

    async def killer() -> None:
        for _ in range(KILLS):
            # Once a few keys are answered since the last start: the kill lands among charges in flight.
            answered = len(outcomes)
            while len(outcomes) < answered + CLIENTS and not clients_done.is_set():
                await asyncio.sleep(0.01)
            if clients_done.is_set():
                return
            await asyncio.to_thread(server.kill)
            await asyncio.to_thread(server.start)  # the same port: the clients' URL stays valid

    try:
        async with asyncio.TaskGroup() as group:  # a server that does not come back ends the clients too
            group.create_task(clients())
            group.create_task(killer())
    finally:
        await asyncio.to_thread(server.stop)

    assert not_final == []  # every answer final, the first after each restart too
    assert retried > 0  # the clients did meet the kills
    assert len(outcomes) == CLIENTS * KEYS_PER_CLIENT
    assert {answer.status_code for answer in outcomes.values()} == {200}
    async with app.state.database.unit_of_work(read_only=True) as session:
        orders = await fetch_value(
            session, select(func.count()).select_from(CardOrder).where(CardOrder.merchant_id == merchant.id)
        )
    assert orders == len(outcomes)  # one charge per key, none lost, none doubled
    transaction_ids = {answer.json()["data"]["transactionId"] for answer in outcomes.values()}
    assert len(transaction_ids) == len(outcomes)

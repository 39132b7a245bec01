"""The rule of SQLite's write seat, guarded: nothing slow inside a write unit of work.

KASIR_DEBUG_WRITE_SEAT_SECONDS fails a unit that held the process's write seat longer than
allowed (the suite runs with it on: tests/conftest.py). Here: it catches a DNS look-up made
inside a unit, and the routes that resolve a callback URL do it before their unit opens.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from kasir.callbacks.ssrf import check_callback_url, use_resolver
from kasir.config import Settings
from kasir.db import Database
from kasir.db.sqlite import WriteSeatHeldTooLong
from kasir.simulator import Simulator
from tests.conftest import TEST_DB
from tests.db.probe import ADD, add, metadata, names, names_on_disk
from tests.support.builders import make_merchant
from tests.support.probe_tables import database_with_tables
from tests.support.wire import wallet
from tests.support.wire.card import charge_body, post_charge

SLOW_DNS_SECONDS = 0.4
LIMIT_SECONDS = 0.2


@pytest.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[Database]:
    settings = Settings(data_dir=tmp_path, secret_key="k", debug_write_seat_seconds=LIMIT_SECONDS)
    async with database_with_tables(settings, metadata) as database:
        yield database


@pytest.fixture
def slow_dns() -> Iterator[list[str]]:
    """Every look-up takes SLOW_DNS_SECONDS and finds a public address (nothing is sent anywhere)."""
    looked_up: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        looked_up.append(host)
        await asyncio.sleep(SLOW_DNS_SECONDS)
        return ["93.184.215.14"]

    with use_resolver(resolver):
        yield looked_up


async def test_a_unit_that_waits_on_dns_while_holding_the_seat_fails_and_its_writes_are_undone(
    guarded: Database, slow_dns: list[str], tmp_path: Path
) -> None:
    async def look_up_inside_a_write() -> None:
        async with guarded.unit_of_work() as session:
            await ADD.execute(session, name="written before the look-up")
            await check_callback_url("https://merchant.example/cb", production=True)

    with pytest.raises(WriteSeatHeldTooLong, match="held the SQLite write seat"):
        await look_up_inside_a_write()
    assert slow_dns == ["merchant.example"]
    assert names_on_disk(tmp_path / "kasir.db") == set()
    await add(guarded, "next")  # the seat is free again
    assert await names(guarded) == {"next"}


async def test_a_unit_that_holds_the_seat_across_a_slow_wait_fails_alone_and_its_batch_commits(
    guarded: Database, tmp_path: Path
) -> None:
    """The overheld unit alone fails: a unit that joined its batch before it is committed."""
    joined_wrote, release_joined, slow_asked = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def joined() -> None:
        async with guarded.unit_of_work() as session:
            await ADD.execute(session, name="joined")
            joined_wrote.set()
            await release_joined.wait()

    async def slow() -> None:
        async with guarded.unit_of_work() as session:
            slow_asked.set()
            await ADD.execute(session, name="slow")
            await asyncio.sleep(LIMIT_SECONDS * 2)  # the slow wait (a network call) inside the write

    joined_task = asyncio.create_task(joined())
    await asyncio.wait_for(joined_wrote.wait(), 10)
    slow_task = asyncio.create_task(slow())
    await asyncio.wait_for(slow_asked.wait(), 10)  # waiting for the seat: `joined` leaves its COMMIT to it
    release_joined.set()
    await asyncio.wait_for(joined_task, 10)
    with pytest.raises(WriteSeatHeldTooLong):
        await slow_task
    assert names_on_disk(tmp_path / "kasir.db") == {"joined"}


async def test_waiting_before_the_first_statement_holds_no_seat(guarded: Database, slow_dns: list[str]) -> None:
    async with guarded.unit_of_work() as session:
        await check_callback_url("https://merchant.example/cb", production=True)
        await ADD.execute(session, name="after the look-up")
    assert await names(guarded) == {"after the look-up"}


@pytest.fixture
async def production_with_a_tight_watchdog(app: FastAPI, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(type(settings), "is_production", property(lambda _self: True))
    # Production never simulates (kasir.processors): the simulator stands in here for a real processor.
    monkeypatch.setattr(Simulator, "simulates", False)
    # This event loop's write group (kasir.db.sqlite.SqliteStrategy.group), made here if no write came yet.
    monkeypatch.setattr(app.state.database.strategy.group(), "watchdog_seconds", LIMIT_SECONDS)


# Through the app, which this branch cannot start yet (the rooms are being converted): it runs once
# the rooms are on kasir.db's statements.
@pytest.mark.skipif(TEST_DB != "sqlite", reason="the write seat is SQLite's")
@pytest.mark.usefixtures("production_with_a_tight_watchdog")
async def test_routes_resolve_callback_urls_before_their_unit_of_work(
    app: FastAPI, client: httpx.AsyncClient, slow_dns: list[str]
) -> None:
    """The card charge's ewallet path once resolved the URL inside its write (an unrelated charge waited
    behind it); now every route that takes a callback URL resolves it first."""
    merchant = await make_merchant(app, callback_url="https://merchant.example/default")
    slow_dns.clear()  # the merchant's own default URL was checked as it was set
    url = "https://merchant.example/cb"
    ewallet = charge_body(mode="OPEN", number=None, channel="DANA", callback_url=url, paymentMethod="ewallet")
    answer = await post_charge(client, merchant, ewallet)
    assert answer.status_code == 200, answer.text
    card = charge_body(mode="OPEN", number=None, callback_url=url)
    answer = await post_charge(client, merchant, card)
    assert answer.status_code == 200, answer.text
    body = wallet.create_body(url)
    answer = await wallet.post_wallet(client, merchant, wallet.CREATE, body)
    assert answer.status_code == 200, answer.text
    assert slow_dns.count("merchant.example") == 3
